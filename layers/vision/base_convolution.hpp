// What every convolution engine shares, and what Deconvolution will share: the parameters, the geometry, the
// weights and bias, the output shape, and the per-image steps of a convolution done as matrix products on
// unrolled patches (im2col), each a small helper.
//
// convolution_param:
//   num_output            output channels (required)
//   kernel_size, stride, pad, dilation
//                         one value for every spatial axis, or one per axis; the 2-d forms kernel_h/kernel_w,
//                         stride_h/stride_w, pad_h/pad_w replace (and may not be mixed with) the repeated ones
//                         (layers/vision/kernel_geometry.hpp)
//   group                 channels and outputs are split into this many independent groups
//   bias_term, weight_filler, bias_filler
//   axis                  the channel axis (default 1); the axes before it are batch axes, those after it
//                         spatial ones
//   force_nd_im2col       use the N-d unrolling even for 2-d input
//   engine                CAFFE (crema's own engines) or CUDNN (cuDNN's, where the device has it)
// Several bottoms of one shape may be given: each gets its own top, all share the weights.
// Parameters: weights (num_output, channels / group, kernel...), bias (num_output).
// Output size per spatial axis: (in + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1, the division
// truncating toward zero as Caffe's does: a kernel that reaches past the padded input by less than a stride gives
// one output (taps beyond the input read as zero), with a warning; by a stride or more, an error. Engines that
// cannot take the former (cuDNN, oneDNN) refuse it, and the native engine serves it.
//
// The GEMM steps speak of the convolution's input and output. For Convolution the input is the bottom; for
// Deconvolution (reverse_dimensions()) it is the top, so its forward is this class's BackwardData and its
// backward is ForwardGemm and WeightGemm with the roles of the blobs swapped, as in Caffe's shared base.
#pragma once

#include <string>
#include <vector>

#include "core/half_products.hpp"
#include "core/im2col.hpp"
#include "layers/layer.hpp"
#include "layers/vision/kernel_geometry.hpp"

namespace crema {

class BaseConvolutionLayer : public Layer {
 public:
  using Layer::Layer;
  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool EqualNumBottomTopBlobs() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Backward reads the input (the weights' gradient), never the output: every engine, cuDNN's included; but a ReLU
  // fused for training reads the output's sign (Layer::set_fused_activation_with_backward).
  bool BackwardReadsTop(int) const override { return activation_with_backward(); }
  // Inference rewrites (net/fold.hpp): a per-channel scale and shift of the output (channel axis 1) folds into the
  // weights and the bias (the rewrite gives a layer without one a bias); every engine applies a fused activation
  // (oneDNN's in its primitive).
  bool AbsorbsChannelAffine() const override { return channel_axis_ == 1; }
  void AbsorbChannelAffine(const std::vector<float>& scale, const std::vector<float>& shift) override;
  bool TakesFusedActivation(const FusedActivation&) const override { return true; }
  // In training too, in GPU code computing in half precision (HalfTop); cuDNN's and oneDNN's engines say their own.
  bool AppliesActivationInItsOwnPass(const FusedActivation& activation) const override {
    return HalfTopApplies(activation);
  }
  bool TakesFusedSum() const override { return param_.bottom_size() == 1; }
  // The precision of the products where the engine sets half_ (the native engines' GPU code, cuDNN's): float16 or
  // bfloat16 on a GPU that multiplies in it, as asked; else float32. Engines of their own (oneDNN's) say theirs.
  Precision computes_in() const override { return half_; }
  std::string engine_note() const override;
  // In half precision the products' operands are 16-bit values: a bottom the plan keeps in that type is read as it
  // lies, and a top may be written so (its bias and a fused ReLU applied first: Layer::HalfTopFinishOf).
  Quantization ReadsQuantized(int bottom) const override { return HalfOperands(half_, bottom); }
  bool WritesQuantized(int, ElementType type) const override { return WritesHalfTop(half_, type); }

 protected:
  // Deconvolution answers true: its top is the side the kernel slides over.
  virtual bool reverse_dimensions() const { return false; }
  // The top's size along spatial axis `axis` for a bottom of size `in`: Convolution's rule, or Deconvolution's
  // where reverse_dimensions(). Throws, naming the field and `input`'s shape, when the output would be empty; a
  // kernel reaching past the padded input by less than a stride gives one output, as in Caffe, with a warning
  // (once for the layer).
  int OutputSize(int axis, int in, const Blob& input);

  // The per-image steps (pointers to one image of each blob; `input` and `output` are the convolution's,
  // see above). Those that unroll patches use the layer's workspace, which the engine must request in its
  // Reshape (column_floats()).
  // output = weights * columns(input)
  void ForwardGemm(const float* input, const float* weights, float* output);
  // input_diff = fold(weights^T * output_diff); overwrites input_diff
  void BackwardData(const float* output_diff, const float* weights, float* input_diff);
  // weight_diff += output_diff * columns(input)^T
  void WeightGemm(const float* input, const float* output_diff, float* weight_diff);
  // output += bias broadcast over the top's positions; bias_diff += output_diff summed over them
  void AddBias(float* output, const float* bias);
  void BiasGradient(const float* output_diff, float* bias_diff);
  // The whole layer through the steps above, image by image and bottom by bottom: Convolution's and
  // Deconvolution's native engines, which differ only in which blob is the convolution's input. Parameter
  // gradients accumulate (the net zeroes them before a backward); bottom gradients are overwritten.
  void ForwardImages(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  void BackwardImages(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                      const std::vector<Blob*>& bottom);
  // Floats of workspace the steps above need: one image's column matrix (0 for pointwise kernels).
  size_t column_floats() const;
  // The native engines' Reshape: half_ from the precision asked where the layer runs GPU code on a device that
  // multiplies in it (a GPU's tensor cores, or the host rehearsal; core/half_products.hpp), and the workspace floats
  // the steps above need: the column matrix, and in half precision after it its 16-bit copy, one image of the
  // convolution's output (gradient) and one of its input in 16 bits, and one top image in float32. In half precision
  // the steps multiply 16-bit copies of the columns, the weights and the output gradient (HalfGemm, float32 sums into
  // the float32 output and gradients).
  size_t PlanImageProducts();
  // A top in 16 bits (planned so): the engine applies the fused activation itself, as it writes the 16 bits.
  bool ComputesFusedActivation() const override { return half_tops_; }
  // The weights rounded to half_ (made again after they change).
  const uint16_t* HalfWeights();
  // Rows of the column matrix of one image: conv_in_channels * kernel size.
  int column_rows() const { return column_shape_[0]; }

  // One image (channels x spatial) <-> its column matrix (channels * kernel x output positions), whose rows
  // lie `row_stride` floats apart (0: packed), so that several images' matrices can share one wide matrix.
  void Unroll(const float* image, float* columns, size_t row_stride = 0) const;
  // The geometry of Unroll and Fold (core/im2col.hpp), on the layer's device.
  UnrollGeometry unroll_geometry(size_t row_stride) const;
  void Fold(const float* columns, float* image, size_t row_stride = 0) const;

  double ForwardFlops() const override;
  double BackwardFlops(const std::vector<bool>& propagate_down) const override;

  // Set up once.
  int channel_axis_ = 1;
  int num_spatial_axes_ = 0;
  KernelGeometry geometry_;
  int channels_ = 0, num_output_ = 0, group_ = 1;
  bool bias_term_ = true;
  int conv_in_channels_ = 0, conv_out_channels_ = 0;  // of the convolution: channels_ and num_output_, or reversed
  // Per reshape.
  int num_ = 0;  // images: the product of the axes before the channel axis
  int num_bottoms_ = 0;
  int bottom_dim_ = 0;  // values per image of a bottom
  int top_dim_ = 0;     // values per image of a top
  int top_spatial_size_ = 0;
  std::vector<int> conv_input_shape_;  // the convolution's input image: channels, then spatial sizes
  std::vector<int> conv_output_spatial_;
  int conv_output_spatial_size_ = 0;  // output positions per image of the convolution
  int kernel_dim_ = 0;                // rows of one group's column matrix: conv_in_channels / group * kernel
  Precision half_ = Precision::kFloat32;  // what the products compute in (engines that set it, in Reshape)
  HalfCopy half_weights_;                 // the weights rounded to half_, while they are unchanged
  bool half_tops_ = false;                // whether a top lies in 16 bits (Reshape)

 private:
  // The column matrix of one input image: unrolled into the workspace, or the image itself when pointwise.
  const float* ColumnsOf(const float* input);
  // ForwardImages and BackwardImages in half precision: the convolution's input and output images as 16-bit values
  // (a blob's own where the plan keeps it so, else rounded into the workspace), products through HalfGemm into float32,
  // a 16-bit top written through HalfTop from one float32 image in the workspace.
  void HalfForwardImages(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  void HalfBackwardImages(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                          const std::vector<Blob*>& bottom);
  // One input image's 16-bit column matrix: a float image rounded into the workspace first, then unrolled (the
  // columns of the rounded image are the rounded columns: padding is zero either way); the image itself when
  // pointwise.
  const uint16_t* HalfColumnsOf(const float* image);
  const uint16_t* HalfColumnsOf(const uint16_t* image);
  // Image n of a bottom in 16 bits: its own where the plan keeps it so, else rounded into the workspace; as the
  // convolution's input (its column matrix), or as its output (the Deconvolution's bottom).
  const uint16_t* HalfBottomColumns(const Blob& bottom, int n);
  const uint16_t* HalfBottomImage(const Blob& bottom, int n);
  // One image of the convolution's output (gradient) rounded to 16 bits into the workspace.
  const uint16_t* HalfOutputImageOf(const float* output_diff);
  // output = weights * columns; input_diff = fold(weights^T * output_diff); weight_diff += output_diff * columns^T.
  void HalfForwardGemm(const uint16_t* columns, float* output);
  void HalfBackwardData(const uint16_t* output_diff, float* input_diff);
  void HalfWeightGemm(const uint16_t* columns, const uint16_t* output_diff, float* weight_diff);
  // The workspace's 16-bit values from `offset` floats on (one of the offsets below).
  uint16_t* HalfScratch(size_t offset);
  // Where PlanImageProducts put the 16-bit columns, output image and input image and the float32 top image, in floats
  // from the workspace's start, each from a 256-byte boundary.
  size_t half_columns_offset_ = 0, half_output_offset_ = 0, half_input_offset_ = 0, float_top_offset_ = 0;

  bool use_2d_ = true;             // im2col_cpu rather than im2col_nd_cpu
  bool warned_kernel_beyond_input_ = false;
  std::vector<int> column_shape_;  // rows (channels * kernel), then the output's spatial sizes
};

}  // namespace crema
