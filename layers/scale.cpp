#include "layers/scale.hpp"

#include <algorithm>
#include <string>

#include "core/filler.hpp"
#include "core/threads.hpp"

namespace crema {

void ScaleLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ScaleParameter& param = param_.scale_param();
  const std::string me = describe();
  bias_term_ = param.bias_term();
  const bool learned = bottom.size() == 1;
  std::vector<std::vector<int>> shapes;
  if (learned) {
    const int axis = CanonicalAxis(*bottom[0], param.axis(), "scale_param.axis");
    shapes.push_back(BroadcastOperandShape(me, "scale_param", *bottom[0], axis, param.num_axes()));
  }
  if (bias_term_) shapes.push_back(learned ? shapes[0] : bottom[1]->shape());
  bias_index_ = bias_term_ ? static_cast<int>(shapes.size()) - 1 : -1;
  if (top[0] == bottom[0]) input_ = AddInternalBlob("input");
  if (!blobs_.empty()) {
    CREMA_CHECK(blobs_.size() == shapes.size())
        << me << ": the stored parameters hold " << blobs_.size() << " blob(s), but the layer needs " << shapes.size()
        << " (" << (learned ? "the scale" : "the scale is the second bottom")
        << (bias_term_ ? ", and the bias: bias_term is true)" : "; bias_term is false)");
    std::vector<const char*> names;
    if (learned) names.push_back("scale");
    if (bias_term_) names.push_back("bias");
    AdoptStoredParameters(shapes, names);
    return;
  }
  if (learned) {
    blobs_.push_back(std::make_shared<Blob>(shapes[0]));
    FillerParameter filler = param.filler();
    if (!param.has_filler()) {
      filler.set_type("constant");
      filler.set_value(1.f);
    }
    Fill(filler, blobs_.back().get(), random());
  }
  if (bias_term_) {
    blobs_.push_back(std::make_shared<Blob>(shapes.back()));
    Fill(param.bias_filler(), blobs_.back().get(), random());
  }
}

void ScaleLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  geometry_ =
      BroadcastOver(describe(), "scale_param", *bottom[0], param_.scale_param().axis(), ScaleOf(bottom), "scale");
  if (bias_term_) {
    CREMA_CHECK(blobs_[bias_index_]->count() == geometry_.dim)
        << describe() << ": the bias (shape " << blobs_[bias_index_]->shape_string() << ") must have the shape of "
        << "the scale (shape " << ScaleOf(bottom).shape_string() << ")";
  }
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
  if (input_) input_->ReshapeLike(*bottom[0]);
}

void ScaleLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  if (input_ && top[0] == bottom[0]) std::copy(x, x + bottom[0]->count(), input_->mutable_cpu_data());
  const float* scale = ScaleOf(bottom).cpu_data();
  const float* bias = bias_term_ ? blobs_[bias_index_]->cpu_data() : nullptr;
  float* y = top[0]->mutable_cpu_data();
  const Broadcast& g = geometry_;
  const bool threaded = bottom[0]->count() >= ParallelElementThreshold();
#pragma omp parallel for collapse(2) if (threaded) schedule(static)
  for (int o = 0; o < g.outer; ++o)
    for (int d = 0; d < g.dim; ++d) {
      const int offset = (o * g.dim + d) * g.inner;
      const float s = scale[d], b = bias ? bias[d] : 0.f;
      for (int i = 0; i < g.inner; ++i) y[offset + i] = x[offset + i] * s + b;
    }
}

void ScaleLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  const float* dy = top[0]->cpu_diff();
  const Broadcast& g = geometry_;
  const bool learned = bottom.size() == 1;
  // Each thread takes whole channels (d), so every sum runs in the one-thread order.
  const bool threaded = bottom[0]->count() >= ParallelElementThreshold();
  // Parameter gradients first: in place, the bottom's gradient overwrites the top's.
  if (bias_term_ && param_propagate_down(bias_index_)) {
    float* db = blobs_[bias_index_]->mutable_cpu_diff();
#pragma omp parallel for if (threaded) schedule(static)
    for (int d = 0; d < g.dim; ++d) {
      double sum = 0;
      for (int o = 0; o < g.outer; ++o) {
        const float* p = dy + (o * g.dim + d) * g.inner;
        for (int i = 0; i < g.inner; ++i) sum += p[i];
      }
      db[d] += static_cast<float>(sum);
    }
  }
  if (learned ? param_propagate_down(0) : propagate_down[1]) {
    const float* x = input_ && top[0] == bottom[0] ? input_->cpu_data() : bottom[0]->cpu_data();
    float* ds = (learned ? blobs_[0].get() : bottom[1])->mutable_cpu_diff();
    // A learned parameter's gradient accumulates (the net zeroes it); a bottom's is overwritten.
    if (!learned) std::fill(ds, ds + g.dim, 0.f);
#pragma omp parallel for if (threaded) schedule(static)
    for (int d = 0; d < g.dim; ++d) {
      double sum = 0;
      for (int o = 0; o < g.outer; ++o) {
        const int offset = (o * g.dim + d) * g.inner;
        for (int i = 0; i < g.inner; ++i) sum += static_cast<double>(dy[offset + i]) * x[offset + i];
      }
      ds[d] += static_cast<float>(sum);
    }
  }
  if (propagate_down[0]) {
    const float* scale = ScaleOf(bottom).cpu_data();
    float* dx = bottom[0]->mutable_cpu_diff();
#pragma omp parallel for collapse(2) if (threaded) schedule(static)
    for (int o = 0; o < g.outer; ++o)
      for (int d = 0; d < g.dim; ++d) {
        const int offset = (o * g.dim + d) * g.inner;
        for (int i = 0; i < g.inner; ++i) dx[offset + i] = dy[offset + i] * scale[d];
      }
  }
}

}  // namespace crema
