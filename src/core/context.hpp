// The execution context of a net (a solver's nets share the solver's): the device they run on, the base seed
// of their random streams, which data-parallel replica they are, the engines the user forces, whether results
// must be reproducible bit for bit (deterministic mode), the scratch memory cuDNN's convolutions may ask for,
// and, in CUDA builds, the CUDA streams (one per execution lane) and their cuBLAS / cuDNN handles, each created on
// first use.
//
// Nothing here is process-wide: every layer reaches its own context through Layer::context(), so two nets
// with two contexts train side by side in one process (one solver per GPU). The lanes of one net (net/lanes.hpp)
// call into its context at once: ones() is safe for that, and the rest is only read while a pass runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/element_type.hpp"

#ifdef CREMA_USE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#endif
#ifdef CREMA_USE_CUDNN
#include <cudnn.h>
#endif

namespace crema {

class SyncedMemory;

enum class Device { kCPU, kGPU };
const char* DeviceName(Device device);

// Which part of each global batch a net reads under data parallelism: replica `rank` of `count`.
struct Replica {
  int rank = 0;
  int count = 1;
};

class Context {
 public:
  static constexpr uint64_t kDefaultSeed = 1701;

  // Selecting a GPU checks that crema was built with CUDA and that device `gpu_id` exists, and makes it the
  // calling thread's current device.
  explicit Context(Device device = Device::kCPU, int gpu_id = 0, uint64_t random_seed = kDefaultSeed);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return device_; }
  int gpu_id() const { return gpu_id_; }

  // The seed every random stream of the nets on this context derives from (see RandomStream::DeriveSeed).
  uint64_t random_seed() const { return random_seed_; }

  const Replica& replica() const { return replica_; }
  void set_replica(int rank, int count);

  // Engines forced by the user (crema's --engine flag): per layer type, and under "" for every type that
  // has an engine of that name. LayerRegistry::Create reads them.
  void force_engine(const std::string& layer_type, const std::string& engine) { forced_engines_[layer_type] = engine; }
  const std::map<std::string, std::string>& forced_engines() const { return forced_engines_; }
  // Parses "NAME" or "TYPE:NAME" items, comma separated (the --engine flag); throws naming a malformed item.
  void ForceEngines(const std::string& spec);

  // Whether the nets built on this context plan their memory (net/memory_plan.hpp): on by default; crema's
  // --memory_plan=none turns it off for every net of a run, as `memory_plan: NONE` does in one net's prototxt.
  void set_plan_memory(bool on) { plan_memory_ = on; }
  bool plan_memory() const { return plan_memory_; }
  // Whether training nets built on this context recompute values in backward instead of keeping them (as
  // `memory_plan: RECOMPUTE` in a prototxt; crema's --memory_plan=recompute): off by default.
  void set_recompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }
  // Whether nets built on this context that run forward only rewrite themselves for inference (net/fold.hpp:
  // BatchNorm and Scale folded into convolutions, activations fused; as `fold: false` in a prototxt turns off for
  // one net; crema's --fold=none): on by default.
  void set_fold(bool on) { fold_ = on; }
  bool fold() const { return fold_; }
  // The execution lanes of the nets built on this context (net/lanes.hpp; crema's --lanes, as `lanes:` in a
  // prototxt for one net): 0 (the default) chooses per net, 1 runs every step in order, N > 1 runs up to N steps
  // at once wherever the plan allows.
  void set_lanes(int lanes) { lanes_ = lanes; }
  int lanes() const { return lanes_; }

  // A CPU context with this (GPU) context's seed, replica and forced engines, made once: where a layer of a GPU
  // net has no GPU engine, it runs on the host with it (LayerRegistry::Create).
  std::shared_ptr<Context> HostTwin();

  // The host rehearsal of GPU code (tests only): on a CPU context with this set, layers run their GPU slots
  // (Forward_gpu / Backward_gpu) instead of their CPU ones. GPU code written for either device (pointers from
  // data_on(device()), math through the context, rules through for_each_element) then runs on the host, so the
  // conformance harness checks its logic against the CPU code on machines without a GPU; only the kernels' launch
  // and the device's memory are left to a GPU run.
  bool gpu_code_on_host() const { return gpu_code_on_host_; }
  void set_gpu_code_on_host(bool value) { gpu_code_on_host_ = value && device_ == Device::kCPU; }
  // The host rehearsal of execution lanes on a GPU (tests only): the nets built on a CPU context with this set run
  // their lanes as on a GPU's streams (net/streams.hpp: RehearsedStreams, every pass's steps queued and then run in a
  // random interleaving the events allow, seeded with random_seed()), and, as on a GPU, only when asked for.
  bool streams_on_host() const { return streams_on_host_; }
  void set_streams_on_host(bool value) { streams_on_host_ = value && device_ == Device::kCPU; }

  // Waits until the work queued on this context's GPU stream has run (nothing to wait for on the CPU): timings
  // of GPU work take it before reading the clock.
  void Synchronize();

  // `count` ones on this context's device; bias terms broadcast and sum with it. Grows as asked; safe to call from
  // several lanes at once, and a pointer it returned stays valid for the context's life.
  const float* ones(int count);

  // Deterministic mode: engines use only algorithms whose results do not depend on the order of parallel
  // work (cuDNN's atomics-free convolution algorithms), so two runs give the same bits. Off by default, on where
  // the environment says CREMA_DETERMINISTIC=1. Engines read it when they reshape.
  bool deterministic() const { return deterministic_; }
  void set_deterministic(bool deterministic) { deterministic_ = deterministic; }
  // The most scratch memory, in bytes, one cuDNN convolution call may ask of the net's shared workspace: its
  // algorithms are chosen within it. 512 MiB by default (kDefaultCudnnWorkspaceLimitMiB), or
  // CREMA_CUDNN_WORKSPACE_LIMIT_MB from the environment. Engines read it when they reshape.
  static constexpr size_t kDefaultCudnnWorkspaceLimitMiB = 512;
  size_t cudnn_workspace_limit() const { return cudnn_workspace_limit_; }
  void set_cudnn_workspace_limit(size_t bytes) { cudnn_workspace_limit_ = bytes; }
  // How cuDNN convolution engines rank their algorithms: kMeasured (the default) times every algorithm cuDNN has
  // for a shape on this GPU once per process (cudnnFind*, as PyTorch's cudnn.benchmark) and takes the fastest that
  // fits; kHeuristic takes cuDNN's heuristics' order (cudnnGet*_v7: no time, no memory, the same choice every run).
  // Deterministic mode always ranks by the heuristics: timings can choose differently from run to run, and two
  // algorithms give different bits. CREMA_CUDNN_ALGORITHMS=measured|heuristic from the environment, crema's
  // --cudnn_algorithms, or a solver's cudnn_algorithms. Engines read it when they reshape.
  enum class CudnnAlgorithms { kMeasured, kHeuristic };
  CudnnAlgorithms cudnn_algorithms() const { return cudnn_algorithms_; }
  void set_cudnn_algorithms(CudnnAlgorithms choice) { cudnn_algorithms_ = choice; }
  // "measured" or "heuristic" (a flag's, a variable's or a field's text) as the setting; throws naming `where`.
  static CudnnAlgorithms ParseCudnnAlgorithms(const std::string& text, const std::string& where);

  // The precision the nets built on this context compute their convolutions and inner products in
  // (core/element_type.hpp Precision; a layer's own `precision` overrides it): float32 unless a solver's `precision` or
  // crema's --precision says otherwise. Engines read it when they reshape.
  Precision precision() const { return precision_; }
  void set_precision(Precision precision) { precision_ = precision; }

  // Makes this context's GPU the calling thread's current device (nets do at the start of every pass; nothing to do on
  // the CPU).
  void MakeCurrent() const;

  // Execution lanes on a GPU (net/streams.hpp): lane k has a stream of its own (lane 0's is the context's stream,
  // where all work outside lanes is queued), with its own cuBLAS and cuDNN handles. While a LaneScope is alive, the
  // calling thread's work on this context (stream(), cublas(), cudnn()) goes to that lane's stream; elsewhere, to
  // lane 0's, and the device memory it allocates is for that stream (SetAllocationStream). Streams and handles are made
  // on first use, once, whichever thread asks.
  class LaneScope {
   public:
    LaneScope(Context& context, int lane);
    ~LaneScope();
    LaneScope(const LaneScope&) = delete;
    LaneScope& operator=(const LaneScope&) = delete;

   private:
    const Context* previous_context_;
    int previous_lane_;
    void* previous_stream_;
  };
  // The calling thread's lane on this context (0 outside a LaneScope).
  int current_lane() const;

#ifdef CREMA_USE_CUDA
  cudaStream_t stream() { return lane_stream(current_lane()); }
  cublasHandle_t cublas();
  cudaStream_t lane_stream(int lane);
#endif
#ifdef CREMA_USE_CUDNN
  cudnnHandle_t cudnn();
#endif

  // Number of CUDA devices visible (0 in a CPU-only build or where none is present).
  static int gpu_count();
  static bool built_with_cuda();

 private:
  Device device_;
  int gpu_id_;
  uint64_t random_seed_;
  Replica replica_;
  std::map<std::string, std::string> forced_engines_;
  bool plan_memory_ = true;
  bool recompute_ = false;
  bool fold_ = true;
  std::unique_ptr<SyncedMemory> ones_;
  std::vector<std::unique_ptr<SyncedMemory>> retired_ones_;  // smaller ones, still pointed at
  int ones_count_ = 0;
  std::mutex ones_mutex_;
  int lanes_ = 0;
  std::shared_ptr<Context> host_twin_;
  bool deterministic_ = false;
  bool gpu_code_on_host_ = false;
  bool streams_on_host_ = false;
  size_t cudnn_workspace_limit_ = kDefaultCudnnWorkspaceLimitMiB << 20;
  CudnnAlgorithms cudnn_algorithms_ = CudnnAlgorithms::kMeasured;
  Precision precision_ = Precision::kFloat32;
  std::mutex lanes_mutex_;  // making streams and handles
#ifdef CREMA_USE_CUDA
  std::vector<cudaStream_t> streams_;  // per lane, null until made
  std::vector<cublasHandle_t> cublas_;
#endif
#ifdef CREMA_USE_CUDNN
  std::vector<cudnnHandle_t> cudnn_;
#endif
};

}  // namespace crema
