#include "layers/normalization/mvn.hpp"

#include <cmath>

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"

namespace crema {

void MVNLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& input = *bottom[0];
  const int first_normalized = param_.mvn_param().across_channels() ? 1 : 2;
  CREMA_CHECK(input.num_axes() >= first_normalized)
      << describe() << ": needs an input of at least " << first_normalized << " axes (N"
      << (first_normalized == 2 ? ", C" : "") << ", ...), but the input has shape " << input.shape_string();
  CREMA_CHECK(param_.mvn_param().eps() >= 0) << describe() << ": mvn_param.eps must not be negative";
  groups_ = input.count(0, first_normalized);
  size_ = input.count(first_normalized);
  top[0]->ReshapeLike(input);
  // The GPU code's scratch: per-value terms, then four values per group (see Backward_gpu).
  RequestWorkspace(static_cast<size_t>(input.count()) + 4 * static_cast<size_t>(groups_));
}

void MVNLayer::Moments(const float* values, double* mean, double* deviation) const {
  double sum = 0;
  for (int i = 0; i < size_; ++i) sum += values[i];
  *mean = size_ > 0 ? sum / size_ : 0.0;
  double squares = 0;
  for (int i = 0; i < size_; ++i) squares += (values[i] - *mean) * (values[i] - *mean);
  *deviation = size_ > 0 ? std::sqrt(squares / size_) : 0.0;
}

void MVNLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const bool normalize = param_.mvn_param().normalize_variance();
  const double eps = param_.mvn_param().eps();
  for (int g = 0; g < groups_; ++g) {
    const float* x = bottom[0]->cpu_data() + static_cast<size_t>(g) * size_;
    float* y = top[0]->mutable_cpu_data() + static_cast<size_t>(g) * size_;
    double mean, deviation;
    Moments(x, &mean, &deviation);
    const double scale = normalize ? 1.0 / (deviation + eps) : 1.0;
    for (int i = 0; i < size_; ++i) y[i] = static_cast<float>((x[i] - mean) * scale);
  }
}

// With c = x - mean, s = the standard deviation and d = s + eps: y = c / d, and
// dx = (dy - mean(dy)) / d - c * mean(dy * c) / (d^2 * s); without normalize_variance, dx = dy - mean(dy).
void MVNLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const bool normalize = param_.mvn_param().normalize_variance();
  const double eps = param_.mvn_param().eps();
  for (int g = 0; g < groups_; ++g) {
    const size_t offset = static_cast<size_t>(g) * size_;
    const float* x = bottom[0]->cpu_data() + offset;
    const float* dy = top[0]->cpu_diff() + offset;
    float* dx = bottom[0]->mutable_cpu_diff() + offset;
    double mean, deviation;
    Moments(x, &mean, &deviation);
    double dy_mean = 0, dy_c_mean = 0;
    for (int i = 0; i < size_; ++i) {
      dy_mean += dy[i];
      dy_c_mean += dy[i] * (x[i] - mean);
    }
    dy_mean /= size_;
    dy_c_mean /= size_;
    const double d = normalize ? deviation + eps : 1.0;
    // A constant group (s = 0) has c = 0: its second term vanishes.
    const double second = normalize && deviation > 0 ? dy_c_mean / (d * d * deviation) : 0.0;
    for (int i = 0; i < size_; ++i) dx[i] = static_cast<float>((dy[i] - dy_mean) / d - (x[i] - mean) * second);
  }
}

void MVNLayer::GroupMeans(const float* values, float* means) {
  gemv(context(), Transpose::kNo, groups_, size_, 1.f / size_, values, context().ones(size_), 0.f, means);
}

// The CPU's arithmetic in float: means by products with ones, then the deviations' squares and their means.
void MVNLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = bottom[0]->count();
  if (count == 0) return;
  const bool normalize = param_.mvn_param().normalize_variance();
  const Device d = device();
  const float* x = bottom[0]->data_on(d);
  float* y = top[0]->mutable_data_on(d);
  float* squares = workspace();
  float* mean = squares + count;
  float* variance = mean + groups_;
  GroupMeans(x, mean);
  for_each_element(context(), count, MVNCenterRule{x, mean, y, normalize ? squares : nullptr, size_});
  if (!normalize) return;
  GroupMeans(squares, variance);
  for_each_element(context(), count, MVNScaleRule{variance, y, static_cast<float>(param_.mvn_param().eps()), size_});
}

void MVNLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  const int count = bottom[0]->count();
  if (!propagate_down[0] || count == 0) return;
  const bool normalize = param_.mvn_param().normalize_variance();
  const Device d = device();
  const float* x = bottom[0]->data_on(d);
  const float* dy = top[0]->diff_on(d);
  float* terms = workspace();
  float* mean = terms + count;
  float* variance = mean + groups_;
  float* dy_mean = variance + groups_;
  float* dy_centered_mean = dy_mean + groups_;
  GroupMeans(x, mean);
  GroupMeans(dy, dy_mean);
  if (normalize) {
    for_each_element(context(), count, MVNCenterRule{x, mean, nullptr, terms, size_});
    GroupMeans(terms, variance);
    for_each_element(context(), count, MVNProductRule{x, mean, dy, terms, size_});
    GroupMeans(terms, dy_centered_mean);
  }
  for_each_element(context(), count,
                   MVNBackwardRule{x, dy, mean, normalize ? variance : nullptr, dy_mean, dy_centered_mean,
                                   bottom[0]->mutable_diff_on(d), static_cast<float>(param_.mvn_param().eps()), size_});
}

}  // namespace crema
