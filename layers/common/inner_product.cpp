#include "layers/common/inner_product.hpp"

#include <string>

#include "core/filler.hpp"
#include "core/math_functions.hpp"

namespace crema {

int InnerProductLayer::FlattenAxis(const Blob& bottom) const {
  return CanonicalAxis(bottom, param_.inner_product_param().axis(), "inner_product_param.axis");
}

void InnerProductLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const InnerProductParameter& param = param_.inner_product_param();
  const std::string me = describe();
  N_ = static_cast<int>(param.num_output());
  CREMA_CHECK(N_ > 0) << me << ": num_output must be given and positive";
  K_ = bottom[0]->count(FlattenAxis(*bottom[0]));
  bias_term_ = param.bias_term();
  transpose_ = param.transpose();
  const std::vector<int> weight_shape = transpose_ ? std::vector<int>{K_, N_} : std::vector<int>{N_, K_};
  if (!params_.empty()) {
    // Parameters from a .caffemodel.
    std::vector<std::vector<int>> shapes = {weight_shape};
    if (bias_term_) shapes.push_back({N_});
    AdoptStoredParameters(shapes, {"weights", "bias"});
    return;
  }
  params_.push_back(std::make_shared<Blob>(weight_shape));
  Fill(param.weight_filler(), params_[0].get(), random());
  if (bias_term_) {
    params_.push_back(std::make_shared<Blob>(std::vector<int>{N_}));
    Fill(param.bias_filler(), params_[1].get(), random());
  }
}

// M x K inputs times the K x N weights; the bias adds M x N.
double InnerProductLayer::ForwardFlops() const {
  return 2.0 * M_ * K_ * N_ + (bias_term_ ? static_cast<double>(M_) * N_ : 0.0);
}

double InnerProductLayer::BackwardFlops(const std::vector<bool>& propagate_down) const {
  const double product = 2.0 * M_ * K_ * N_;
  return (param_propagate_down(0) ? product : 0.0) + (bias_term_ && param_propagate_down(1) ? double(M_) * N_ : 0.0) +
         (!propagate_down.empty() && propagate_down[0] ? product : 0.0);
}

void InnerProductLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& input = *bottom[0];
  const int axis = FlattenAxis(input);
  CREMA_CHECK(input.count(axis) == K_) << describe() << ": input of shape " << input.shape_string() << " has "
                                       << input.count(axis) << " values per item from axis " << axis
                                       << ", but the weights (shape " << params_[0]->shape_string() << ") expect "
                                       << K_;
  M_ = input.count(0, axis);
  axis_ = axis;
  std::vector<int> top_shape(input.shape().begin(), input.shape().begin() + axis);
  top_shape.push_back(N_);
  top[0]->Reshape(top_shape);
  // Half precision where the layer runs GPU code on a device that multiplies in it; the scratch holds the 16-bit
  // input and output gradient (M x K and M x N values, two to a float), the weights' copy is the layer's own.
  half_ = GpuCodePrecision();
  half_top_ = IsHalfType(top[0]->data_type());
  if (half_ != Precision::kFloat32) {
    RequestWorkspace(FloatOutputOffset() + (half_top_ ? static_cast<size_t>(M_) * N_ : 0));
  }
}

std::string InnerProductLayer::engine_note() const {
  return half_ == Precision::kFloat32 ? "" : std::string(PrecisionName(half_)) + " on the tensor cores";
}

uint16_t* InnerProductLayer::HalfInput() { return reinterpret_cast<uint16_t*>(workspace()); }

size_t InnerProductLayer::HalfOutputGradientOffset() const {
  // After the input, from a 256-byte boundary (the tensor cores' kernels want 16-byte aligned operands).
  return (static_cast<size_t>(M_) * K_ + 127) / 128 * 128;
}

uint16_t* InnerProductLayer::HalfOutputGradient() { return HalfInput() + HalfOutputGradientOffset(); }

size_t InnerProductLayer::FloatOutputOffset() const {
  // After the 16-bit values, from a 256-byte boundary.
  return (HalfOutputGradientOffset() + static_cast<size_t>(M_) * N_ + 127) / 128 * 64;
}

float* InnerProductLayer::FloatOutput() { return workspace() + FloatOutputOffset(); }

void InnerProductLayer::AbsorbChannelAffine(const std::vector<float>& scale, const std::vector<float>& shift) {
  CREMA_CHECK(AbsorbsChannelAffine() && bias_term_ && scale.size() == static_cast<size_t>(N_) &&
              shift.size() == scale.size())
      << describe() << ": a scale and shift of " << scale.size() << " outputs cannot fold into " << N_ << " outputs";
  // Output n's weights: row n of N x K, or column n of K x N (transpose).
  float* weights = params_[0]->mutable_cpu_data();
  for (int k = 0; k < K_; ++k)
    for (int n = 0; n < N_; ++n)
      weights[transpose_ ? static_cast<size_t>(k) * N_ + n : static_cast<size_t>(n) * K_ + k] *= scale[n];
  float* bias = params_[1]->mutable_cpu_data();
  for (int n = 0; n < N_; ++n) bias[n] = bias[n] * scale[n] + shift[n];
}

void InnerProductLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (half_ != Precision::kFloat32) {
    HalfForward(bottom, top);
    return;
  }
  const Device d = device();
  float* output = top[0]->mutable_data_on(d);
  if (M_ == 1) {
    // One item (inference at batch 1): a matrix-vector product that starts from the bias. Two matrix products,
    // the second of rank 1 for the bias, cost several times this work in their calls alone.
    if (bias_term_) copy(context(), N_, params_[1]->data_on(d), output);
    if (transpose_) {
      gemv(context(), Transpose::kYes, K_, N_, 1.f, params_[0]->data_on(d), bottom[0]->data_on(d),
           bias_term_ ? 1.f : 0.f, output);
    } else {
      gemv(context(), Transpose::kNo, N_, K_, 1.f, params_[0]->data_on(d), bottom[0]->data_on(d),
           bias_term_ ? 1.f : 0.f, output);
    }
    return;
  }
  gemm(context(), Transpose::kNo, transpose_ ? Transpose::kNo : Transpose::kYes, M_, N_, K_, 1.f, bottom[0]->data_on(d),
       params_[0]->data_on(d), 0.f, output);
  if (bias_term_) {
    gemm(context(), Transpose::kNo, Transpose::kNo, M_, N_, 1, 1.f, context().ones(M_), params_[1]->data_on(d), 1.f,
         output);
  }
}

void InnerProductLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  if (half_ != Precision::kFloat32) {
    HalfBackward(top, propagate_down, bottom);
    return;
  }
  ParameterGradients(top, bottom);
  if (propagate_down[0]) InputGradient(top, bottom);
}

void InnerProductLayer::ParameterGradients(const std::vector<Blob*>& top, const std::vector<Blob*>& bottom) {
  const Device d = device();
  const float* top_diff = top[0]->diff_on(d);
  const float* input = bottom[0]->data_on(d);
  // Parameter gradients accumulate (the net zeroes them before a backward), or are written where the net left their
  // zeroing to this backward (ParamGradientKeep).
  if (param_propagate_down(0)) {
    const float keep = ParamGradientKeep(0);
    if (transpose_) {
      gemm(context(), Transpose::kYes, Transpose::kNo, K_, N_, M_, 1.f, input, top_diff, keep,
           params_[0]->mutable_diff_on(d));
    } else {
      gemm(context(), Transpose::kYes, Transpose::kNo, N_, K_, M_, 1.f, top_diff, input, keep,
           params_[0]->mutable_diff_on(d));
    }
  }
  BiasGradient(top);
}

void InnerProductLayer::BiasGradient(const std::vector<Blob*>& top) {
  if (!bias_term_ || !param_propagate_down(1)) return;
  const Device d = device();
  gemv(context(), Transpose::kYes, M_, N_, 1.f, top[0]->diff_on(d), context().ones(M_), ParamGradientKeep(1),
       params_[1]->mutable_diff_on(d));
}

void InnerProductLayer::InputGradient(const std::vector<Blob*>& top, const std::vector<Blob*>& bottom) {
  const Device d = device();
  gemm(context(), Transpose::kNo, transpose_ ? Transpose::kYes : Transpose::kNo, M_, K_, N_, 1.f, top[0]->diff_on(d),
       params_[0]->data_on(d), 0.f, bottom[0]->mutable_diff_on(d));
}

void InnerProductLayer::HalfForward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const uint16_t* input = HalfValuesOf(context(), half_, *bottom[0], 0, M_ * K_, HalfInput());
  const uint16_t* w = half_weights_.Of(context(), half_, *params_[0]);
  float* output = half_top_ ? FloatOutput() : top[0]->mutable_data_on(d);
  HalfGemm(context(), half_, Transpose::kNo, transpose_ ? Transpose::kNo : Transpose::kYes, M_, N_, K_, 1.f, input, w,
           0.f, output);
  if (half_top_) {
    HalfTop(context(), half_, M_ * N_, output, HalfTopFinishOf(bias_term_ ? params_[1]->data_on(d) : nullptr, 1, N_),
            static_cast<uint16_t*>(top[0]->mutable_bytes_on(d)));
    return;
  }
  if (bias_term_) {
    gemm(context(), Transpose::kNo, Transpose::kNo, M_, N_, 1, 1.f, context().ones(M_), params_[1]->data_on(d), 1.f,
         output);
  }
}

void InnerProductLayer::HalfBackward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  const Device d = device();
  const float* top_diff = top[0]->diff_on(d);
  uint16_t* output_gradient = HalfOutputGradient();
  RoundToHalf(context(), half_, M_ * N_, top_diff, output_gradient);
  if (param_propagate_down(0)) {
    // The input again (the workspace is shared: forward's copy is gone), the gradient summed into the float32 diff.
    const uint16_t* input = HalfValuesOf(context(), half_, *bottom[0], 0, M_ * K_, HalfInput());
    const float keep = ParamGradientKeep(0);
    float* weight_diff = params_[0]->mutable_diff_on(d);
    if (transpose_) {
      HalfGemm(context(), half_, Transpose::kYes, Transpose::kNo, K_, N_, M_, 1.f, input, output_gradient, keep,
               weight_diff);
    } else {
      HalfGemm(context(), half_, Transpose::kYes, Transpose::kNo, N_, K_, M_, 1.f, output_gradient, input, keep,
               weight_diff);
    }
  }
  BiasGradient(top);
  if (propagate_down[0]) {
    const uint16_t* w = half_weights_.Of(context(), half_, *params_[0]);
    HalfGemm(context(), half_, Transpose::kNo, transpose_ ? Transpose::kYes : Transpose::kNo, M_, K_, N_, 1.f,
             output_gradient, w, 0.f, bottom[0]->mutable_diff_on(d));
  }
}

}  // namespace crema
