// Im2col: each image's patches unrolled into columns, the step that turns convolution into a matrix product, as a layer
// of its own. The bottom is (batch axes..., C, spatial...) with the channel axis at convolution_param.axis; the top is
// (batch axes..., C * kernel size, output spatial...), where output position p of row (c, tap) holds the input value
// that tap sees at p (0 in the padding). Backward adds each column entry back into the input position it came from
// (col2im). convolution_param: kernel_size, stride, pad, dilation (repeated or the 2-d forms,
// layers/vision/kernel_geometry.hpp), axis, force_nd_im2col; num_output, group and the fillers are not used. At most
// kMaxUnrollAxes (6) spatial axes. Output size as Convolution's (layers/vision/base_convolution.hpp): a kernel reaching
// past the padded input by less than a stride gives one position, as in Caffe, with a warning. Runs on the CPU and the
// GPU through core/im2col.hpp's im2col and col2im, which unroll the whole batch in one call (the images lie one after
// another, so the batch is one image of items x channels channels): the host loops on the CPU, the unrolling rules on
// the GPU.
#pragma once

#include <vector>

#include "core/im2col.hpp"
#include "layers/layer.hpp"
#include "layers/vision/kernel_geometry.hpp"

namespace crema {

class Im2colLayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  const char* type() const override { return "Im2col"; }
  // Backward reads no data (it folds the top's gradient).
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // The whole batch's unrolling, as the last Reshape made it (tests run the GPU's rules on the host with it).
  const UnrollGeometry& unroll_geometry() const { return unroll_; }

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int channel_axis_ = 1, num_spatial_axes_ = 0;
  KernelGeometry geometry_;
  bool use_2d_ = true;
  UnrollGeometry unroll_;  // per reshape: the whole batch's
  bool warned_kernel_beyond_input_ = false;
};

}  // namespace crema
