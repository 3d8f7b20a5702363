// A group whose gradient sums run on the members' GPUs over NCCL (crema built with CUDA and CREMA_USE_NCCL): each
// member is one GPU, in a process of its own (ranks of an MPI group: NCCL bootstrapped over MPI) or a thread of one
// process (crema train --gpu=0,1: a ThreadGroup). The host collectives (the loss, tests, snapshots, the state sent
// from rank 0) go through the host group; the NCCL communicator is made from the unique id rank 0 draws, which the
// host group carries to the others. A bucket's sum is queued on the stream the gradient-ready work runs on, so it
// follows the copies into the bucket and precedes what the pass orders after that stream. The NCCL communicator is
// non-blocking, so every wait on it has the group's deadline: at the start, and in WaitAll, which waits on the host for
// the last sum (an event after it) and aborts the communicator when a rank does not take part.
//
// Compiled in every CUDA build; not yet run on a GPU.
#pragma once

#ifdef CREMA_USE_NCCL

#include <memory>

#include "parallel/communicator.hpp"

namespace crema {

class NcclCommunicator final : public Communicator {
 public:
  // Joins the NCCL communicator of `host`'s members, this one on GPU `device` (made current on the calling thread).
  // Every member must construct its own at once (NCCL's initialization waits for all).
  NcclCommunicator(std::unique_ptr<Communicator> host, int device);
  ~NcclCommunicator() override;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string Describe() const override;

  void AllReduceSum(double* values, size_t count) override { host_->AllReduceSum(values, count); }
  void Broadcast(std::string* bytes, int root) override { host_->Broadcast(bytes, root); }
  std::vector<std::string> Gather(const std::string& bytes, int root) override { return host_->Gather(bytes, root); }
  void StartAllReduceSum(float* data, size_t count, void* stream) override;
  bool sums_on_device() const override { return true; }
  std::vector<Flight> WaitAll() override;
  [[noreturn]] void Abort(int code) override;

 private:
  std::unique_ptr<Communicator> host_;
  int device_;
  void* comm_ = nullptr;  // the ncclComm_t (nccl.h stays in the .cpp), non-blocking
  void* done_ = nullptr;  // a cudaEvent_t recorded after the last sum queued
  bool started_ = false;  // sums queued since the last WaitAll
};

}  // namespace crema

#endif  // CREMA_USE_NCCL
