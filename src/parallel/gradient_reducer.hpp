// Data parallelism's gradient sum (PyTorch DDP's reducer, on crema's gradient-ready hooks): the training net's
// learnable parameters are laid out in buckets of about `bucket_bytes`, in the order backward completes their
// gradients; each bucket's gradients are copied into one flat buffer on the net's device as they become ready, and
// its all-reduce starts as soon as the bucket is full, while backward goes on with the layers below (on a GPU, the
// copies and the sum are queued on the stream of the gradient-ready work, after the step that completed them). Before
// the update, the sums are waited for and each gradient becomes the mean over the ranks, so every rank applies the same
// update to the same weights (the ranks' weights stay equal without being sent again).
//
// Buckets start in bucket order on every rank, whatever order concurrent lanes complete them in (a group's members
// must start their collectives in one order). A parameter whose hook did not fire is taken at the end.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "parallel/communicator.hpp"
#include "solver/solver.hpp"

namespace crema {

class GradientReducer : public SolverCallback {
 public:
  // `net` and `group` are not owned and must outlive the reducer. `bucket_bytes` 0: DefaultBucketBytes(group).
  GradientReducer(Net* net, Communicator* group, size_t bucket_bytes = 0);
  // Buckets of 1 MiB for sums in host memory (between CPU processes the time of a sum is mostly its bytes, and small
  // buckets start early), of 25 MiB for NCCL's (PyTorch DDP's size: few calls, each long enough to reach the link's
  // bandwidth; docs/distributed.md's cost model).
  static size_t DefaultBucketBytes(const Communicator& group) {
    return group.sums_on_device() ? size_t{25} << 20 : size_t{1} << 20;
  }

  void OnStart(int iteration) override;
  void OnParameterGradientReady(int iteration, const Net::GradientReady& ready) override;
  void OnGradientsReady(int iteration) override;

  int buckets() const { return static_cast<int>(buckets_.size()); }
  size_t bytes() const { return static_cast<size_t>(flat_->count()) * sizeof(float); }
  // The last iteration's sums: their time in flight (from the first start to the last completion) and the part of
  // it before backward ended (the overlap).
  double last_seconds() const { return last_seconds_; }
  double last_overlapped_seconds() const { return last_overlapped_seconds_; }
  // And how long the update waited for them after backward (the time the sums added to the iteration).
  double last_waited_seconds() const { return last_waited_seconds_; }

 private:
  struct Bucket {
    std::vector<int> params;  // learnable parameter indices
    size_t offset = 0;        // into flat_
    size_t count = 0;
    int pending = 0;  // parameters not yet copied in this iteration
  };
  // Copies parameter `param`'s gradient into its place in flat_ and starts every full bucket whose turn has come.
  void Take(int param);
  void StartReadyBuckets();

  Net* net_;
  Communicator* group_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;     // per learnable parameter
  std::vector<size_t> offset_of_;  // per learnable parameter, into flat_
  std::vector<bool> taken_;        // per learnable parameter, this iteration
  std::unique_ptr<Blob> flat_;     // the buckets, one after another, on the net's device
  float* flat_data_ = nullptr;
  int next_bucket_ = 0;  // the first bucket not yet started
  std::mutex mutex_;     // hooks fire from whichever lane completed the step
  double last_seconds_ = 0;
  double last_overlapped_seconds_ = 0;
  double last_waited_seconds_ = 0;
};

}  // namespace crema
