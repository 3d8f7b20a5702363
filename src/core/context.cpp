#include "core/context.hpp"

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <vector>

#include "core/common.hpp"
#include "core/cuda_check.hpp"
#include "core/cudnn.hpp"
#include "core/synced_memory.hpp"
#include "core/threads.hpp"

namespace crema {

const char* DeviceName(Device device) { return device == Device::kGPU ? "GPU" : "CPU"; }

bool Context::built_with_cuda() {
#ifdef CREMA_USE_CUDA
  return true;
#else
  return false;
#endif
}

int Context::gpu_count() {
#ifdef CREMA_USE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

namespace {

// CREMA_DETERMINISTIC: "1" switches deterministic mode on, "0" or unset leaves it off.
bool DeterministicFromEnvironment() {
  const char* text = std::getenv("CREMA_DETERMINISTIC");
  if (text == nullptr || std::string(text).empty() || std::string(text) == "0") return false;
  CREMA_CHECK(std::string(text) == "1") << "CREMA_DETERMINISTIC='" << text << "' must be 1 (on) or 0 (off)";
  return true;
}

// CREMA_CUDNN_WORKSPACE_LIMIT_MB: a whole number of MiB (0 allows only algorithms that need no workspace).
size_t WorkspaceLimitFromEnvironment(size_t default_bytes) {
  const char* text = std::getenv("CREMA_CUDNN_WORKSPACE_LIMIT_MB");
  if (text == nullptr || *text == '\0') return default_bytes;
  char* end = nullptr;
  errno = 0;
  const unsigned long long mib = std::strtoull(text, &end, 10);
  // strtoull accepts a sign and wraps "-1" around; a limit is digits only, and must fit in bytes.
  CREMA_CHECK(errno == 0 && *end == '\0' && text[0] >= '0' && text[0] <= '9' && mib <= (~size_t{0} >> 20))
      << "CREMA_CUDNN_WORKSPACE_LIMIT_MB='" << text << "' is not a whole number of MiB (e.g. 512)";
  return static_cast<size_t>(mib) << 20;
}

}  // namespace

Context::CudnnAlgorithms Context::ParseCudnnAlgorithms(const std::string& text, const std::string& where) {
  if (text == "measured") return CudnnAlgorithms::kMeasured;
  if (text == "heuristic") return CudnnAlgorithms::kHeuristic;
  CREMA_FAIL() << where << "='" << text << "': use measured (time cuDNN's algorithms once per shape, the default) or "
               << "heuristic (cuDNN's heuristics' choice)";
  return CudnnAlgorithms::kMeasured;
}

Context::Context(Device device, int gpu_id, uint64_t random_seed)
    : device_(device), gpu_id_(gpu_id), random_seed_(random_seed) {
  ApplyThreadPolicy();
  deterministic_ = DeterministicFromEnvironment();
  cudnn_workspace_limit_ = WorkspaceLimitFromEnvironment(cudnn_workspace_limit_);
  if (const char* choice = std::getenv("CREMA_CUDNN_ALGORITHMS"); choice != nullptr && *choice != '\0')
    cudnn_algorithms_ = ParseCudnnAlgorithms(choice, "CREMA_CUDNN_ALGORITHMS");
  if (device != Device::kGPU) return;
  CREMA_CHECK(built_with_cuda()) << "a GPU was asked for (--gpu or solver_mode: GPU), but this crema was built "
                                    "with CPU_ONLY; rebuild with CUDA (see Makefile.config.example) or run on the CPU";
  const int count = gpu_count();
  CREMA_CHECK(count > 0) << "a GPU was asked for (--gpu or solver_mode: GPU), but no CUDA device is visible on "
                            "this machine";
  CREMA_CHECK(gpu_id >= 0 && gpu_id < count)
      << "GPU " << gpu_id << " does not exist: this machine has " << count << " CUDA device(s) (--gpu or device_id)";
#ifdef CREMA_USE_CUDA
  MakeCurrent();
#endif
}

Context::~Context() {
#ifdef CREMA_USE_CUDA
  // The lanes' streams go below. The buffers this context holds (the ones) were allocated for the lane that first
  // asked, so they are freed first, and every block still meant for one of these streams (a buffer that outlives
  // this context) is handed to the default stream: freeing it later would record an event on a destroyed stream,
  // which crashed `crema time --gpu --lanes=3` on its way out.
  ones_.reset();
  retired_ones_.clear();
  if (!streams_.empty()) cudaSetDevice(gpu_id_);  // unchecked: a destructor does not throw
  for (cudaStream_t stream : streams_) {
    if (stream == nullptr) continue;
    cudaStreamSynchronize(stream);
    ForgetDeviceStream(gpu_id_, stream);
  }
#endif
#ifdef CREMA_USE_CUDNN
  for (cudnnHandle_t handle : cudnn_)
    if (handle != nullptr) cudnn::DestroyHandle(handle);
#endif
#ifdef CREMA_USE_CUDA
  for (cublasHandle_t handle : cublas_)
    if (handle != nullptr) Cublas().Destroy(handle);
  for (cudaStream_t stream : streams_)
    if (stream != nullptr) cudaStreamDestroy(stream);
#endif
}

namespace {

// The calling thread's lane, and the context it is a lane of (LaneScope).
thread_local const Context* lane_context = nullptr;
thread_local int lane_of_context = 0;

}  // namespace

Context::LaneScope::LaneScope(Context& context, int lane)
    : previous_context_(lane_context), previous_lane_(lane_of_context), previous_stream_(AllocationStream()) {
  CREMA_CHECK(lane >= 0) << "lane " << lane << " does not exist";
#ifdef CREMA_USE_CUDA
  if (context.device() == Device::kGPU) SetAllocationStream(context.lane_stream(lane));
#endif
  lane_context = &context;
  lane_of_context = lane;
}

Context::LaneScope::~LaneScope() {
  lane_context = previous_context_;
  lane_of_context = previous_lane_;
  SetAllocationStream(previous_stream_);
}

int Context::current_lane() const { return lane_context == this ? lane_of_context : 0; }

void Context::MakeCurrent() const {
#ifdef CREMA_USE_CUDA
  if (device_ == Device::kGPU) CREMA_CUDA_CHECK(cudaSetDevice(gpu_id_));
#endif
}

void Context::set_replica(int rank, int count) {
  CREMA_CHECK(count >= 1 && rank >= 0 && rank < count)
      << "replica " << rank << " of " << count << " does not exist (ranks run from 0 to count - 1)";
  replica_ = Replica{rank, count};
}

void Context::ForceEngines(const std::string& spec) {
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    const std::string type = colon == std::string::npos ? "" : item.substr(0, colon);
    const std::string engine = colon == std::string::npos ? item : item.substr(colon + 1);
    CREMA_CHECK(!engine.empty() && (colon == std::string::npos || !type.empty()) &&
                engine.find(':') == std::string::npos)
        << "--engine='" << spec << "': '" << item << "' is neither an engine name (e.g. reference) nor "
        << "TYPE:ENGINE (e.g. Convolution:reference)";
    force_engine(type, engine);
  }
}

std::shared_ptr<Context> Context::HostTwin() {
  CREMA_CHECK(device_ == Device::kGPU) << "a host twin is asked of a CPU context";
  if (!host_twin_) {
    host_twin_ = std::make_shared<Context>(Device::kCPU, 0, random_seed_);
    host_twin_->replica_ = replica_;
    host_twin_->forced_engines_ = forced_engines_;
    host_twin_->deterministic_ = deterministic_;
    host_twin_->cudnn_workspace_limit_ = cudnn_workspace_limit_;
  }
  return host_twin_;
}

void Context::Synchronize() {
#ifdef CREMA_USE_CUDA
  if (device_ == Device::kGPU) CREMA_CUDA_CHECK(cudaStreamSynchronize(stream()));
#endif
}

const float* Context::ones(int count) {
  std::lock_guard<std::mutex> lock(ones_mutex_);
  if (count > ones_count_) {
    // A pointer handed out before stays valid: a step on another lane may still be reading it.
    if (ones_) retired_ones_.push_back(std::move(ones_));
    ones_ = std::make_unique<SyncedMemory>(static_cast<size_t>(count) * sizeof(float));
    float* host = static_cast<float*>(ones_->mutable_cpu_data());
    for (int i = 0; i < count; ++i) host[i] = 1.f;
    ones_count_ = count;
  }
  if (count == 0) return nullptr;
  return static_cast<const float*>(device_ == Device::kGPU ? ones_->gpu_data() : ones_->cpu_data());
}

#ifdef CREMA_USE_CUDA
cudaStream_t Context::lane_stream(int lane) {
  std::lock_guard<std::mutex> lock(lanes_mutex_);
  if (static_cast<int>(streams_.size()) <= lane) streams_.resize(lane + 1, nullptr);
  if (streams_[lane] == nullptr) {
    MakeCurrent();
    // Blocking streams: SyncedMemory's copies on the legacy default stream wait for the kernels queued on them.
    CREMA_CUDA_CHECK(cudaStreamCreate(&streams_[lane]));
  }
  return streams_[lane];
}

cublasHandle_t Context::cublas() {
  const int lane = current_lane();
  cudaStream_t stream = lane_stream(lane);
  std::lock_guard<std::mutex> lock(lanes_mutex_);
  if (static_cast<int>(cublas_.size()) <= lane) cublas_.resize(lane + 1, nullptr);
  if (cublas_[lane] == nullptr) {
    MakeCurrent();
    CREMA_CUBLAS_CHECK(Cublas().Create(&cublas_[lane]));
    CREMA_CUBLAS_CHECK(Cublas().SetStream(cublas_[lane], stream));
  }
  return cublas_[lane];
}
#endif

#ifdef CREMA_USE_CUDNN
cudnnHandle_t Context::cudnn() {
  const int lane = current_lane();
  cudaStream_t stream = lane_stream(lane);
  std::lock_guard<std::mutex> lock(lanes_mutex_);
  if (static_cast<int>(cudnn_.size()) <= lane) cudnn_.resize(lane + 1, nullptr);
  if (cudnn_[lane] == nullptr) {
    MakeCurrent();
    cudnn_[lane] = cudnn::CreateHandle(stream);
  }
  return cudnn_[lane];
}
#endif

}  // namespace crema
