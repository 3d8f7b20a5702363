// Convolution, engine `im2col_batched` (after `im2col` in the list: on the developers' Zen 4 machine it did
// not beat the per-image engine, see docs/performance.md; force it with --engine=Convolution:im2col_batched):
// the images of a block of the batch are unrolled
// side by side into one column matrix of (channels * kernel) rows and (images * output positions) columns, and
// each group's weights multiply it in one GEMM, instead of one small GEMM per image as the `native` engine
// (and Caffe) does. A small layer's products (LeNet's conv2: 50 x 500 x 64 per image) are too thin for the BLAS
// to run near its peak; over a block of 64 images the same product is 50 x 500 x 4096.
//
// The GEMM's result is channel-major over the block (channel, image, position); it is copied into the top's
// (image, channel, position) layout with the bias added on the way, and the top gradient is gathered back
// into that layout for the backward products. The block is as many images as fit in kBlockFloats of
// workspace (column matrix plus that staging matrix), split evenly over the batch; a block of one image
// still works, so the engine accepts every shape the `native` engine does.
// Parameters and shapes: layers/vision/base_convolution.hpp.
#pragma once

#include <cstddef>
#include <vector>

#include "layers/vision/base_convolution.hpp"

namespace crema {

class BatchedConvolutionLayer : public BaseConvolutionLayer {
 public:
  using BaseConvolutionLayer::BaseConvolutionLayer;
  const char* type() const override { return "Convolution"; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // The workspace a block may take, in floats (16 MiB): enough for the whole batch of the small nets, a few
  // images of CaffeNet's first layers, and small enough to stay near the caches.
  static constexpr size_t kBlockFloats = size_t{4} << 20;
  // Images per block at the current shapes.
  int block() const { return block_; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // The images [first, first + count) of `input` unrolled side by side into the workspace's column matrix.
  void UnrollBlock(const float* input, int first, int count, float* columns) const;
  // columns (rows x count * positions) -> staging (outputs x count * positions), group by group.
  void MultiplyWeights(const float* weights, const float* columns, int count, float* staging) const;

  int block_ = 1;
};

}  // namespace crema
