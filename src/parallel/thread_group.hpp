// A group whose members are threads of one process (one solver per GPU, Caffe's way; and the tests of the solver's
// group logic on the CPU). The host collectives meet in shared memory: each member leaves its operand, waits for the
// others (with the group's deadline, naming the ranks that did not arrive), and reads theirs; sums are taken in rank
// order, so every member gets the same bits. The gradient sums of host memory are made at WaitAll, bucket by bucket
// (no overlap: between threads of one process the transport is a copy; on GPUs NCCL sums on the devices and this
// group carries only the host collectives).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/communicator.hpp"

namespace crema {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size);
  ~ThreadGroup();
  int size() const { return size_; }
  // The communicator of member `rank` (each used by one thread; the group must outlive them).
  std::unique_ptr<Communicator> Member(int rank);

 private:
  class Member_;
  friend class Member_;
  // One meeting of every member: each calls Meet with its operand; `combine` runs on each member once all have
  // arrived (reading the others' operands); a second barrier keeps the operands alive until every member has read.
  void Meet(int rank, const void* operand, double timeout, const std::string& what,
            const std::function<void(const std::vector<const void*>&)>& combine);
  void Barrier(int rank, double timeout, const std::string& what);

  int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<const void*> operands_;
  std::vector<long long> arrived_;  // per member: the barriers it has reached
  long long generation_ = 0;        // barriers completed
  int waiting_ = 0;
  std::string failure_;  // a member's timeout: every later meeting fails with it
};

}  // namespace crema
