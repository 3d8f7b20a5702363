#ifdef CREMA_USE_NCCL

#include "parallel/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/common.hpp"

namespace crema {

namespace {

void CheckNccl(ncclResult_t result, const char* call) {
  CREMA_CHECK(result == ncclSuccess) << "NCCL: " << call << " failed: " << ncclGetErrorString(result);
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
  CheckNccl(ncclCommInitRank(&comm, host_->size(), id, host_->rank()), "ncclCommInitRank");
  comm_ = comm;
}

NcclCommunicator::~NcclCommunicator() {
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
  CheckNccl(ncclAllReduce(data, data, count, ncclFloat, ncclSum, static_cast<ncclComm_t>(comm_),
                          static_cast<cudaStream_t>(stream)),
            "ncclAllReduce");
}

std::vector<Communicator::Flight> NcclCommunicator::WaitAll() {
  // The sums are queued on the streams the caller orders its work after; an error NCCL met on the way is told now.
  ncclResult_t asynchronous = ncclSuccess;
  CheckNccl(ncclCommGetAsyncError(static_cast<ncclComm_t>(comm_), &asynchronous), "ncclCommGetAsyncError");
  CheckNccl(asynchronous, "a gradient all-reduce");
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
