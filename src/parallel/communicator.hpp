// A group of solvers that train one net together (data parallelism): who they are (rank r of N) and the
// collectives they run. The solver reads the group through this interface only; the transports (MPI between
// processes, NCCL between GPUs) sit behind it, each in its own file, and none of their headers leaks out.
//
// Every member calls the same collectives in the same order (what MPI and NCCL require of a group). The blocking
// collectives work on host memory; the gradient all-reduce is started as each bucket of gradients is complete
// (StartAllReduceSum) and waited for before the update (WaitAll), so it runs beside the rest of backward.
//
// Faults: a collective that does not complete within timeout_seconds() (another member stopped, hung or died)
// throws a crema::Error that says which collective and, where the transport can tell, which ranks never arrived;
// the program then ends the whole group with Abort, so no member waits forever.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace crema {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "MPI (Open MPI v4.1.4): 2 processes on 1 host", for the log.
  virtual std::string Describe() const = 0;

  // Sums `count` values over the group, in place, on every member.
  virtual void AllReduceSum(double* values, size_t count) = 0;
  // Root's bytes to every member (resized there).
  virtual void Broadcast(std::string* bytes, int root) = 0;
  // Every member's bytes, in rank order, on `root` (empty elsewhere).
  virtual std::vector<std::string> Gather(const std::string& bytes, int root) = 0;

  // Starts summing `count` floats at `data` over the group, in place; the buffer must stay untouched until WaitAll
  // returns. Started in the same order on every member. `data` is host memory, or, where sums_on_device(), memory of
  // the member's GPU, and the sum is queued on `stream` (a cudaStream_t; ignored on the host).
  virtual void StartAllReduceSum(float* data, size_t count, void* stream) = 0;
  // Whether the gradient sums take GPU memory (NCCL) rather than host memory.
  virtual bool sums_on_device() const { return false; }
  // Waits for every all-reduce started since the last WaitAll (on a GPU: they are queued on their streams, which the
  // caller orders its work after). Returns when each of them was started and seen complete, in the order started (for
  // the overlap report; empty where the transport does not tell).
  struct Flight {
    double started = 0;  // seconds on the steady clock
    double finished = 0;
  };
  virtual std::vector<Flight> WaitAll() = 0;

  // A chance to move the sums in flight along (called after each layer's backward); nothing where the transport
  // moves them by itself.
  virtual void Progress() {}

  // Ends every member of the group now (after an error on this one), with `code` as the exit status.
  [[noreturn]] virtual void Abort(int code) = 0;

  // How long a collective may wait for the others before it is taken as a fault.
  double timeout_seconds() const { return timeout_seconds_; }
  void set_timeout_seconds(double seconds) { timeout_seconds_ = seconds; }

 private:
  double timeout_seconds_ = 300;
};

// Seconds on the steady clock (the time base of Communicator::Flight).
double SteadySeconds();

// The process group this process was started in: under mpirun (or another MPI launcher) with more than one process,
// an MPI group over all of them; otherwise none (null). A launch by mpirun of a crema built without MPI is an error
// that says so, rather than N copies training alone and overwriting each other's snapshots.
std::unique_ptr<Communicator> ProcessGroupFromEnvironment();

// The group `host`'s members with their gradient sums on their GPUs over NCCL, this member on GPU `device`
// (parallel/nccl_communicator.hpp); every member calls it at once. Throws where crema was built without NCCL.
std::unique_ptr<Communicator> OverNccl(std::unique_ptr<Communicator> host, int device);

// Whether this crema was built with MPI, and with NCCL (for the log and for tests).
bool BuiltWithMpi();
bool BuiltWithNccl();

}  // namespace crema
