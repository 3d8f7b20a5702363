#include "layers/bias.hpp"

#include <algorithm>

#include "core/filler.hpp"

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

void BiasLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const BiasParameter& param = param_.bias_param();
  const std::string me = describe();
  if (bottom.size() > 1) {
    CREMA_CHECK(blobs_.empty()) << me << ": the bias is the second bottom, but " << blobs_.size()
                                << " stored parameter blob(s) are given";
    return;
  }
  const int axis = CanonicalAxis(*bottom[0], param.axis(), "bias_param.axis");
  const std::vector<int> shape = BroadcastOperandShape(me, "bias_param", *bottom[0], axis, param.num_axes());
  if (!blobs_.empty()) {
    AdoptStoredParameters({shape}, {"bias"});
    return;
  }
  blobs_.push_back(std::make_shared<Blob>(shape));
  Fill(param.filler(), blobs_[0].get(), random());
}

void BiasLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& bias = bottom.size() > 1 ? *bottom[1] : *blobs_[0];
  geometry_ = BroadcastOver(describe(), "bias_param", *bottom[0], param_.bias_param().axis(), bias, "bias");
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
}

void BiasLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  const float* bias = (bottom.size() > 1 ? bottom[1] : blobs_[0].get())->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const Broadcast& g = geometry_;
  for (int o = 0; o < g.outer; ++o)
    for (int d = 0; d < g.dim; ++d) {
      const int offset = (o * g.dim + d) * g.inner;
      for (int i = 0; i < g.inner; ++i) y[offset + i] = x[offset + i] + bias[d];
    }
}

void BiasLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  const float* dy = top[0]->cpu_diff();
  const Broadcast& g = geometry_;
  const bool learned = bottom.size() == 1;
  if (learned ? param_propagate_down(0) : propagate_down[1]) {
    Blob* bias = learned ? blobs_[0].get() : bottom[1];
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

}  // namespace crema
