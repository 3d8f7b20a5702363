// The process group over MPI (crema built with CREMA_USE_MPI): every process mpirun started, on one host or many.
//
// All MPI calls run on one thread of the communicator's own (MPI_THREAD_SERIALIZED), which initializes MPI and
// finalizes it. The solver's thread hands it jobs: a gradient bucket's all-reduce is started there with
// MPI_Iallreduce, and tested again after each layer's backward (Progress: MPI moves a non-blocking collective along
// only inside MPI calls), so the sums run beside the computation without a thread that polls on a timer and takes
// the compute threads' cores from them; the blocking collectives are non-blocking ones completed on that thread. Every
// wait has a deadline (Communicator::timeout_seconds): when rank 0's runs out, it asks each rank where it is (a roll
// call on a communicator of its own) and names in its error the ranks that do not answer or that are behind; the other
// ranks wait a little longer, so that rank 0's report comes first.
#pragma once

#ifdef CREMA_USE_MPI

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parallel/communicator.hpp"

namespace crema {

class MpiCommunicator final : public Communicator {
 public:
  // Initializes MPI (on the communicator's thread) and joins MPI_COMM_WORLD. Throws when MPI cannot start, or does
  // not give the thread support asked for.
  MpiCommunicator();
  // Finalizes MPI on the communicator's thread (after the collectives in flight end).
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string Describe() const override { return description_; }

  void AllReduceSum(double* values, size_t count) override;
  void Broadcast(std::string* bytes, int root) override;
  std::vector<std::string> Gather(const std::string& bytes, int root) override;
  void StartAllReduceSum(float* data, size_t count, void* stream) override;
  std::vector<Flight> WaitAll() override;
  void Progress() override;
  [[noreturn]] void Abort(int code) override;

 private:
  struct State;   // MPI's handles and requests, known only to the .cpp (mpi.h stays out of this header)
  struct Waiter;  // how a collective is waited for (below)
  Waiter MakeWaiter() const;

  // Runs `job` on the communicator's thread and waits for it; rethrows what it threw. After a fault every call
  // throws the fault again.
  void Run(const std::function<void()>& job);
  // Queues `job` without waiting for it.
  void Queue(std::function<void()> job);
  void Loop();
  // Tests the sums in flight (on the communicator's thread), noting when each completed.
  void TestFlights();

  int rank_ = 0;
  int size_ = 1;
  std::string description_;
  std::unique_ptr<State> state_;  // touched on the communicator's thread only

  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::atomic<bool> progress_queued_{false};
  std::atomic<bool> in_flight_{false};  // sums started since the last WaitAll
  std::string fault_;  // the first error of a queued job; every later call throws it
};

}  // namespace crema

#endif  // CREMA_USE_MPI
