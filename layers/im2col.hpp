// Im2col: each image's patches unrolled into columns, the step that turns convolution into a matrix product,
// as a layer of its own. The bottom is (batch axes..., C, spatial...) with the channel axis at
// convolution_param.axis; the top is (batch axes..., C * kernel size, output spatial...), where output
// position p of row (c, tap) holds the input value that tap sees at p (0 in the padding). Backward adds each
// column entry back into the input position it came from (col2im).
// convolution_param: kernel_size, stride, pad, dilation (repeated or the 2-d forms, layers/kernel_geometry.hpp),
// axis, force_nd_im2col; num_output, group and the fillers are not used.
#pragma once

#include <vector>

#include "layers/kernel_geometry.hpp"
#include "layers/layer.hpp"

namespace crema {

class Im2colLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Im2col"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int channel_axis_ = 1, num_spatial_axes_ = 0;
  KernelGeometry geometry_;
  bool use_2d_ = true;
  // Per reshape: images, values per image of bottom and top, the image shape and the column shape (each with
  // its leading channel or row axis).
  int num_ = 0, bottom_dim_ = 0, top_dim_ = 0;
  std::vector<int> image_shape_, column_shape_;
};

}  // namespace crema
