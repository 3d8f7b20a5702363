#include "layers/neuron/bias.hpp"

#include <algorithm>

#include "core/elementwise.hpp"
#include "core/filler.hpp"
#include "core/math_functions.hpp"

namespace crema {

std::vector<int> BroadcastOperandShape(const std::string& me, const std::string& field, const Blob& bottom, int axis,
                                       int num_axes) {
  CREMA_CHECK(num_axes >= -1) << me << ": " << field << ".num_axes " << num_axes
                              << " must be -1 (to the end) or at least 0";
  const int end = num_axes == -1 ? bottom.num_axes() : axis + num_axes;
  CREMA_CHECK(end <= bottom.num_axes()) << me << ": " << field << ".axis " << axis << " with num_axes " << num_axes
                                        << " reaches past the input of shape " << bottom.shape_string();
  return std::vector<int>(bottom.shape().begin() + axis, bottom.shape().begin() + end);
}

Broadcast BroadcastOver(const std::string& me, const std::string& field, const Blob& bottom, int axis,
                        const Blob& operand, const char* operand_name) {
  Broadcast b;
  if (operand.num_axes() > 0) {
    CREMA_CHECK(axis >= -bottom.num_axes() && axis < bottom.num_axes())
        << me << ": " << field << ".axis " << axis << " is outside the input of shape " << bottom.shape_string();
    b.axis = bottom.CanonicalAxisIndex(axis);
  }
  bool fits = bottom.num_axes() >= b.axis + operand.num_axes();
  for (int i = 0; fits && i < operand.num_axes(); ++i) fits = bottom.shape(b.axis + i) == operand.shape(i);
  CREMA_CHECK(fits) << me << ": the " << operand_name << " of shape " << operand.shape_string()
                    << " does not match the input of shape " << bottom.shape_string() << " from " << field << ".axis "
                    << b.axis << " on";
  b.outer = bottom.count(0, b.axis);
  b.dim = operand.count();
  b.inner = bottom.count(b.axis + operand.num_axes());
  return b;
}

size_t BroadcastSumScratch(const Broadcast& g) {
  return g.outer > 1 && g.inner > 1 ? static_cast<size_t>(g.outer) * g.dim : 0;
}

void BroadcastSum(Context& context, const Broadcast& g, float alpha, const float* values, float beta, float* out,
                  float* scratch) {
  if (g.dim == 0) return;
  if (g.outer == 0 || g.inner == 0) {
    // Nothing to add; BLAS would return without scaling `out` by beta.
    if (beta == 0.f) {
      set(context, g.dim, 0.f, out);
    } else if (beta != 1.f) {
      scale(context, g.dim, beta, out);
    }
    return;
  }
  const float* ones = context.ones(std::max(g.outer, g.inner));  // one call: a larger request reallocates
  if (g.inner == 1) {
    gemv(context, Transpose::kYes, g.outer, g.dim, alpha, values, ones, beta, out);
  } else if (g.outer == 1) {
    gemv(context, Transpose::kNo, g.dim, g.inner, alpha, values, ones, beta, out);
  } else {
    gemv(context, Transpose::kNo, g.outer * g.dim, g.inner, 1.f, values, ones, 0.f, scratch);
    gemv(context, Transpose::kYes, g.outer, g.dim, alpha, scratch, ones, beta, out);
  }
}

bool PerChannelValues(const Broadcast& g, const Blob& operand, int channels, std::vector<float>* values) {
  const bool one = operand.count() == 1, per_channel = g.axis == 1 && g.dim == channels && operand.count() == channels;
  if (!one && !per_channel) return false;
  values->resize(channels);
  for (int c = 0; c < channels; ++c) (*values)[c] = operand.cpu_data()[one ? 0 : c];
  return true;
}

bool BiasLayer::ChannelAffine(int channels, std::vector<float>* scale, std::vector<float>* shift) const {
  if (layer_param().bottom_size() != 1 || !PerChannelValues(geometry_, *params_[0], channels, shift)) return false;
  scale->assign(channels, 1.f);
  return true;
}

void BiasLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const BiasParameter& param = param_.bias_param();
  const std::string me = describe();
  if (bottom.size() > 1) {
    CREMA_CHECK(params_.empty()) << me << ": the bias is the second bottom, but " << params_.size()
                                << " stored parameter blob(s) are given";
    return;
  }
  const int axis = CanonicalAxis(*bottom[0], param.axis(), "bias_param.axis");
  const std::vector<int> shape = BroadcastOperandShape(me, "bias_param", *bottom[0], axis, param.num_axes());
  if (!params_.empty()) {
    AdoptStoredParameters({shape}, {"bias"});
    return;
  }
  params_.push_back(std::make_shared<Blob>(shape));
  Fill(param.filler(), params_[0].get(), random());
}

void BiasLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& bias = bottom.size() > 1 ? *bottom[1] : *params_[0];
  geometry_ = BroadcastOver(describe(), "bias_param", *bottom[0], param_.bias_param().axis(), bias, "bias");
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
  // The GPU's gradient sums need the sums over inner positions (the CPU's loops need nothing).
  if (RunsGpuCode()) RequestWorkspace(BroadcastSumScratch(geometry_));
}

void BiasLayer::ForwardByRule(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  for_each_element(context(), bottom[0]->count(),
                   BiasForwardRule{bottom[0]->data_on(d), BiasOf(bottom)->data_on(d), top[0]->mutable_data_on(d),
                                   geometry_.dim, geometry_.inner});
}

void BiasLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardByRule(bottom, top);
}

void BiasLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CREMA_CHECK(bottom[0]->layout() == Layout::kPlain) << describe() << ": the GPU code takes the plain layout only";
  ForwardByRule(bottom, top);
}

void BiasLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  const float* dy = top[0]->cpu_diff();
  const Broadcast& g = geometry_;
  const bool learned = bottom.size() == 1;
  if (learned ? param_propagate_down(0) : propagate_down[1]) {
    Blob* bias = learned ? params_[0].get() : bottom[1];
    float* db = bias->mutable_cpu_diff();
    // A learned parameter's gradient accumulates (the net zeroes it); a bottom's is overwritten.
    if (!learned) std::fill(db, db + g.dim, 0.f);
    for (int d = 0; d < g.dim; ++d) {
      double sum = 0;
      for (int o = 0; o < g.outer; ++o) {
        const float* p = dy + (o * g.dim + d) * g.inner;
        for (int i = 0; i < g.inner; ++i) sum += p[i];
      }
      db[d] += static_cast<float>(sum);
    }
  }
  if (propagate_down[0] && bottom[0] != top[0]) {
    std::copy(dy, dy + top[0]->count(), bottom[0]->mutable_cpu_diff());
  }
}

void BiasLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  const Device d = device();
  const float* dy = top[0]->diff_on(d);
  const bool learned = bottom.size() == 1;
  if (learned ? param_propagate_down(0) : propagate_down[1]) {
    // A learned parameter's gradient accumulates (the net zeroes it); a bottom's is overwritten.
    BroadcastSum(context(), geometry_, 1.f, dy, learned ? 1.f : 0.f, BiasOf(bottom)->mutable_diff_on(d), workspace());
  }
  if (propagate_down[0] && bottom[0] != top[0]) copy(context(), top[0]->count(), dy, bottom[0]->mutable_diff_on(d));
}

}  // namespace crema
