// A bf16 convolution by Winograd's minimal filtering F(2x2, 3x3), for oneDNN's Convolution engine in training: 3 x 3
// kernels of stride 1 over channel blocks of 16, its forward, its input gradient (which is the same kind of
// convolution: the output gradient through the weights turned half a turn, inputs and outputs swapped) and its weights'
// gradient (G^T [sum over the tiles of (A dY A^T) V] G). oneDNN 2.x
// has Winograd's kernels for float32 only; its bf16 kernels are direct, and crema's float32 training takes Winograd's
// from 1024 output positions on, so that a bf16 3 x 3 convolution gained little over float32 (docs/performance.md).
//
// Each 4 x 4 input patch d (patches 2 apart, covering the padded input), per 16 channels at once, becomes
// V = B^T d B, rounded to bf16; each input-output channel pair's 3 x 3 weights w become U = G w G^T, from the float32
// weights, rounded to bf16 (again when the weights change); for each of the 16 positions of the 4 x 4 transformed
// tile, the output channels' M = sum over input channels of U V is one product of a [tiles x inputs] and an
// [inputs x outputs] matrix (oneDNN's bf16 matmul, float32 sums); each 2 x 2 output tile is A^T M A, plus the bias
// and a fused ReLU. The input is read as a bf16 step reads it (rounded to bf16 where it lies in floats), so that it
// gives the same bits in either. With B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5;
// 0 0 1], A^T = [1 1 1 0; 0 1 -1 -1], the transforms add and subtract only (G halves), and the rounding error stays
// within about twice a direct bf16 product's (docs/layers.md; F(4x4, 3x3), which would save twice the
// multiplications, errs some ten times as much in bf16).
//
// The tiles go in chunks, a chunk on one thread from input patches to output values, its transformed tiles and sums
// in that thread's stretch of the workspace (within its L2 cache); the matmul over a chunk runs on that thread alone.
// Every output is computed by one thread in one order, whatever the threads: the same bits on any count.
#pragma once

#ifdef CREMA_USE_ONEDNN

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace crema {

class Blob;

// The convolution: `inputs` channels of `height` x `width` to `outputs` channels of `out_h` x `out_w` (height + 2
// pad_h - 2, ...), over `num` images, both in channel blocks of 16.
struct WinogradShape {
  int num = 0, inputs = 0, outputs = 0;
  int height = 0, width = 0, pad_h = 0, pad_w = 0;
  int out_h = 0, out_w = 0;
};

class Bfloat16Winograd {
 public:
  // "" where it takes `shape` on this CPU (AVX512_BF16's conversions; channels in whole blocks of 16; pads of 0 to 2;
  // outputs of at least kSmallestSide rows and columns), else why not.
  static std::string Refusal(const WinogradShape& shape);
  // Output tiles cover whole 2 x 2 squares: below 13 x 13, the tiles' unused part and the few tiles a thread gets
  // made it slower than oneDNN's direct bf16 kernels (GoogLeNet's 7 x 7 inception_5 convolutions: 0.8 ms against 0.5);
  // at CaffeNet's 13 x 13 (conv3) its forward took oneDNN's time and its input gradient 0.8 ms less.
  static constexpr int kSmallestSide = 13;
  // The weights' gradient likewise from 28 x 28 outputs: at 14 x 14 (GoogLeNet's inception_4d and 4e, 288 and 320
  // outputs) oneDNN's direct bf16 kernels were faster (3.0 ms against 3.7, 3.7 against 3.9-4.5), at 28 x 28 and 56 x 56
  // slower (6.5 against 5.9, 14.3 against 12.7: the whole backward pass of the layer).
  static constexpr int kSmallestWeightGradientSide = 28;

  // The forward, and where `backward` the input gradient's pass and (from kSmallestWeightGradientSide) the weights'
  // gradient's too, made for `threads` threads.
  Bfloat16Winograd(const WinogradShape& shape, bool backward, int threads);
  ~Bfloat16Winograd();
  Bfloat16Winograd(const Bfloat16Winograd&) = delete;
  Bfloat16Winograd& operator=(const Bfloat16Winograd&) = delete;

  // Whether it computes the weights' gradient (else oneDNN's kernels do).
  bool has_weight_gradient() const { return weight_gradient_ != nullptr; }
  // The floats of workspace a pass takes (each pass uses it afresh).
  size_t WorkspaceFloats() const;
  // The bytes of the transformed weights kept between passes.
  size_t HeldBytes() const;

  // The output from `src` (bf16 where `src_bf16`, else floats, in channel blocks of 16), the weights (outputs x inputs
  // x 3 x 3, floats) and `bias` (or null), through ReLU of slope `relu_slope` where `relu`, into `dst` (bf16 where
  // `dst_bf16`).
  void Forward(const Blob& weights, const float* bias, bool relu, float relu_slope, const void* src, bool src_bf16,
               void* dst, bool dst_bf16, float* workspace);
  // The input gradient from the output gradient `diff_dst` (bf16 where `diff_dst_bf16`), written into `diff_src`
  // (bf16 where `diff_src_bf16`, rounded from its float sums): overwritten.
  void InputGradient(const Blob& weights, const void* diff_dst, bool diff_dst_bf16, void* diff_src, bool diff_src_bf16,
                     float* workspace);
  // The weights' gradient from the input `src` and the output gradient `diff_dst` (both read rounded to bf16),
  // added to `weight_diff` (outputs x inputs x 3 x 3 floats), and the bias's (the sum of the output gradient, rounded)
  // to `bias_diff` where not null: G^T (sum over the tiles of (A dY A^T) V, each factor rounded to bf16) G, the sums in
  // floats. Each thread sums its chunks, and the threads' sums are added in thread order: the bits depend on the
  // count of threads, as oneDNN's weight gradients do.
  void WeightGradient(const void* src, bool src_bf16, const void* diff_dst, bool diff_dst_bf16, float* weight_diff,
                      float* bias_diff, float* workspace);

  struct Pass;  // one convolution of the kind: its shape, matmul and transformed weights (bf16_winograd.cpp)

 private:
  std::unique_ptr<Pass> forward_, input_gradient_, weight_gradient_;
};

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
