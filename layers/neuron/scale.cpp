#include "layers/neuron/scale.hpp"

#include <algorithm>
#include <string>

#include "core/elementwise.hpp"
#include "core/filler.hpp"
#include "core/math_functions.hpp"
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
  KeepInputWhenInPlace(bottom, top);
  if (!params_.empty()) {
    CREMA_CHECK(params_.size() == shapes.size())
        << me << ": the stored parameters hold " << params_.size() << " blob(s), but the layer needs " << shapes.size()
        << " (" << (learned ? "the scale" : "the scale is the second bottom")
        << (bias_term_ ? ", and the bias: bias_term is true)" : "; bias_term is false)");
    std::vector<const char*> names;
    if (learned) names.push_back("scale");
    if (bias_term_) names.push_back("bias");
    AdoptStoredParameters(shapes, names);
    return;
  }
  if (learned) {
    params_.push_back(std::make_shared<Blob>(shapes[0]));
    FillerParameter filler = param.filler();
    if (!param.has_filler()) {
      filler.set_type("constant");
      filler.set_value(1.f);
    }
    Fill(filler, params_.back().get(), random());
  }
  if (bias_term_) {
    params_.push_back(std::make_shared<Blob>(shapes.back()));
    Fill(param.bias_filler(), params_.back().get(), random());
  }
}

bool ScaleLayer::ChannelAffine(int channels, std::vector<float>* scale, std::vector<float>* shift) const {
  if (layer_param().bottom_size() != 1 || !PerChannelValues(geometry_, *params_[0], channels, scale)) return false;
  if (!bias_term_) {
    shift->assign(channels, 0.f);
    return true;
  }
  // The bias broadcasts as the scale does (the same shape).
  return PerChannelValues(geometry_, *params_[1], channels, shift);
}

void ScaleLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  geometry_ =
      BroadcastOver(describe(), "scale_param", *bottom[0], param_.scale_param().axis(), ScaleOf(bottom), "scale");
  if (bias_term_) {
    CREMA_CHECK(params_[bias_index_]->count() == geometry_.dim)
        << describe() << ": the bias (shape " << params_[bias_index_]->shape_string() << ") must have the shape of "
        << "the scale (shape " << ScaleOf(bottom).shape_string() << ")";
  }
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
  ReshapeKeptInput(*bottom[0]);
  const Blob& x = *bottom[0];
  per_channel_ = bottom.size() == 1 && x.num_axes() == 4 && geometry_.axis == 1 && geometry_.dim == x.shape(1);
  block_ = ChannelBlock(x.layout(), x.num_axes() == 4 ? x.shape(1) : 1);
  CREMA_CHECK(x.layout() == Layout::kPlain || (per_channel_ && top[0]->layout() == x.layout()))
      << describe() << ": the input is in the " << LayoutName(x.layout()) << " layout, which only a learned "
      << "per-channel scale of a 4-d input writing its output in the same layout takes";
  // The GPU's gradient sums (two a broadcast index) and their partial sums (the CPU's loops sum in place).
  if (RunsGpuCode())
    RequestWorkspace(2 * static_cast<size_t>(geometry_.dim) +
                     SumPerChannelScratch(geometry_.outer, geometry_.dim, geometry_.inner, 2));
}

namespace {

// Calls rule(j, d) for every value j of the bottom and its channel (or broadcast index) d, in the bottom's
// layout: `block` 1 is the plain order (outer, dim, inner), a larger one channel blocks (core/layout.hpp).
// kBlock is the block when known at compile time (1, 8, 16), else 0.
template <int kBlock, typename Rule>
void ForEachValueIn(const Broadcast& g, int block, bool threaded, Rule rule) {
  const int b = kBlock > 0 ? kBlock : block, blocks = g.dim / b;
#pragma omp parallel for collapse(2) if (threaded) schedule(static)
  for (int o = 0; o < g.outer; ++o)
    for (int k = 0; k < blocks; ++k) {
      const int offset = (o * blocks + k) * g.inner * b;
      for (int i = 0; i < g.inner; ++i)
        for (int l = 0; l < b; ++l) rule(offset + i * b + l, k * b + l);
    }
}

template <typename Rule>
void ForEachValue(const Broadcast& g, int block, bool threaded, Rule rule) {
  if (block == 1) return ForEachValueIn<1>(g, block, threaded, rule);
  if (block == 8) return ForEachValueIn<8>(g, block, threaded, rule);
  if (block == 16) return ForEachValueIn<16>(g, block, threaded, rule);
  ForEachValueIn<0>(g, block, threaded, rule);
}

// Adds to out[d] the sum of term(j) over the values j of channel d. Each thread takes whole channels (blocks),
// and every sum runs over items then positions, the plain layout's order, in every layout.
template <int kBlock, typename Term>
void SumPerChannelIn(const Broadcast& g, int block, bool threaded, float* out, Term term) {
  const int b = kBlock > 0 ? kBlock : block, blocks = g.dim / b;
#pragma omp parallel for if (threaded) schedule(static)
  for (int k = 0; k < blocks; ++k) {
    double fixed[kBlock > 0 ? kBlock : 1] = {};
    std::vector<double> dynamic(kBlock > 0 ? 0 : b, 0.0);
    double* sums = kBlock > 0 ? fixed : dynamic.data();
    for (int o = 0; o < g.outer; ++o) {
      const int offset = (o * blocks + k) * g.inner * b;
      for (int i = 0; i < g.inner; ++i)
        for (int l = 0; l < b; ++l) sums[l] += term(offset + i * b + l);
    }
    for (int l = 0; l < b; ++l) out[k * b + l] += static_cast<float>(sums[l]);
  }
}

template <typename Term>
void SumPerChannel(const Broadcast& g, int block, bool threaded, float* out, Term term) {
  if (block == 1) return SumPerChannelIn<1>(g, block, threaded, out, term);
  if (block == 8) return SumPerChannelIn<8>(g, block, threaded, out, term);
  if (block == 16) return SumPerChannelIn<16>(g, block, threaded, out, term);
  SumPerChannelIn<0>(g, block, threaded, out, term);
}

// Training's usual backward in one pass: a learned scale and bias and the input's gradient. Per channel, the sums of
// dy and of dy * x in SumPerChannel's order, and dx = dy * scale, dy read once (three passes read it three times).
// In place dx is dy, each value read before it is written.
template <int kBlock>
void BackwardInOnePassIn(const Broadcast& g, int block, bool threaded, const float* dy, const float* x,
                         const float* scale, float* dx, float* bias_diff, float* scale_diff) {
  const int b = kBlock > 0 ? kBlock : block, blocks = g.dim / b;
#pragma omp parallel for if (threaded) schedule(static)
  for (int k = 0; k < blocks; ++k) {
    double fixed[2][kBlock > 0 ? kBlock : 1] = {};
    std::vector<double> dynamic(kBlock > 0 ? 0 : 2 * b, 0.0);
    double* bias_sums = kBlock > 0 ? fixed[0] : dynamic.data();
    double* scale_sums = kBlock > 0 ? fixed[1] : dynamic.data() + b;
    const float* factor = scale + k * b;
    for (int o = 0; o < g.outer; ++o) {
      const int offset = (o * blocks + k) * g.inner * b;
      for (int i = 0; i < g.inner; ++i)
        for (int l = 0; l < b; ++l) {
          const int j = offset + i * b + l;
          const float v = dy[j];
          bias_sums[l] += static_cast<double>(v);
          scale_sums[l] += static_cast<double>(v) * x[j];
          dx[j] = v * factor[l];
        }
    }
    for (int l = 0; l < b; ++l) {
      bias_diff[k * b + l] += static_cast<float>(bias_sums[l]);
      scale_diff[k * b + l] += static_cast<float>(scale_sums[l]);
    }
  }
}

void BackwardInOnePass(const Broadcast& g, int block, bool threaded, const float* dy, const float* x,
                       const float* scale, float* dx, float* bias_diff, float* scale_diff) {
  if (block == 1) return BackwardInOnePassIn<1>(g, block, threaded, dy, x, scale, dx, bias_diff, scale_diff);
  if (block == 8) return BackwardInOnePassIn<8>(g, block, threaded, dy, x, scale, dx, bias_diff, scale_diff);
  if (block == 16) return BackwardInOnePassIn<16>(g, block, threaded, dy, x, scale, dx, bias_diff, scale_diff);
  BackwardInOnePassIn<0>(g, block, threaded, dy, x, scale, dx, bias_diff, scale_diff);
}

}  // namespace

void ScaleLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  KeepInput(*bottom[0]);
  const float* scale = ScaleOf(bottom).cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const bool threaded = bottom[0]->count() >= ParallelElementThreshold();
  if (bias_term_) {
    const float* bias = params_[bias_index_]->cpu_data();
    ForEachValue(geometry_, block_, threaded, [&](int j, int d) { y[j] = x[j] * scale[d] + bias[d]; });
  } else {
    ForEachValue(geometry_, block_, threaded, [&](int j, int d) { y[j] = x[j] * scale[d]; });
  }
}

void ScaleLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  const float* dy = top[0]->cpu_diff();
  const bool learned = bottom.size() == 1;
  const bool threaded = bottom[0]->count() >= ParallelElementThreshold();
  if (learned && bias_term_ && param_propagate_down(bias_index_) && param_propagate_down(0) && propagate_down[0]) {
    BackwardInOnePass(geometry_, block_, threaded, dy, Input(*bottom[0]).cpu_data(), params_[0]->cpu_data(),
                      bottom[0]->mutable_cpu_diff(), params_[bias_index_]->mutable_cpu_diff(),
                      params_[0]->mutable_cpu_diff());
    return;
  }
  // Parameter gradients first: in place, the bottom's gradient overwrites the top's.
  if (bias_term_ && param_propagate_down(bias_index_)) {
    SumPerChannel(geometry_, block_, threaded, params_[bias_index_]->mutable_cpu_diff(),
                  [&](int j) { return static_cast<double>(dy[j]); });
  }
  if (learned ? param_propagate_down(0) : propagate_down[1]) {
    const float* x = Input(*bottom[0]).cpu_data();
    float* ds = (learned ? params_[0].get() : bottom[1])->mutable_cpu_diff();
    // A learned parameter's gradient accumulates (the net zeroes it); a bottom's is overwritten.
    if (!learned) std::fill(ds, ds + geometry_.dim, 0.f);
    SumPerChannel(geometry_, block_, threaded, ds, [&](int j) { return static_cast<double>(dy[j]) * x[j]; });
  }
  if (propagate_down[0]) {
    const float* scale = ScaleOf(bottom).cpu_data();
    float* dx = bottom[0]->mutable_cpu_diff();
    ForEachValue(geometry_, block_, threaded, [&](int j, int d) { dx[j] = dy[j] * scale[d]; });
  }
}

void ScaleLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CREMA_CHECK(bottom[0]->layout() == Layout::kPlain) << describe() << ": the GPU code takes the plain layout only";
  const Device d = device();
  const float* x = bottom[0]->data_on(d);
  const int count = bottom[0]->count();
  KeepInput(*bottom[0]);
  for_each_element(
      context(), count,
      ScaleForwardRule{x, ScaleOf(bottom).data_on(d), bias_term_ ? params_[bias_index_]->data_on(d) : nullptr,
                       top[0]->mutable_data_on(d), geometry_.dim, geometry_.inner});
}

void ScaleLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  const Device d = device();
  const float* dy = top[0]->diff_on(d);
  const bool learned = bottom.size() == 1;
  const int count = bottom[0]->count();
  // Parameter gradients first, summed in one pass over dy and x: in place, the bottom's gradient overwrites the top's.
  const bool bias_grad = bias_term_ && param_propagate_down(bias_index_);
  const bool scale_grad = learned ? param_propagate_down(0) : propagate_down[1];
  if (bias_grad || scale_grad) {
    const Broadcast& g = geometry_;
    float* sums = workspace();
    sum_per_channel(context(), g.outer, g.dim, g.inner,
                    ScaleGradientTerms{dy, scale_grad ? Input(*bottom[0]).data_on(d) : nullptr}, 1.f, sums,
                    sums + 2 * g.dim);
    if (bias_grad) axpy(context(), g.dim, 1.f, sums, params_[bias_index_]->mutable_diff_on(d));
    // A learned parameter's gradient accumulates (the net zeroes it); a bottom's is overwritten.
    if (learned && scale_grad) axpy(context(), g.dim, 1.f, sums + g.dim, params_[0]->mutable_diff_on(d));
    if (!learned && scale_grad) copy(context(), g.dim, sums + g.dim, bottom[1]->mutable_diff_on(d));
  }
  if (propagate_down[0]) {
    // dx = dy * scale: the forward rule on the gradients, without a bias.
    for_each_element(context(), count,
                     ScaleForwardRule{dy, ScaleOf(bottom).data_on(d), nullptr, bottom[0]->mutable_diff_on(d),
                                      geometry_.dim, geometry_.inner});
  }
}

}  // namespace crema
