#include "parallel/gradient_reducer.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/common.hpp"

namespace crema {

GradientReducer::GradientReducer(Net* net, Communicator* group, size_t bucket_bytes) : net_(net), group_(group) {
  CREMA_CHECK(net->context().device() == Device::kCPU)
      << "data parallelism over MPI sums gradients in host memory; a net on a GPU needs NCCL (not yet available)";
  const std::vector<Blob*>& params = net->learnable_params();
  // Backward completes the parameters of later steps first.
  std::vector<int> order(params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return net->gradient_ready_step(a) > net->gradient_ready_step(b); });
  bucket_of_.assign(params.size(), -1);
  offset_of_.assign(params.size(), 0);
  size_t total = 0;
  for (int param : order) {
    const size_t count = static_cast<size_t>(params[param]->count());
    if (buckets_.empty() ||
        (buckets_.back().count > 0 && (buckets_.back().count + count) * sizeof(float) > bucket_bytes)) {
      buckets_.emplace_back();
      buckets_.back().offset = total;
    }
    Bucket& bucket = buckets_.back();
    bucket.params.push_back(param);
    bucket_of_[param] = static_cast<int>(buckets_.size()) - 1;
    offset_of_[param] = total;
    bucket.count += count;
    total += count;
  }
  flat_.assign(total, 0.f);
  taken_.assign(params.size(), false);
  OnStart(0);
}

void GradientReducer::OnStart(int iteration) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Bucket& bucket : buckets_) bucket.pending = static_cast<int>(bucket.params.size());
  std::fill(taken_.begin(), taken_.end(), false);
  next_bucket_ = 0;
}

void GradientReducer::Take(int param) {
  if (taken_[param]) return;
  taken_[param] = true;
  const Blob& blob = *net_->learnable_params()[param];
  std::memcpy(flat_.data() + offset_of_[param], blob.cpu_diff(), static_cast<size_t>(blob.count()) * sizeof(float));
  --buckets_[bucket_of_[param]].pending;
}

void GradientReducer::StartReadyBuckets() {
  while (next_bucket_ < static_cast<int>(buckets_.size()) && buckets_[next_bucket_].pending == 0) {
    const Bucket& bucket = buckets_[next_bucket_++];
    group_->StartAllReduceSum(flat_.data() + bucket.offset, bucket.count);
  }
}

void GradientReducer::OnParameterGradientReady(int iteration, const Net::GradientReady& ready) {
  const int param = ready.index();
  ready.Then([this, param] {
    std::lock_guard<std::mutex> lock(mutex_);
    Take(param);
    StartReadyBuckets();
  });
}

void GradientReducer::OnGradientsReady(int iteration) {
  const double backward_ended = SteadySeconds();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t param = 0; param < taken_.size(); ++param) Take(static_cast<int>(param));
    StartReadyBuckets();
  }
  const std::vector<Communicator::Flight> flights = group_->WaitAll();
  double first = 0, last = 0, overlapped = 0;
  for (size_t i = 0; i < flights.size(); ++i) {
    first = i == 0 ? flights[i].started : std::min(first, flights[i].started);
    last = std::max(last, flights[i].finished);
  }
  // The part of the time with a sum in flight that came before backward ended.
  if (!flights.empty()) overlapped = std::max(0.0, std::min(last, backward_ended) - first);
  last_seconds_ = flights.empty() ? 0 : last - first;
  last_overlapped_seconds_ = overlapped;
  // The mean over the ranks, back into each gradient.
  const float mean = 1.f / static_cast<float>(group_->size());
  const std::vector<Blob*>& params = net_->learnable_params();
  for (size_t param = 0; param < params.size(); ++param) {
    float* diff = params[param]->mutable_cpu_diff();
    const float* sum = flat_.data() + offset_of_[param];
    for (int i = 0; i < params[param]->count(); ++i) diff[i] = sum[i] * mean;
  }
}

}  // namespace crema
