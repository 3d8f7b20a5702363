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
// mean(dz * x_hat)) with the batch's statistics, inv_std * gamma * dz with stored ones. dx may be dy (in place): a
// block's values are read before any is written.
void AffineBackwardLoops(const ChannelGrid& grid, const float* dy, const float* xhat, const float* inv_std,
                         const float* gamma, const float* beta, bool relu, bool batch_statistics, float* dx,
                         float* gamma_diff, float* beta_diff);
// The same with dx in bfloat16 (each float rounded as ToBfloat16 rounds); not in place.
void AffineBackwardLoops(const ChannelGrid& grid, const float* dy, const float* xhat, const float* inv_std,
                         const float* gamma, const float* beta, bool relu, bool batch_statistics, uint16_t* dx,
                         float* gamma_diff, float* beta_diff);

}  // namespace crema
