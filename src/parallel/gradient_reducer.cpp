#include "parallel/gradient_reducer.hpp"

#include <algorithm>
#include <numeric>

#include "core/common.hpp"
#include "core/context.hpp"
#include "core/math_functions.hpp"

namespace crema {

GradientReducer::GradientReducer(Net* net, Communicator* group, size_t bucket_bytes) : net_(net), group_(group) {
  if (bucket_bytes == 0) bucket_bytes = DefaultBucketBytes(*group);
  const bool on_gpu = net->context().device() == Device::kGPU;
  CREMA_CHECK(on_gpu == group->sums_on_device())
      << (on_gpu ? "the training net is on a GPU, but the group sums gradients in host memory (its GPUs need NCCL)"
                 : "the training net is on the CPU, but the group sums gradients on GPUs (NCCL)");
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
  flat_ = std::make_unique<Blob>(std::vector<int>{static_cast<int>(total)});
  flat_data_ = total > 0 ? flat_->mutable_data_on(net->context().device()) : nullptr;
  taken_.assign(params.size(), false);
  OnStart(0);
}

void GradientReducer::OnStart(int iteration) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Bucket& bucket : buckets_) bucket.pending = static_cast<int>(bucket.params.size());
  std::fill(taken_.begin(), taken_.end(), false);
  next_bucket_ = 0;
}

namespace {

// The stream the calling thread's work on `context` goes to (a GPU lane's, or the side stream of gradient-ready work).
void* CurrentStream(Context& context) {
#ifdef CREMA_USE_CUDA
  if (context.device() == Device::kGPU) return context.stream();
#endif
  return nullptr;
}

}  // namespace

void GradientReducer::Take(int param) {
  if (taken_[param]) return;
  taken_[param] = true;
  Context& context = net_->context();
  const Blob& blob = *net_->learnable_params()[param];
  copy(context, blob.count(), blob.diff_on(context.device()), flat_data_ + offset_of_[param]);
  --buckets_[bucket_of_[param]].pending;
}

void GradientReducer::StartReadyBuckets() {
  while (next_bucket_ < static_cast<int>(buckets_.size()) && buckets_[next_bucket_].pending == 0) {
    const Bucket& bucket = buckets_[next_bucket_++];
    group_->StartAllReduceSum(flat_data_ + bucket.offset, bucket.count, CurrentStream(net_->context()));
  }
}

void GradientReducer::OnParameterGradientReady(int iteration, const Net::GradientReady& ready) {
  const int param = ready.index();
  ready.Then([this, param] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Take(param);
      StartReadyBuckets();
    }
    group_->Progress();
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
  last_waited_seconds_ = SteadySeconds() - backward_ended;
  double first = 0, last = 0, overlapped = 0;
  for (size_t i = 0; i < flights.size(); ++i) {
    first = i == 0 ? flights[i].started : std::min(first, flights[i].started);
    last = std::max(last, flights[i].finished);
  }
  // The part of the time with a sum in flight that came before backward ended.
  if (!flights.empty()) overlapped = std::max(0.0, std::min(last, backward_ended) - first);
  last_seconds_ = flights.empty() ? 0 : last - first;
  last_overlapped_seconds_ = overlapped;
  // The mean over the ranks, back into each gradient (on a GPU, queued after the sums).
  Context& context = net_->context();
  const float mean = 1.f / static_cast<float>(group_->size());
  for (const Bucket& bucket : buckets_)
    scale(context, static_cast<int>(bucket.count), mean, flat_data_ + bucket.offset);
  const std::vector<Blob*>& params = net_->learnable_params();
  for (size_t param = 0; param < params.size(); ++param)
    copy(context, params[param]->count(), flat_data_ + offset_of_[param],
         params[param]->mutable_diff_on(context.device()));
}

}  // namespace crema
