#include "parallel/thread_group.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/common.hpp"

namespace crema {

class ThreadGroup::Member_ final : public Communicator {
 public:
  Member_(ThreadGroup* group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  std::string Describe() const override {
    return "threads of one process: " + std::to_string(group_->size()) + " members";
  }

  void AllReduceSum(double* values, size_t count) override { Sum(values, count, "a sum over the ranks"); }
  void Broadcast(std::string* bytes, int root) override {
    std::string received;
    group_->Meet(rank_, bytes, timeout_seconds(), "a broadcast from rank " + std::to_string(root),
                 [&](const std::vector<const void*>& all) { received = *static_cast<const std::string*>(all[root]); });
    *bytes = std::move(received);
  }
  std::vector<std::string> Gather(const std::string& bytes, int root) override {
    std::vector<std::string> gathered;
    group_->Meet(rank_, &bytes, timeout_seconds(), "a gather to rank " + std::to_string(root),
                 [&](const std::vector<const void*>& all) {
                   if (rank_ != root) return;
                   for (const void* operand : all) gathered.push_back(*static_cast<const std::string*>(operand));
                 });
    return gathered;
  }
  void StartAllReduceSum(float* data, size_t count, void* stream) override {
    started_.push_back({data, count, SteadySeconds()});
  }
  std::vector<Flight> WaitAll() override {
    std::vector<Flight> flights;
    for (const Started& bucket : started_) {
      Sum(bucket.data, bucket.count, "the gradient all-reduce");
      flights.push_back({bucket.started, SteadySeconds()});
    }
    started_.clear();
    return flights;
  }
  [[noreturn]] void Abort(int code) override {
    std::fflush(nullptr);
    std::_Exit(code);
  }

 private:
  // Sums `count` values over the members into `values`, in rank order (every member gets the same bits).
  template <typename T>
  void Sum(T* values, size_t count, const std::string& what) {
    std::vector<T> sum(count, T(0));
    group_->Meet(rank_, values, timeout_seconds(), what, [&](const std::vector<const void*>& all) {
      for (const void* operand : all)
        for (size_t i = 0; i < count; ++i) sum[i] += static_cast<const T*>(operand)[i];
    });
    std::copy(sum.begin(), sum.end(), values);
  }

  struct Started {
    float* data;
    size_t count;
    double started;
  };
  ThreadGroup* group_;
  int rank_;
  std::vector<Started> started_;
};

ThreadGroup::ThreadGroup(int size)
    : size_(size), operands_(static_cast<size_t>(size)), arrived_(static_cast<size_t>(size)) {
  CREMA_CHECK(size >= 1) << "a group of " << size << " members";
}

ThreadGroup::~ThreadGroup() = default;

std::unique_ptr<Communicator> ThreadGroup::Member(int rank) {
  CREMA_CHECK(rank >= 0 && rank < size_) << "member " << rank << " of a group of " << size_;
  return std::make_unique<Member_>(this, rank);
}

void ThreadGroup::Barrier(int rank, double timeout, const std::string& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!failure_.empty()) throw Error(failure_);
  const long long generation = generation_;
  arrived_[static_cast<size_t>(rank)] = generation + 1;
  if (++waiting_ == size_) {
    waiting_ = 0;
    ++generation_;
    changed_.notify_all();
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  if (!changed_.wait_until(lock, deadline, [&] { return generation_ != generation || !failure_.empty(); })) {
    std::ostringstream missing;
    for (int r = 0; r < size_; ++r)
      if (arrived_[static_cast<size_t>(r)] <= generation) missing << (missing.tellp() > 0 ? ", " : "") << r;
    failure_ = what + " did not complete within " + std::to_string(static_cast<int>(timeout)) + " s: rank(s) " +
               missing.str() + " did not reach it (stopped or hung)";
    changed_.notify_all();
  }
  if (generation_ == generation) throw Error(failure_);
}

void ThreadGroup::Meet(int rank, const void* operand, double timeout, const std::string& what,
                       const std::function<void(const std::vector<const void*>&)>& combine) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    operands_[static_cast<size_t>(rank)] = operand;
  }
  Barrier(rank, timeout, what);
  std::vector<const void*> operands;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    operands = operands_;
  }
  combine(operands);
  Barrier(rank, timeout, what);
}

}  // namespace crema
