// The CPU loops of a BatchNorm that also runs the per-channel Scale and the ReLU in place after it (the net's
// fuse_for_training pass, net/fuse.hpp, gives it their work and drops their steps). Separately, the three layers pass
// over the whole blob ten times forward (statistics, normalisation, the kept copy, the scale, the activation) and
// eleven times backward; together the forward writes y = max(0, gamma * x_hat + beta) from the normalized values it
// keeps anyway, and the backward reads dy and x_hat twice (the sums per channel, then dx), which is what BatchNorm's
// own backward reads.
//
// The blob is seen around its channels: `num` items, `channels` channels, `spatial` positions, laid out as its channel
// block says (core/layout.hpp: the value of item n, channel c, position s at ((n * C/b + c / b) * S + s) * b + c % b;
// b 1 when plain, 8 or 16 in blocks, C when channels-last). Each thread takes whole channel blocks, and every sum runs
// in double over items then positions, the plain layout's order, so results do not depend on the layout or on the
// number of threads.
#pragma once

#include <cstdint>

namespace crema {

struct ChannelGrid {
  int num = 0, channels = 0, spatial = 0, block = 1;
};

// y = gamma * x_hat + beta per channel (beta null: none), then max(0, y) where `relu`. y may be x_hat. With a
// uint16_t y, y in bfloat16: each float value rounded (ToBfloat16, core/element_type.hpp).
void AffineForwardLoops(const ChannelGrid& grid, const float* xhat, const float* gamma, const float* beta, bool relu,
                        float* y);
void AffineForwardLoops(const ChannelGrid& grid, const float* xhat, const float* gamma, const float* beta, bool relu,
                        uint16_t* y);

// Backward through the three (gamma null: 1, beta null: 0: BatchNorm's own backward). With z = gamma * x_hat + beta,
// dz = dy where z > 0 (or everywhere without `relu`); beta_diff += sum dz and gamma_diff += sum dz * x_hat per
// channel (each null: not wanted), and, unless dx is null, dx = inv_std * gamma * (dz - mean(dz) - x_hat *
// mean(dz * x_hat)) with the batch's statistics, inv_std * gamma * dz with stored ones. Each of dy, x_hat and dx in
// floats or bf16 (uint16_t; dx rounded as ToBfloat16 rounds). With x_hat in bf16 the rule is the bf16 one below, which
// reads dy rounded to bf16 (as it lies in bf16, or rounded from floats). In floats, dx may be dy (in place): a block's
// values are read before any is written. Instantiated for dy, x_hat, dx: float, float, float or bf16; and with x_hat in
// bf16, dy and dx each float or bf16.
template <typename Dy, typename Xhat, typename Out>
void AffineBackwardLoops(const ChannelGrid& grid, const Dy* dy, const Xhat* xhat, const float* inv_std,
                         const float* gamma, const float* beta, bool relu, bool batch_statistics, Out* dx,
                         float* gamma_diff, float* beta_diff);

// BatchNorm computing in bf16 (BatchNormLayer's bf16 rule, in training): it reads its input rounded to bf16 (as the
// input lies in bf16, or rounded from floats), keeps x_hat in bf16 and computes in floats between.
// The batch's mean and biased variance per channel from the input's bf16 values (x: float or bf16), their sums in
// double in one pass (exact: a bf16 value's square is exact in double), in the order of AffineBackwardLoops's sums.
template <typename X>
void Bfloat16StatisticsLoops(const ChannelGrid& grid, const X* x, float* mean, float* variance);
// x_hat = (x - mean) * inv_std from x rounded to bf16, written rounded to bf16 into `xhat`, and y from that rounded
// x_hat as AffineForwardLoops writes it (x and y each float or bf16; out of place, or y on x of its own type).
template <typename X, typename Y>
void Bfloat16NormalizeLoops(const ChannelGrid& grid, const X* x, const float* mean, const float* inv_std,
                            const float* gamma, const float* beta, bool relu, uint16_t* xhat, Y* y);

}  // namespace crema
