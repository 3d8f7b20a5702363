#ifdef CREMA_USE_NCCL

#include "parallel/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "core/common.hpp"

namespace crema {

namespace {

void CheckNccl(ncclResult_t result, const char* call) {
  CREMA_CHECK(result == ncclSuccess) << "NCCL: " << call << " failed: " << ncclGetErrorString(result);
}

// The communicator is non-blocking (a call may return before its work is done, and then says ncclInProgress), so
// that no wait on it is without a deadline: polls until its last call has finished; past `deadline`, aborts the
// communicator (every call on it then returns) and throws naming `what`.
void Settle(ncclComm_t comm, double deadline, double timeout, const std::string& what) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    CheckNccl(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError");
    if (state != ncclInProgress) {
      CheckNccl(state, what.c_str());
      return;
    }
    if (SteadySeconds() > deadline) {
      ncclCommAbort(comm);
      CREMA_FAIL() << what << " did not complete within " << timeout << " s: another rank is stopped, hung or gone. "
                   << "Ending every rank (--collective_timeout sets the limit)";
    }
    std::this_thread::yield();
  }
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> host, int device)
    : host_(std::move(host)), device_(device) {
  set_timeout_seconds(host_->timeout_seconds());
  const cudaError_t selected = cudaSetDevice(device);
  CREMA_CHECK(selected == cudaSuccess) << "rank " << host_->rank() << ": GPU " << device
                                       << " cannot be selected: " << cudaGetErrorString(selected);
  // Rank 0 draws the communicator's id; the host group carries it to every member.
  ncclUniqueId id;
  std::string bytes;
  if (host_->rank() == 0) {
    CheckNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    bytes.assign(reinterpret_cast<const char*>(&id), sizeof(id));
  }
  host_->Broadcast(&bytes, 0);
  CREMA_CHECK(bytes.size() == sizeof(id))
      << "rank " << host_->rank() << ": NCCL's id from rank 0 has " << bytes.size() << " bytes, not " << sizeof(id);
  std::memcpy(&id, bytes.data(), sizeof(id));
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, host_->size(), id, host_->rank(), &config);
  if (started != ncclInProgress) CheckNccl(started, "ncclCommInitRankConfig");
  comm_ = comm;
  Settle(comm, SteadySeconds() + timeout_seconds(), timeout_seconds(), "NCCL's start on every rank");
  cudaEvent_t done = nullptr;
  const cudaError_t made = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  CREMA_CHECK(made == cudaSuccess) << "rank " << host_->rank() << ": a CUDA event: " << cudaGetErrorString(made);
  done_ = done;
}

NcclCommunicator::~NcclCommunicator() {
  if (done_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(done_));
  if (comm_ != nullptr) ncclCommDestroy(static_cast<ncclComm_t>(comm_));
}

std::string NcclCommunicator::Describe() const {
  int version = 0;
  ncclGetVersion(&version);
  return host_->Describe() + "; gradients summed by NCCL " + std::to_string(version / 10000) + "." +
         std::to_string(version / 100 % 100) + "." + std::to_string(version % 100) +
         " between their GPUs (this one: GPU " + std::to_string(device_) + ")";
}

void NcclCommunicator::StartAllReduceSum(float* data, size_t count, void* stream) {
  const auto comm = static_cast<ncclComm_t>(comm_);
  const ncclResult_t queued =
      ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm, static_cast<cudaStream_t>(stream));
  if (queued != ncclInProgress) CheckNccl(queued, "ncclAllReduce");
  Settle(comm, SteadySeconds() + timeout_seconds(), timeout_seconds(), "queuing a gradient all-reduce (NCCL)");
  // Every sum of a pass goes on one stream (the gradient-ready work's): an event after the last marks them all done.
  const cudaError_t recorded = cudaEventRecord(static_cast<cudaEvent_t>(done_), static_cast<cudaStream_t>(stream));
  CREMA_CHECK(recorded == cudaSuccess) << "rank " << rank() << ": " << cudaGetErrorString(recorded);
  started_ = true;
}

std::vector<Communicator::Flight> NcclCommunicator::WaitAll() {
  // The caller's work is ordered after the sums on the device; the host waits here too, with a deadline, so that a
  // rank that is gone ends this one instead of hanging it (and so that NCCL's errors are told at the iteration).
  if (!started_) return {};
  started_ = false;
  const auto comm = static_cast<ncclComm_t>(comm_);
  const double deadline = SteadySeconds() + timeout_seconds();
  for (;;) {
    const cudaError_t state = cudaEventQuery(static_cast<cudaEvent_t>(done_));
    if (state == cudaSuccess) break;
    CREMA_CHECK(state == cudaErrorNotReady)
        << "rank " << rank() << ": the gradient all-reduce (NCCL): " << cudaGetErrorString(state);
    ncclResult_t asynchronous = ncclSuccess;
    CheckNccl(ncclCommGetAsyncError(comm, &asynchronous), "ncclCommGetAsyncError");
    if (asynchronous != ncclInProgress) CheckNccl(asynchronous, "the gradient all-reduce");
    if (SteadySeconds() > deadline) {
      ncclCommAbort(comm);
      comm_ = nullptr;
      CREMA_FAIL() << "the gradient all-reduce (NCCL) did not complete within " << timeout_seconds()
                   << " s: another rank is stopped, hung or gone. Ending every rank (--collective_timeout sets the "
                   << "limit)";
    }
    std::this_thread::yield();
  }
  return {};
}

void NcclCommunicator::Abort(int code) {
  if (comm_ != nullptr) ncclCommAbort(static_cast<ncclComm_t>(comm_));
  comm_ = nullptr;
  host_->Abort(code);
  std::_Exit(code);  // (Abort does not return)
}

}  // namespace crema

#endif  // CREMA_USE_NCCL
