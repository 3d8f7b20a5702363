#include "layers/common/embed.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/elementwise.hpp"
#include "core/filler.hpp"
#include "core/math_functions.hpp"

namespace crema {

void EmbedLayer::LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) {
  const EmbedParameter& param = param_.embed_param();
  const std::string me = describe();
  num_output_ = static_cast<int>(param.num_output());
  input_dim_ = static_cast<int>(param.input_dim());
  CREMA_CHECK(num_output_ > 0) << me << ": embed_param.num_output must be given and positive";
  CREMA_CHECK(input_dim_ > 0) << me << ": embed_param.input_dim (the number of distinct indices) must be given and "
                              << "positive";
  bias_term_ = param.bias_term();
  std::vector<std::vector<int>> shapes = {{input_dim_, num_output_}};
  if (bias_term_) shapes.push_back({num_output_});
  if (!params_.empty()) {
    AdoptStoredParameters(shapes, {"weights", "bias"});
    return;
  }
  params_.push_back(std::make_shared<Blob>(shapes[0]));
  Fill(param.weight_filler(), params_[0].get(), random());
  if (bias_term_) {
    params_.push_back(std::make_shared<Blob>(shapes[1]));
    Fill(param.bias_filler(), params_[1].get(), random());
  }
}

void EmbedLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  std::vector<int> shape = bottom[0]->shape();
  shape.push_back(num_output_);
  top[0]->Reshape(shape);
  // The GPU's backward: the rows used, their offsets and the positions by row, built on the host, in the
  // workspace (at most 2 * min(items, input_dim) + 1 + items values).
  const size_t items = bottom[0]->count();
  if (RunsGpuCode()) RequestWorkspace(2 * std::min(items, static_cast<size_t>(input_dim_)) + 1 + items);
}

int EmbedLayer::Index(const Blob& indices, int position) {
  const float value = indices.cpu_data()[position];
  // Truncated toward zero, the value must be a row: written so that NaN is not.
  CREMA_CHECK(value > -1.f && value < static_cast<float>(input_dim_))
      << describe() << ": index " << value << " at position " << position << " of the bottom (shape "
      << indices.shape_string() << ") is not in [0, " << input_dim_ << ") (embed_param.input_dim)";
  std::ostringstream named;
  named << "index " << value << " at position " << position << " of the bottom";
  NoteFractional(value, named.str());
  return LabelClass(value);
}

void EmbedLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weights = params_[0]->cpu_data();
  float* output = top[0]->mutable_cpu_data();
  for (int i = 0; i < bottom[0]->count(); ++i) {
    float* row = output + static_cast<size_t>(i) * num_output_;
    cpu_copy(num_output_, weights + static_cast<size_t>(Index(*bottom[0], i)) * num_output_, row);
    if (bias_term_) cpu_axpy(num_output_, 1.f, params_[1]->cpu_data(), row);
  }
}

void EmbedLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[0]) << describe() << ": the indices have no gradient; set propagate_down: false "
                                  << "for them";
  const float* top_diff = top[0]->cpu_diff();
  const int items = bottom[0]->count();
  if (param_propagate_down(0)) {
    float* weight_diff = params_[0]->mutable_cpu_diff();
    for (int i = 0; i < items; ++i)
      cpu_axpy(num_output_, 1.f, top_diff + static_cast<size_t>(i) * num_output_,
               weight_diff + static_cast<size_t>(Index(*bottom[0], i)) * num_output_);
  }
  if (bias_term_ && param_propagate_down(1)) {
    cpu_gemv(Transpose::kYes, items, num_output_, 1.f, top_diff, context().ones(items), 1.f,
             params_[1]->mutable_cpu_diff());
  }
}

void EmbedLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (int i = 0; i < bottom[0]->count(); ++i) Index(*bottom[0], i);
  const Device d = device();
  for_each_element(
      context(), top[0]->count(),
      EmbedForwardRule{bottom[0]->data_on(d), params_[0]->data_on(d), bias_term_ ? params_[1]->data_on(d) : nullptr,
                       top[0]->mutable_data_on(d), num_output_});
}

void EmbedLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[0]) << describe() << ": the indices have no gradient; set propagate_down: false "
                                  << "for them";
  const Device d = device();
  const float* top_diff = top[0]->diff_on(d);
  const int items = bottom[0]->count();
  if (param_propagate_down(0) && items > 0) {
    // Rows, offsets and positions travel as floats, exact below 2^24.
    CREMA_CHECK(items < (1 << 24) && input_dim_ < (1 << 24))
        << describe() << ": on the GPU the indices (" << items << ") and embed_param.input_dim (" << input_dim_
        << ") must be below 2^24";
    std::vector<int> rows(items), order(items);
    for (int i = 0; i < items; ++i) {
      rows[i] = Index(*bottom[0], i);
      order[i] = i;
    }
    // The positions by row, each row's in increasing order.
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return rows[a] < rows[b]; });
    int used = 0;
    for (int i = 0; i < items; ++i) used += i == 0 || rows[order[i]] != rows[order[i - 1]];
    std::vector<float> picks(2 * static_cast<size_t>(used) + 1 + items);
    float* used_rows = picks.data();
    float* offsets = used_rows + used;
    float* positions = offsets + used + 1;
    int u = 0;
    for (int i = 0; i < items; ++i) {
      if (i == 0 || rows[order[i]] != rows[order[i - 1]]) {
        used_rows[u] = static_cast<float>(rows[order[i]]);
        offsets[u++] = static_cast<float>(i);
      }
      positions[i] = static_cast<float>(order[i]);
    }
    offsets[used] = static_cast<float>(items);
    float* list = workspace();
    upload(context(), static_cast<int>(picks.size()), picks.data(), list);
    for_each_element(context(), used * num_output_,
                     EmbedWeightGradientRule{top_diff, list, params_[0]->mutable_diff_on(d), num_output_, used});
  }
  if (bias_term_ && param_propagate_down(1)) {
    gemv(context(), Transpose::kYes, items, num_output_, 1.f, top_diff, context().ones(items), 1.f,
         params_[1]->mutable_diff_on(d));
  }
}

}  // namespace crema
