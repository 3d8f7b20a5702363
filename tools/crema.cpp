// crema: train, test and time nets from the command line.
//   crema train --solver=S [--weights=W1,W2 | --snapshot=STATE] [--gpu=0]
//   crema test  --model=M --weights=W [--iterations=50] [--gpu=0]
//   crema time  --model=M [--iterations=50] [--gpu=0]
//   crema classify --model=DEPLOY --weights=W --input=PATH [--output=preds.csv] [--mean_file=F | --mean_value=v,..]
//                  [--scale=S] [--labels=FILE] [--top_k=5] [--batch_size=N] [--gpu=0] [--backend=lmdb|leveldb]
//   crema device_query [--gpu=0]
#include <execinfo.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/context.hpp"
#include "core/derived_copy.hpp"
#include "core/synced_memory.hpp"
#include "core/threads.hpp"
#include "io/db.hpp"
#include "io/proto_io.hpp"
#include "layers/layer_registry.hpp"
#include "net/fold.hpp"
#include "net/lifetimes.hpp"
#include "net/memory_plan.hpp"
#include "net/net.hpp"
#include "net/output_scores.hpp"
#include "net/step_graph.hpp"
#include "net/upgrade.hpp"
#include "onnx/export.hpp"
#include "onnx/import.hpp"
#include "parallel/communicator.hpp"
#include "parallel/thread_group.hpp"
#include "solver/solver.hpp"
#include "tools/lib/classifier.hpp"
#include "tools/lib/cpu_info.hpp"
#include "tools/lib/device_query.hpp"
#include "tools/lib/input_source.hpp"
#include "tools/lib/monitor.hpp"
#include "tools/lib/net_graph.hpp"
#include "tools/tool_main.hpp"

DEFINE_string(solver, "", "train: the solver prototxt");
DEFINE_string(model, "",
              "test, time, fold, export: the net prototxt; classify: the deploy net prototxt; import: the ONNX model");
DEFINE_string(weights, "",
              "train: weights to fine-tune from (comma-separated .caffemodel or .caffemodel.h5 "
              "files, copied in order); test, time: the trained weights");
DEFINE_string(snapshot, "", "train: a .solverstate or .solverstate.h5 to resume from");
DEFINE_int32(iterations, 50, "test, time, quantize: number of iterations (batches)");
DEFINE_string(calibration, "",
              "quantize: a database (LMDB or LevelDB) the net's Data layers read instead of their own source");
DEFINE_string(gpu, "",
              "run on these GPUs: an id such as 0, a list such as 0,1, or 'all'; empty: the CPU "
              "(train: the solver's solver_mode decides)");
DEFINE_string(engine, "",
              "force engines: NAME for every layer type that has such an engine (e.g. reference), or "
              "TYPE:NAME items, comma-separated (e.g. Convolution:reference)");
DEFINE_string(phase, "", "test, time: the net's phase, TRAIN or TEST (test defaults to TEST, time to TRAIN)");
DEFINE_bool(layer_times, true,
            "time: each layer timed on its own (on a GPU the device is waited for after each layer); false times "
            "whole passes only, each to the end of its work, as a training or inference run goes (lanes on a "
            "device's streams are always timed so)");
DEFINE_bool(forward_only, false,
            "time: forward passes only, the parameters unchanged between them, as in inference. Without it each "
            "iteration runs forward and backward and then marks the parameters written, as the solver's update "
            "does, so that what engines keep derived from the weights is made again as in training");
DEFINE_string(memory_plan, "share",
              "train, test, time, classify: share (buffers whose lifetimes do not overlap share memory; element "
              "layers run in place), recompute (as share, and training keeps only segment boundaries from forward "
              "to backward, computing the rest again in backward) or none (every blob keeps memory of its own, as "
              "in Caffe); a net's own memory_plan: NONE turns it off for that net");
DEFINE_string(
    fold, "all",
    "train (its test nets), test, time, classify: all (a net that runs forward only folds BatchNorm, "
    "Scale and Bias into the "
    "convolution or inner product before them, fuses the activation after one into it, and drops Dropout "
    "and Split steps, once its weights are loaded; crema time lists what it did) or none (the plan as "
    "written); train: all also lets a BatchNorm run the Scale and ReLU in place after it in its own "
    "passes, and a SUM or a convolution the ReLU after it; a net's own fold: false turns it off for that net");
DEFINE_int32(lanes, 0,
             "train, test, time, classify: how many steps of a net's forward pass may run at once on the CPU, "
             "where none waits for another (inception towers), each on a thread of its own, with results bit for "
             "bit those of running them in order: 1 runs every step in order, N up to N at once; 0 leaves it to "
             "each net's lanes field, else automatic (on 2 to 4 threads, each wide stretch of the plan is timed "
             "both ways and runs the faster)");
DEFINE_string(cudnn_algorithms, "",
              "train, test, time, classify on a GPU: how cuDNN convolutions choose their algorithms: measured (each "
              "algorithm timed once per shape, the fastest taken; the default) or heuristic (cuDNN's heuristics, "
              "the same choice every run); empty leaves it to the solver's cudnn_algorithms and "
              "CREMA_CUDNN_ALGORITHMS");
DEFINE_string(precision, "",
              "train, test, time: the precision convolutions and inner products compute in: fp32, bf16 (on CPUs "
              "with bf16 instructions) or fp16 (on GPUs), their sums in float32 and everything else (losses, "
              "BatchNorm's statistics, the update of the float32 master weights) in float32; where the kernels are "
              "missing, float32 with the reason logged. Empty leaves it to the solver's precision (float32); a "
              "layer's own precision overrides it");
DEFINE_string(output_model, "", "fold, import: the net's definition to write (a prototxt)");
DEFINE_string(output_weights, "", "fold, import: the net's weights to write (a .caffemodel)");
DEFINE_string(keep_blobs, "",
              "test, time: blobs to keep readable after each pass, comma-separated (the net's inputs and outputs "
              "always are)");
DEFINE_int32(level, 0, "the net's level (matched against min_level/max_level rules)");
DEFINE_string(stage, "", "the net's stages, comma-separated (matched against stage/not_stage rules)");
DEFINE_string(
    sigint_effect, "stop",
    "train: what Ctrl-C (SIGINT, and SIGUSR2: under mpirun, kill -USR2 MPIRUN_PID) does: stop (snapshot, then "
    "stop), snapshot, none");
DEFINE_double(collective_timeout, 300,
              "train under mpirun: seconds a rank waits for the others at a collective (a gradient sum, a test's "
              "sum, a snapshot) before it takes them as stopped, hung or gone and ends every rank");
DEFINE_double(bucket_mb, 0,
              "train with several ranks: the size of the gradient buckets, each summed as soon as backward has "
              "filled it (0: 1 MiB for CPU ranks, 25 MiB for GPU ranks)");
DEFINE_string(sighup_effect, "snapshot", "train: what SIGHUP (and SIGUSR1) does: stop, snapshot, none");
DEFINE_string(monitor, "",
              "train: serve a page that follows the run at [HOST:]PORT (loopback unless a host is given; port 0: any "
              "free one), from which it can be snapshot and stopped with the token the log prints; monitor: where "
              "to serve the logs' page (default 8080)");
DEFINE_string(export, "", "monitor: write the logs' page as one self-contained HTML file instead of serving it");
DEFINE_string(input, "",
              "classify: what to classify: an image file, a folder of images (subfolders included), a list file of "
              "'path label' lines, or an LMDB/LevelDB of Datum records");
DEFINE_string(output, "",
              "classify: the CSV file of predictions to write; empty: standard output. export: the ONNX model to "
              "write. quantize: the model with its 8-bit settings to write (a prototxt)");
DEFINE_int32(opset, 13, "export: the ONNX operator set the model is written against (13 or later)");
DEFINE_bool(dynamic_batch, false, "export: the model's first dimension a named size (any batch) instead of the net's");
DEFINE_string(mean_file, "", "classify: a mean image (.binaryproto, C x H x W of the net's input) to subtract");
DEFINE_string(mean_value, "", "classify: a mean to subtract: one value, or one per channel (comma-separated)");
DEFINE_double(scale, 1.0, "classify: what the pixels are multiplied by after the mean is subtracted");
DEFINE_string(labels, "", "classify: the class names, one a line (class 0 first); without it classes are indices");
DEFINE_int32(top_k, 5, "classify: how many of the best classes to report per image");
DEFINE_int32(batch_size, 0, "classify: images per forward pass; 0: the batch of the net's input");
DEFINE_string(backend, "", "classify: the database --input holds, lmdb or leveldb; empty: judged from its files");
DEFINE_string(root_folder, "", "classify: the folder a list file's relative paths start from");
DEFINE_int32(log_every, 50, "classify: when stderr is not a terminal, a progress line every this many batches");
DEFINE_bool(debug_info, false,
            "train, test, time: log each layer's mean absolute values and gradients, and stop at the first NaN or "
            "infinity naming its layer and blob (test, time: the net's debug_info; train: the solver's debug_info, "
            "on the iterations that display)");

namespace crema {
namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) items.push_back(item);
  return items;
}

// The GPUs --gpu names; empty: none named.
std::vector<int> SelectGpus() {
  std::vector<int> gpus;
  if (FLAGS_gpu == "all") {
    const int count = Context::gpu_count();
    CREMA_CHECK(count > 0) << "--gpu=all was given, but no CUDA device is visible"
                           << (Context::built_with_cuda() ? "" : " (this crema was built with CPU_ONLY)");
    for (int i = 0; i < count; ++i) gpus.push_back(i);
  } else if (!FLAGS_gpu.empty()) {
    for (const auto& id : SplitList(FLAGS_gpu)) {
      char* end = nullptr;
      const long value = std::strtol(id.c_str(), &end, 10);
      CREMA_CHECK(end != id.c_str() && *end == '\0' && value >= 0)
          << "--gpu='" << FLAGS_gpu << "': '" << id << "' is not a GPU id (use e.g. --gpu=0, --gpu=0,1 or --gpu=all)";
      gpus.push_back(static_cast<int>(value));
    }
  }
  return gpus;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string joined;
  for (const auto& name : names) joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}

// --engine names only engines that exist: a misspelt type or engine would otherwise force nothing, silently.
// (Whether a forced engine runs on the device and accepts a layer is the layer's check, when the net is built.)
void CheckEngineFlag(const std::string& spec) {
  const LayerRegistry& registry = LayerRegistry::Global();
  std::vector<std::string> all_engines;
  for (const auto& type : registry.Types())
    for (const auto& engine : registry.Engines(type))
      if (std::find(all_engines.begin(), all_engines.end(), engine) == all_engines.end()) all_engines.push_back(engine);
  for (const auto& item : SplitList(spec)) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) {
      if (std::find(all_engines.begin(), all_engines.end(), item) != all_engines.end()) continue;
      const std::string nearest = NearestName(item, all_engines);
      CREMA_FAIL() << "--engine='" << spec << "': no layer type has an engine '" << item << "'"
                   << (nearest.empty() ? "" : " (did you mean " + nearest + "?)")
                   << "; engines: " << JoinNames(all_engines);
    }
    const std::string type = item.substr(0, colon), engine = item.substr(colon + 1);
    if (type.empty() || engine.empty() || engine.find(':') != std::string::npos) continue;  // ForceEngines says why
    const std::vector<std::string> engines = registry.Engines(type);
    if (engines.empty()) {
      const std::string nearest = NearestName(type, registry.Types());
      CREMA_FAIL() << "--engine='" << spec << "': there is no layer type '" << type << "'"
                   << (nearest.empty() ? " (the type names are case-sensitive, e.g. Convolution)"
                                       : " (did you mean " + nearest + "?)");
    }
    CREMA_CHECK(std::find(engines.begin(), engines.end(), engine) != engines.end())
        << "--engine='" << spec << "': " << type << " has no engine '" << engine << "'; its engines: "
        << JoinNames(engines);
  }
}

// The context of `crema test` and `crema time`: the device --gpu names, the engines --engine forces.
// --memory_plan: checked, and then on a context: whether nets plan their memory, and whether training nets recompute.
void CheckMemoryPlanFlag() {
  CREMA_CHECK(FLAGS_memory_plan == "share" || FLAGS_memory_plan == "none" || FLAGS_memory_plan == "recompute")
      << "--memory_plan='" << FLAGS_memory_plan << "': use share, recompute or none";
  CREMA_CHECK(FLAGS_fold == "all" || FLAGS_fold == "none") << "--fold='" << FLAGS_fold << "': use all or none";
  CREMA_CHECK(FLAGS_lanes >= 0 && FLAGS_lanes <= 256)
      << "--lanes=" << FLAGS_lanes << ": use 0 (the net's choice), 1 (in order) or a number of lanes up to 256";
}
void SetMemoryPlan(Context* context) {
  CheckMemoryPlanFlag();
  context->set_plan_memory(FLAGS_memory_plan != "none");
  context->set_recompute(FLAGS_memory_plan == "recompute");
  context->set_fold(FLAGS_fold != "none");
  context->set_lanes(FLAGS_lanes);
  if (!FLAGS_cudnn_algorithms.empty())
    context->set_cudnn_algorithms(Context::ParseCudnnAlgorithms(FLAGS_cudnn_algorithms, "--cudnn_algorithms"));
  if (!FLAGS_precision.empty()) context->set_precision(ParsePrecision(FLAGS_precision, "--precision"));
}

std::shared_ptr<Context> ToolContext() {
  CheckEngineFlag(FLAGS_engine);
  CheckMemoryPlanFlag();
  const std::vector<int> gpus = SelectGpus();
  if (gpus.size() > 1)
    LOG(WARNING) << "--gpu names " << gpus.size() << " GPUs; testing and timing run on the first, GPU " << gpus[0]
                 << ", as in Caffe";
  auto context = std::make_shared<Context>(gpus.empty() ? Device::kCPU : Device::kGPU, gpus.empty() ? 0 : gpus[0]);
  context->ForceEngines(FLAGS_engine);
  SetMemoryPlan(context.get());
  LOG(INFO) << (gpus.empty() ? std::string("Using the CPU") : "Using GPU " + std::to_string(gpus[0]));
  return context;
}

Phase ParsePhase(Phase fallback) {
  if (FLAGS_phase.empty()) return fallback;
  if (FLAGS_phase == "TRAIN") return TRAIN;
  if (FLAGS_phase == "TEST") return TEST;
  CREMA_FAIL() << "--phase='" << FLAGS_phase << "': use TRAIN or TEST";
  return fallback;
}

// Copies the weights files in order (later files win where they share layers), then names every layer with
// parameters that none of them provided: fine-tuning's new layers, or a misspelt layer name.
void CopyWeightsFiles(Net* net, const std::vector<std::string>& files) {
  if (files.empty()) return;
  std::vector<std::string> copied;
  for (const auto& file : files) {
    CREMA_CHECK(FileExists(file)) << "weights file '" << file << "' does not exist";
    LOG(INFO) << "Copying weights from " << file;
    const std::vector<std::string> layers = net->CopyTrainedLayersFrom(file);
    copied.insert(copied.end(), layers.begin(), layers.end());
  }
  for (const auto& layer : net->LayersNotCopied(copied))
    LOG(INFO) << "Layer " << layer << ": not in the weights files; starting from its fillers";
}

// The solver while it trains: signals and the monitor's controls (another thread) act on it.
std::atomic<Solver*> g_solver{nullptr};
// The process group of a run under mpirun (null otherwise): an error on one rank ends them all, so it outlives
// Train's unwinding for main's error report.
std::unique_ptr<Communicator> g_group;

void ApplySignalEffect(const std::string& effect) {
  Solver* solver = g_solver;
  if (solver == nullptr) return;
  if (effect == "stop") {
    solver->RequestSnapshot();
    solver->RequestStop();
  } else if (effect == "snapshot") {
    solver->RequestSnapshot();
  }
}

// A thread joined when it goes out of scope (also when training throws).
struct JoinedThread {
  std::thread thread;
  ~JoinedThread() {
    if (thread.joinable()) thread.join();
  }
};

// The monitor page's drawing of the training net (draw_net's, without shapes), made beside training: Graphviz
// may take a second for a large net.
std::thread DrawNetForMonitor(NetParameter definition, MonitorServer* monitor) {
  return std::thread([definition = std::move(definition), monitor] {
    const std::filesystem::path svg =
        std::filesystem::temp_directory_path() / ("crema-monitor-net-" + std::to_string(getpid()) + ".svg");
    try {
      NetGraphOptions options;
      options.phase = GraphPhase::kTrain;
      options.shapes = false;
      WriteNetGraph(NetGraphToDot(BuildNetGraph(definition, options)), svg.string());
      std::ifstream file(svg, std::ios::binary);
      monitor->SetNetSvg(std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()));
    } catch (const Error& error) {
      LOG(WARNING) << "Monitor: the page shows no drawing of the net: " << error.what();
    }
    std::error_code ignored;
    std::filesystem::remove(svg, ignored);
  });
}

// Tells the monitor's record which iteration runs, and times each layer of the training net in one iteration of
// every `every` (the solver's display interval, else 100): the page's per-layer breakdown.
class MonitorProgress : public SolverCallback {
 public:
  MonitorProgress(TrainingRecord* record, Net* net, int every) : record_(record), net_(net), every_(every) {}
  void OnStart(int iteration) override {
    record_->SetIteration(iteration);
    timing_ = iteration > 0 && iteration % every_ == 0;
    if (timing_) net_->set_step_timing(true);
  }
  void OnGradientsReady(int iteration) override {
    if (!timing_) return;
    net_->set_step_timing(false);
    timing_ = false;
    std::vector<TrainingRecord::LayerTime> times;
    const std::vector<Net::StepTimes>& steps = net_->step_times();
    for (size_t s = 0; s < steps.size(); ++s) {
      const Layer& layer = *net_->layers()[net_->plan()[s].layer];
      times.push_back({layer.name(), layer.type(), steps[s].forward_ms, steps[s].backward_ms});
    }
    record_->SetLayerTimes(iteration, std::move(times));
  }

 private:
  TrainingRecord* record_;
  Net* net_;
  int every_;
  bool timing_ = false;
};

// SIGUSR2 and SIGUSR1 act as SIGINT and SIGHUP do: they are what mpirun passes on to every rank (its own SIGINT ends
// the job at once), so `kill -USR2 <mpirun>` stops a data-parallel run after a snapshot.
extern "C" void HandleSignal(int signal) {
  ApplySignalEffect(signal == SIGINT || signal == SIGUSR2 ? FLAGS_sigint_effect : FLAGS_sighup_effect);
}

void CheckSignalEffect(const char* flag, const std::string& value) {
  CREMA_CHECK(value == "stop" || value == "snapshot" || value == "none")
      << "--" << flag << "='" << value << "': use stop, snapshot or none";
}

// Rank 0 speaks for a group whose members are threads of this process (--gpu=0,1): the others' INFO lines are left
// out (their warnings and errors stay), as glog cannot tell threads apart by itself.
thread_local bool t_quiet_member = false;
class RankZeroLogSink : public google::LogSink {
 public:
  void send(google::LogSeverity severity, const char* full_filename, const char* base_filename, int line,
            const google::LogMessageTime& time, const char* message, size_t message_length) override {
    if (t_quiet_member && severity < google::GLOG_WARNING) return;
    const std::string text = ToString(severity, base_filename, line, time, message, message_length);
    std::fprintf(stderr, "%s\n", text.c_str());
  }
};

// A solver of the run: alone, or member `group->rank()` of a data-parallel group; on the device `param` names.
std::unique_ptr<Solver> MakeSolver(const SolverParameter& param, Communicator* group) {
  // Each rank's random streams (dropout, crops, mirrors) its own: rank r seeds them with the solver's seed + r.
  SolverParameter context_param = param;
  if (group && group->rank() > 0)
    context_param.set_random_seed(
        static_cast<int64_t>(param.random_seed() >= 0 ? param.random_seed() : Context::kDefaultSeed) + group->rank());
  std::shared_ptr<Context> context = Solver::ContextFor(context_param);
  if (group) context->set_replica(group->rank(), group->size());
  context->ForceEngines(FLAGS_engine);
  SetMemoryPlan(context.get());
  LOG(INFO) << "Using the " << DeviceName(context->device())
            << (context->device() == Device::kGPU ? " " + std::to_string(context->gpu_id()) : std::string());
  std::unique_ptr<Solver> solver = CreateSolver(param, FLAGS_solver, context);
  if (group) solver->JoinGroup(group, static_cast<size_t>(FLAGS_bucket_mb * 1048576));
  if (!FLAGS_weights.empty()) LOG(INFO) << "Fine-tuning from " << FLAGS_weights;
  // In a group rank 0 reads the weights, and every rank starts from its (Solver::Solve).
  if (!group || group->rank() == 0) CopyWeightsFiles(solver->net(), SplitList(FLAGS_weights));
  return solver;
}

// Runs the solver that speaks for the run (the only one, or rank 0): signals and the monitor's page act on it.
void RunSolver(Solver* solver, const SolverParameter& param, TrainingRecord* record, MonitorServer* monitor) {
  MonitorProgress progress(record, solver->net(), param.display() > 0 ? param.display() : 100);
  JoinedThread drawing;
  if (record) {
    solver->AddCallback(&progress);
    drawing.thread = DrawNetForMonitor(solver->train_net_definition(), monitor);
  }
  g_solver = solver;
  solver->Solve(FLAGS_snapshot);
  if (record) {
    record->SetIteration(solver->iter());
    record->SetEnded(solver->iter() < param.max_iter());
  }
}

// crema train --gpu=0,1 (no mpirun): one solver per GPU, each on a thread of this process (Caffe's way); the host
// collectives meet in shared memory, the gradients are summed by NCCL. An error on any GPU ends the run.
void TrainOnGpus(const SolverParameter& param, const std::vector<int>& gpus, TrainingRecord* record,
                 MonitorServer* monitor) {
  CREMA_CHECK(BuiltWithNccl()) << "--gpu=" << FLAGS_gpu << " trains on " << gpus.size()
                               << " GPUs, which needs NCCL, and this crema was built without it";
  for (int gpu : gpus)
    CREMA_CHECK(gpu < Context::gpu_count()) << "--gpu=" << FLAGS_gpu << ": GPU " << gpu << " does not exist ("
                                            << Context::gpu_count() << " CUDA device(s) visible)";
  static RankZeroLogSink sink;
  FLAGS_logtostderr = false;
  FLAGS_stderrthreshold = google::NUM_SEVERITIES;  // the sink prints instead
  for (int severity = 0; severity < google::NUM_SEVERITIES; ++severity) google::SetLogDestination(severity, "");
  google::AddLogSink(&sink);
  const int size = static_cast<int>(gpus.size());
  ThreadGroup threads(size);
  std::vector<std::thread> members;
  for (int rank = 0; rank < size; ++rank)
    members.emplace_back([&, rank] {
      try {
        t_quiet_member = rank != 0;
        SolverParameter member_param = param;
        member_param.set_solver_mode(SolverParameter::GPU);
        member_param.set_device_id(gpus[rank]);
        std::unique_ptr<Communicator> host = threads.Member(rank);
        host->set_timeout_seconds(FLAGS_collective_timeout);
        std::unique_ptr<Communicator> member = OverNccl(std::move(host), gpus[rank]);
        std::unique_ptr<Solver> solver = MakeSolver(member_param, member.get());
        if (rank == 0) {
          RunSolver(solver.get(), member_param, record, monitor);
          g_solver = nullptr;
        } else {
          solver->Solve(FLAGS_snapshot);
        }
      } catch (const std::exception& error) {
        std::fprintf(stderr, "crema: error (GPU %d, rank %d of %d): %s\n", gpus[rank], rank, size, error.what());
        std::fflush(nullptr);
        std::_Exit(1);
      }
    });
  for (std::thread& member : members) member.join();
}

int Train() {
  CREMA_CHECK(!FLAGS_solver.empty()) << "train needs --solver=SOLVER.prototxt";
  CREMA_CHECK(FLAGS_snapshot.empty() || FLAGS_weights.empty())
      << "give --snapshot (resume) or --weights (fine-tune), not both";
  CheckSignalEffect("sigint_effect", FLAGS_sigint_effect);
  CheckSignalEffect("sighup_effect", FLAGS_sighup_effect);
  CREMA_CHECK(FileExists(FLAGS_solver)) << "solver file '" << FLAGS_solver << "' does not exist";
  SolverParameter param;
  ReadProtoFromTextFile(FLAGS_solver, &param);
  // --level and --stage set the training net's state, as in Caffe.
  param.mutable_train_state()->set_level(FLAGS_level);
  for (const auto& stage : SplitList(FLAGS_stage)) param.mutable_train_state()->add_stage(stage);
  // The solver's own `weights` (repeated) are the files to start from when the command line names none, as in
  // Caffe; a resumed run takes its weights from the snapshot instead.
  if (FLAGS_weights.empty() && FLAGS_snapshot.empty())
    for (const auto& weights : param.weights()) FLAGS_weights += (FLAGS_weights.empty() ? "" : ",") + weights;
  // The device is the solver's setting (solver_mode, device_id), overridden by --gpu (as in Caffe).
  const std::vector<int> gpus = SelectGpus();
  CREMA_CHECK(FLAGS_collective_timeout > 0) << "--collective_timeout=" << FLAGS_collective_timeout
                                            << ": give the seconds a rank may wait for the others (above 0)";
  CREMA_CHECK(FLAGS_bucket_mb >= 0) << "--bucket_mb=" << FLAGS_bucket_mb
                                    << ": give the size of a gradient bucket in MiB (0 chooses)";
  // Under mpirun: this process is one rank of the group (which checks that the others are there).
  g_group = ProcessGroupFromEnvironment();
  if (g_group) {
    g_group->set_timeout_seconds(FLAGS_collective_timeout);
    // Rank 0 speaks for the group; the others say only what goes wrong.
    if (g_group->rank() != 0) FLAGS_minloglevel = std::max(FLAGS_minloglevel, 1);
    const bool on_gpu = (!gpus.empty() || param.solver_mode() == SolverParameter::GPU) && Context::gpu_count() > 0;
    if (on_gpu) {
      // One GPU per rank: the ranks of a host take its GPUs (those --gpu lists, else all from device_id) in turn.
      const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
      const int local_rank = local != nullptr ? std::atoi(local) : g_group->rank();
      const int gpu = gpus.empty() ? (param.device_id() + local_rank) % Context::gpu_count()
                                   : gpus[static_cast<size_t>(local_rank) % gpus.size()];
      param.set_solver_mode(SolverParameter::GPU);
      param.set_device_id(gpu);
      g_group = OverNccl(std::move(g_group), gpu);
    }
  } else if (!gpus.empty()) {
    param.set_solver_mode(SolverParameter::GPU);
    param.set_device_id(gpus[0]);
  }
  Communicator* group = g_group.get();
  // In a group rank 0 alone reads the weights and the snapshot (the other hosts need not have them).
  if (!group || group->rank() == 0) {
    for (const auto& weights : SplitList(FLAGS_weights))
      CREMA_CHECK(FileExists(weights)) << "weights file '" << weights << "' does not exist";
    if (!FLAGS_snapshot.empty())
      CREMA_CHECK(FileExists(FLAGS_snapshot)) << "snapshot file '" << FLAGS_snapshot << "' does not exist";
  }
  CheckEngineFlag(FLAGS_engine);
  CheckMemoryPlanFlag();
  // After the command line's own files, what a person fixes first in the solver: the net it trains, then how
  // long it trains; CreateSolver checks the rest before it builds anything.
  Solver::CheckNets(param, FLAGS_solver);
  Solver::CheckMaxIter(param);
  if (FLAGS_debug_info) param.set_debug_info(true);

  // The monitor listens before any net is built: an address in use is an error before anything else is done.
  std::unique_ptr<TrainingRecord> record;
  std::unique_ptr<MonitorServer> monitor;
  if (!FLAGS_monitor.empty() && group && group->rank() != 0) FLAGS_monitor.clear();  // rank 0 serves the page
  if (!FLAGS_monitor.empty()) {
    record = std::make_unique<TrainingRecord>(std::filesystem::path(FLAGS_solver).stem().string(), param.max_iter());
    record->Listen();
    monitor = std::make_unique<MonitorServer>(
        FLAGS_monitor, [r = record.get()] { return r->StateJson(); },
        MonitorServer::Actions{[] { ApplySignalEffect("snapshot"); }, [] { ApplySignalEffect("stop"); }},
        MonitorServer::NewToken());
    LOG(INFO) << "Monitor: " << monitor->Url() << " (this run's page; its token lets the page snapshot and stop "
              << "training)";
  }
  for (int signal : {SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) std::signal(signal, HandleSignal);
  if (!group && gpus.size() > 1) {
    TrainOnGpus(param, gpus, record.get(), monitor.get());
  } else {
    std::unique_ptr<Solver> solver = MakeSolver(param, group);
    RunSolver(solver.get(), param, record.get(), monitor.get());
    monitor.reset();  // its controls act on g_solver
    g_solver = nullptr;
  }
  monitor.reset();
  g_group.reset();  // the group ends (MPI_Finalize, once every rank is there)
  return 0;
}

// Builds --model for `phase` on the tool's context, loads --weights, and runs the after-weights passes; with
// `forward_only`, plans the net's memory for forward passes alone (test, classify).
std::unique_ptr<Net> LoadModel(Phase phase, bool forward_only) {
  // A .caffemodel carries the definition of the net that wrote it: alone, it is the model too.
  const std::vector<std::string> weights_files = SplitList(FLAGS_weights);
  if (FLAGS_model.empty() && weights_files.size() == 1) {
    FLAGS_model = weights_files[0];
    LOG(INFO) << "No --model given: building the net defined in the weights file " << FLAGS_model;
  }
  CREMA_CHECK(!FLAGS_model.empty())
      << "this command needs --model=NET.prototxt (or one --weights=W.caffemodel, whose definition is used)";
  CREMA_CHECK(FileExists(FLAGS_model)) << "model file '" << FLAGS_model << "' does not exist";
  std::unique_ptr<Net> net;
  if (FLAGS_debug_info) {
    // As Net's constructor from a file does, with the net's debug_info set.
    NetParameter param = ReadNetDefinition(FLAGS_model);
    UpgradeLegacyNetAndLog(&param, FLAGS_model);
    param.mutable_state()->set_phase(phase);
    param.mutable_state()->set_level(FLAGS_level);
    param.mutable_state()->clear_stage();
    for (const auto& stage : SplitList(FLAGS_stage)) param.mutable_state()->add_stage(stage);
    param.set_debug_info(true);
    net = std::make_unique<Net>(param, ToolContext());
    net->set_debug_info(true);
  } else {
    net = std::make_unique<Net>(FLAGS_model, phase, FLAGS_level, SplitList(FLAGS_stage), ToolContext());
  }
  CopyWeightsFiles(net.get(), weights_files);
  // What the passes after the weights may rewrite depends on how the net runs and on what is read from it.
  if (forward_only) net->PlanMemory(false);
  if (!FLAGS_keep_blobs.empty()) net->KeepBlobs(SplitList(FLAGS_keep_blobs));
  net->RunAfterWeightsPasses();
  return net;
}

int Test() {
  CREMA_CHECK(FLAGS_iterations > 0) << "--iterations must be positive, got " << FLAGS_iterations;
  if (FLAGS_weights.empty()) LOG(WARNING) << "No --weights given: testing the net's initial (random) weights";
  std::unique_ptr<Net> net = LoadModel(ParsePhase(TEST), /*forward_only=*/true);
  OutputScores scores;
  double loss = 0;
  for (int i = 0; i < FLAGS_iterations; ++i) {
    loss += net->Forward();
    scores.Add(*net);
    for (int id : net->output_blob_indices()) {
      const Blob& blob = *net->blobs()[id];
      for (int j = 0; j < blob.count(); ++j)
        LOG(INFO) << "Batch " << i << ", " << net->blob_names()[id] << " = " << blob.cpu_data()[j];
    }
  }
  LOG(INFO) << "Loss: " << loss / FLAGS_iterations;
  for (const auto& mean : scores.Means()) LOG(INFO) << OutputScores::Describe(mean);
  return 0;
}

int Time() {
  CREMA_CHECK(FLAGS_iterations > 0) << "--iterations must be positive, got " << FLAGS_iterations;
  // The peak counts everything the run holds: the net's build, the untimed pass and the timed passes.
  MemoryStats::ResetPeak();
  const auto build_start = std::chrono::steady_clock::now();
  std::unique_ptr<Net> net = LoadModel(ParsePhase(TRAIN), FLAGS_forward_only);
  // What a user waits for before the first pass: the layers set up, their parameters filled (or read), the plan made.
  LOG(INFO) << "Net built in "
            << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - build_start).count()
            << " ms" << (FLAGS_weights.empty() ? " (parameters from the fillers)" : " (weights read)");
  const bool on_cpu = net->context().device() == Device::kCPU;
  // The machine, and what its matrix product reaches: each layer's GFLOP/s below is compared with it.
  const double peak_gflops = on_cpu ? MeasureGemmPeakGflops() : 0.0;
  if (on_cpu) {
    LOG(INFO) << "CPU: " << CpuDescription();
    LOG(INFO) << "BLAS: " << BlasDescription();
    LOG(INFO) << "Threads: " << ThreadPolicyDescription();
    LOG(INFO) << "GEMM peak: " << std::fixed << std::setprecision(1) << peak_gflops
              << " GFLOP/s (best of 5 single-precision 1024 x 1024 x 1024 products)" << std::defaultfloat
              << std::setprecision(6);
  }
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  // One untimed pass first: it allocates every buffer and warms the caches.
  const bool backward = !FLAGS_forward_only;
  net->Forward();
  if (backward) net->Backward();
  // With lanes (net/lanes.hpp) each pass is timed whole, each step by the net's step timing (backward in order under
  // recompute); in the automatic mode the untimed passes go on until every wide stretch has chosen how it runs.
  const bool on_lanes = net->lanes() > 1;
  const bool backward_on_lanes = on_lanes && backward && net->schedule().replays == 0;
  for (int warm = 0;
       on_lanes && (!net->step_lanes().settled() || (backward_on_lanes && !net->backward_lanes().settled())) &&
       warm < 50;
       ++warm) {
    net->Forward();
    if (backward) net->Backward();
  }
  if (backward) net->ClearParamDiffsInBackward();  // as before each training iteration (and after each timed one)
  // On a device's streams a step's own time is not measured (waiting for each step would undo the overlap).
  const bool on_streams = on_lanes && net->lanes_on_streams();
  // Per-layer times: unless whole passes were asked for; on CPU lanes the net times each step as it runs.
  const bool layer_times_measured = !on_streams && FLAGS_layer_times;
  if (on_lanes && layer_times_measured) net->set_step_timing(true);
  // On a GPU the kernels run after their launch returns: each step is timed to the end of its work.
  Context& context = net->context();
  context.Synchronize();
  const auto& plan = net->plan();
  // Backward follows the net's schedule: under recompute, each segment's replays come before its backward.
  const PassSchedule schedule = net->schedule();
  // Whole passes (lanes, or --layer_times=false) or each step on its own; backward whole on lanes, or where the
  // forward is (the net's schedule runs any replays).
  const bool whole_passes = on_lanes || !FLAGS_layer_times;
  const bool backward_whole = backward_on_lanes || !FLAGS_layer_times;
  std::vector<double> forward_ms(plan.size(), 0), backward_ms(plan.size(), 0), replay_ms(plan.size(), 0);
  double forward_total = 0, backward_total = 0, replay_total = 0, derived_total = 0;
  size_t derived_copies = 0;
  const auto start = Clock::now();
  for (int i = 0; i < FLAGS_iterations; ++i) {
    const auto forward_start = Clock::now();
    if (whole_passes) {
      if (on_lanes) net->step_lanes().set_recording(i + 1 == FLAGS_iterations);
      net->Forward();
      context.Synchronize();  // a pass is timed to the end of its work (queued on streams, it returns before)
    } else {
      for (size_t s = 0; s < plan.size(); ++s) {
        const auto t0 = Clock::now();
        net->ForwardStep(s);
        context.Synchronize();
        forward_ms[s] += ms(Clock::now() - t0);
      }
    }
    forward_total += ms(Clock::now() - forward_start);
    if (!backward) {
      LOG(INFO) << "Iteration: " << i + 1 << " forward time: " << ms(Clock::now() - forward_start) << " ms.";
      continue;
    }
    const auto backward_start = Clock::now();
    if (backward_whole) {
      if (backward_on_lanes) net->backward_lanes().set_recording(i + 1 == FLAGS_iterations);
      net->Backward();
      context.Synchronize();
    }
    for (size_t e = plan.size(); !backward_whole && e < schedule.events.size(); ++e) {
      const PassEvent& event = schedule.events[e];
      const size_t s = static_cast<size_t>(event.step);
      const bool replay = event.kind == PassEvent::Kind::kReplay;
      if (!replay && !plan[s].needs_backward) continue;
      const auto t0 = Clock::now();
      if (replay) {
        net->ReplayStep(s);
      } else {
        net->BackwardStep(s);
      }
      context.Synchronize();
      (replay ? replay_ms : backward_ms)[s] += ms(Clock::now() - t0);
      if (replay) replay_total += ms(Clock::now() - t0);
    }
    backward_total += ms(Clock::now() - backward_start);
    LOG(INFO) << "Iteration: " << i + 1 << " forward-backward time: " << ms(Clock::now() - forward_start) << " ms.";
    // Untimed: the weights count as updated (SyncedMemory::version), as after a solver step; the copies engines
    // derive from them that the solver's update writes as it writes the weights (core/derived_copy.hpp) are written
    // so too, and timed on their own.
    // And the gradients zeroed for the next iteration, as the solver zeroes them (some left for their layers' backward
    // to write: Net::ClearParamDiffsInBackward).
    if (backward) net->ClearParamDiffsInBackward();
    const auto update_start = Clock::now();
    derived_copies = 0;
    for (Blob* param : net->learnable_params()) {
      param->mutable_data_on(context.device());
      if (context.device() != Device::kCPU) continue;
      derived_copies += param->DerivedCopies().size();
      WriteDerivedCopies(param);
    }
    if (derived_copies > 0) derived_total += ms(Clock::now() - update_start);
  }
  const double total = ms(Clock::now() - start);
  if (on_lanes && !on_streams) {
    for (size_t s = 0; s < plan.size() && layer_times_measured; ++s) {
      forward_ms[s] = net->step_times()[s].forward_ms;
      if (backward_on_lanes) backward_ms[s] = net->step_times()[s].backward_ms;
    }
    net->set_step_timing(false);
    net->step_lanes().set_recording(false);
    net->backward_lanes().set_recording(false);
  }
  LOG(INFO) << "Engines: ";
  for (size_t s = 0; s < plan.size(); ++s) {
    const Layer& layer = *net->layers()[plan[s].layer];
    const std::string note = layer.engine_note();
    LOG(INFO) << std::setw(10) << layer.name() << "\t" << layer.type() << "\t" << layer.engine()
              << (note.empty() ? "" : " (" + note + ")");
  }
  // The rewrites: for inference (net/fold.hpp), what was folded and fused into what, and what went; for training
  // (net/fuse.hpp), the BatchNorms that run the Scale and ReLU after them.
  if (!net->rewrites().empty()) {
    LOG(INFO) << "Rewritten " << (net->forward_only() ? "for inference" : "for training") << " ("
              << net->rewrites().size() << " rewrites; --fold=none runs the plan as written):";
    for (const std::string& rewrite : net->rewrites()) LOG(INFO) << "  " << rewrite;
  } else if (FLAGS_forward_only) {
    LOG(INFO) << "Rewritten for inference: nothing" << (FLAGS_fold == "none" ? " (--fold=none)" : "");
  }
  // What could run at once (net/step_graph.hpp), as the memory is bound now: the ground for execution lanes.
  LOG(INFO) << "Step graph of the forward pass: " << ForwardStepGraph(*net).Describe(*net);
  if (on_streams) {
    LOG(INFO) << "Lanes: " << net->lanes() << " streams; forward on " << net->forward_streams().Describe();
    if (backward_on_lanes) LOG(INFO) << "Lanes of backward: " << net->backward_streams().Describe();
  } else {
    LOG(INFO) << "Lanes: " << (on_lanes ? net->step_lanes().Describe() : "1 (every step in order)");
    if (backward_on_lanes) LOG(INFO) << "Lanes of backward: " << net->backward_lanes().Describe();
  }
  // Which steps overlapped: for each pass on lanes, each step of the last timed pass, where it ran (a lane, or alone
  // on all threads) and when, in milliseconds since the pass began.
  for (const bool of_backward : {false, true}) {
    if (!on_lanes || on_streams || (of_backward && !backward_on_lanes)) continue;
    StepLanes& lanes = of_backward ? net->backward_lanes() : net->step_lanes();
    const char* pass = of_backward ? "backward" : "forward";
    const auto name_of = [&](int i) -> const std::string& {
      return net->layer_names()[plan[of_backward ? net->backward_lane_step(i) : net->forward_lane_step(i)].layer];
    };
    if (net->lanes_automatic()) {
      LOG(INFO) << "Wide stretches of " << pass << " (best of the timed passes: in order, on lanes):";
      for (const StepLanes::WideStretch& wide : lanes.wide_stretches())
        LOG(INFO) << "  " << name_of(wide.begin) << " .. " << name_of(wide.end - 1) << " (" << wide.end - wide.begin
                  << " steps): " << wide.in_order_ms << " ms, " << wide.lanes_ms
                  << " ms: " << (wide.on_lanes ? "lanes" : "in order");
    }
    LOG(INFO) << "Steps of the last timed " << pass << " pass (lane, start - end ms):";
    for (const LaneRecord& record : lanes.record()) {
      std::ostringstream line;
      line << std::setw(10) << name_of(record.step) << "	"
           << (record.lane < 0 ? std::string("alone") : "lane " + std::to_string(record.lane)) << "	" << std::fixed
           << std::setprecision(3) << record.start_ms << " - " << record.end_ms;
      LOG(INFO) << line.str();
    }
  }
  LOG(INFO) << "Average time per layer: "
            << (on_streams          ? "(not measured on streams)"
                : FLAGS_layer_times ? ""
                                    : "(not measured: --layer_times=false)");
  for (size_t s = 0; s < plan.size() && layer_times_measured; ++s) {
    const std::string& name = net->layer_names()[plan[s].layer];
    LOG(INFO) << std::setw(10) << name << "\tforward: " << forward_ms[s] / FLAGS_iterations << " ms.";
    if (backward) LOG(INFO) << std::setw(10) << name << "\tbackward: " << backward_ms[s] / FLAGS_iterations << " ms.";
    if (schedule.replayed[s])
      LOG(INFO) << std::setw(10) << name << "\treplay: " << replay_ms[s] / FLAGS_iterations << " ms.";
  }
  // Arithmetic: the layers that count their floating-point operations (the matrix-product layers).
  double forward_flops = 0, backward_flops = 0;
  const auto rate = [&](double flops, double milliseconds) {
    std::ostringstream out;
    const double gflops = milliseconds > 0 ? flops / milliseconds / 1e6 : 0.0;
    out << std::setprecision(4) << (flops >= 1e9 ? flops / 1e9 : flops / 1e6)
        << (flops >= 1e9 ? " GFLOP, " : " MFLOP, ") << std::fixed << std::setprecision(1) << gflops << " GFLOP/s";
    if (peak_gflops > 0) out << " (" << std::setprecision(0) << 100 * gflops / peak_gflops << "% of the GEMM peak)";
    return out.str();
  };
  if (layer_times_measured) LOG(INFO) << "Arithmetic per layer:";
  for (size_t s = 0; s < plan.size(); ++s) {
    const Layer& layer = *net->layers()[plan[s].layer];
    const double forward = layer.ForwardFlops();
    const double backward_layer =
        backward && plan[s].needs_backward ? layer.BackwardFlops(plan[s].propagate_down) : 0.0;
    if (forward == 0 && backward_layer == 0) continue;
    forward_flops += forward;
    backward_flops += backward_layer;
    if (!layer_times_measured) continue;
    LOG(INFO) << std::setw(10) << layer.name() << "\tforward: " << rate(forward, forward_ms[s] / FLAGS_iterations);
    if (backward_layer > 0)
      LOG(INFO) << std::setw(10) << layer.name()
                << "\tbackward: " << rate(backward_layer, backward_ms[s] / FLAGS_iterations);
  }
  size_t param_bytes = 0;
  for (Blob* param : net->learnable_params()) param_bytes += param->count() * sizeof(float);
  LOG(INFO) << "Average Forward pass: " << forward_total / FLAGS_iterations << " ms.";
  if (backward) {
    LOG(INFO) << "Average Backward pass: " << backward_total / FLAGS_iterations << " ms.";
    LOG(INFO) << "Average Forward-Backward: " << (forward_total + backward_total) / FLAGS_iterations << " ms.";
    if (derived_copies > 0)
      LOG(INFO) << "Weights' copies the update writes: " << derived_copies << " (bf16 in the engines' layouts), "
                << derived_total / FLAGS_iterations
                << " ms a pass written on their own here, untimed above (the solver's update writes them as it writes "
                   "the weights)";
    // What recompute costs: the replays within the backward pass, beside the rest of the iteration.
    const double rest = forward_total + backward_total - replay_total;
    LOG(INFO) << "Recompute: " << schedule.replays << " of " << plan.size() << " steps run forward again in backward ("
              << std::max<size_t>(schedule.segments.size(), 1) << " segments), " << replay_total / FLAGS_iterations
              << " ms per iteration, " << std::fixed << std::setprecision(1)
              << (rest > 0 ? 100.0 * replay_total / rest : 0.0) << "% on top of the rest" << std::defaultfloat
              << std::setprecision(6);
  }
  LOG(INFO) << "Total Time: " << total << " ms.";
  if (backward)
    LOG(INFO) << "Arithmetic of the net, forward-backward: "
              << rate(forward_flops + backward_flops, (forward_total + backward_total) / FLAGS_iterations)
              << "; forward: " << rate(forward_flops, forward_total / FLAGS_iterations);
  else
    LOG(INFO) << "Arithmetic of the net, forward: " << rate(forward_flops, forward_total / FLAGS_iterations);
  const MemoryStats memory = MemoryStats::Now();
  const double mib = 1048576.0;
  LOG(INFO) << "Memory: peak " << memory.host_peak_bytes / mib << " MiB on the host"
            << (net->context().device() == Device::kGPU
                    ? ", " + std::to_string(memory.device_peak_bytes / mib) + " MiB on the GPU (" +
                          std::to_string(memory.device_reserved_peak_bytes / mib) + " MiB taken from the device)"
                    : std::string())
            << " (blob data and gradients, parameters, workspace, each buffer once); of which activation data "
            << net->activation_bytes() / mib << " MiB, workspace " << net->workspace_bytes() / mib
            << " MiB, parameters " << param_bytes / mib << " MiB";
  // The memory plan of the passes timed (net/memory_plan.hpp): the bytes of activations (and, with backward, their
  // gradients) with each buffer in memory of its own, and with the plan; the floor no plan can go below (the most
  // bytes live at one moment, net/lifetimes.hpp) beside them.
  const std::string what = backward ? "activations, gradients and workspaces" : "activations and workspaces";
  if (const MemoryPlan* plan = net->memory_plan()) {
    LOG(INFO) << "Memory plan, " << (backward ? "forward and backward" : "forward only") << ": " << what << " take "
              << plan->planned_bytes() / mib << " MiB planned (an arena of " << plan->arena_bytes / mib << " MiB for "
              << plan->buffers.size() << " buffers, " << plan->in_place << " of them in place, and "
              << plan->workspaces.size() << " workspaces, and " << plan->kept_bytes / mib
              << " MiB kept apart) instead of " << plan->unplanned_bytes / mib << " MiB unplanned ("
              << std::lround(100.0 * plan->planned_bytes() / std::max<size_t>(plan->unplanned_bytes, 1)) << "%)";
  } else {
    const NetLifetimes lifetimes = ComputeLifetimes(*net, backward);
    LOG(INFO) << "Memory plan: none; " << what << " take " << (lifetimes.total_bytes + net->workspace_bytes()) / mib
              << " MiB unplanned (the shared workspace " << net->workspace_bytes() / mib << " MiB); at most "
              << lifetimes.peak_live_bytes / mib << " MiB of the "
              << (backward ? "activations and gradients" : "activations") << " live at once";
  }
  // Where the most bytes are live at once, and the largest buffers there: what a smaller plan would have to change.
  // (Taken before the plan bound the buffers: each with memory of its own, before running in place.)
  const NetLifetimes lifetimes = net->memory_plan() ? net->memory_plan()->lifetimes : ComputeLifetimes(*net, backward);
  if (lifetimes.peak_position >= 0) {
    const PassSchedule events = net->memory_plan() ? net->memory_plan()->schedule : PlainSchedule(*net, backward);
    const int at = lifetimes.peak_position;
    const PassEvent& event = events.events[at];
    std::vector<const BufferLifetime*> live;
    for (const BufferLifetime& buffer : lifetimes.buffers)
      if (std::any_of(buffer.intervals.begin(), buffer.intervals.end(), [&](const std::pair<int, int>& interval) {
            return interval.first <= at && at <= interval.second;
          }))
        live.push_back(&buffer);
    std::sort(live.begin(), live.end(),
              [](const BufferLifetime* a, const BufferLifetime* b) { return a->bytes > b->bytes; });
    std::ostringstream largest;
    for (size_t i = 0; i < live.size() && i < 6; ++i)
      largest << (i ? ", " : "") << live[i]->blob << (live[i]->gradient ? " gradient " : " ") << std::fixed
              << std::setprecision(1) << live[i]->bytes / mib << " MiB";
    LOG(INFO) << "Most live at once: " << lifetimes.peak_live_bytes / mib << " MiB in the " << EventName(event.kind)
              << " pass of layer '" << net->layer_names()[plan[event.step].layer] << "', " << live.size()
              << " buffers; the largest: " << largest.str();
  }
  // What the layers hold beside the plan for their whole life (batches read ahead, weights reordered for an engine).
  const std::vector<Net::HeldBuffer> held = net->HeldBuffers();
  if (!held.empty()) {
    size_t on_host = 0, on_gpu = 0;
    std::ostringstream largest;
    for (size_t i = 0; i < held.size(); ++i) {
      (held[i].buffer.device == Device::kGPU ? on_gpu : on_host) += held[i].buffer.bytes;
      if (i < 6)
        largest << (i ? ", " : "") << "'" << net->layer_names()[held[i].layer] << "' " << held[i].buffer.what << " "
                << std::fixed << std::setprecision(2) << held[i].buffer.bytes / mib << " MiB"
                << (held[i].buffer.device == Device::kGPU ? " on the GPU" : "");
    }
    LOG(INFO) << "Held by layers beside the plan: " << on_host / mib << " MiB on the host"
              << (on_gpu ? ", " + std::to_string(on_gpu / mib) + " MiB on the GPU" : std::string()) << " ("
              << held.size() << " buffers; the largest: " << largest.str() << ")";
  }
  LOG(INFO) << "Peak resident memory of the process: " << PeakResidentBytes() / mib << " MiB";
  return 0;
}

std::vector<float> ParseMeanValues() {
  std::vector<float> values;
  for (const auto& item : SplitList(FLAGS_mean_value)) {
    char* end = nullptr;
    const float value = std::strtof(item.c_str(), &end);
    CREMA_CHECK(end != item.c_str() && *end == '\0')
        << "--mean_value='" << FLAGS_mean_value << "': '" << item << "' is not a number";
    values.push_back(value);
  }
  return values;
}

int Classify() {
  CREMA_CHECK(!FLAGS_weights.empty()) << "classify needs --weights=TRAINED.caffemodel";
  CREMA_CHECK(!FLAGS_input.empty())
      << "classify needs --input=PATH: an image, a folder of images, a list file or a database";
  CREMA_CHECK(FLAGS_mean_file.empty() || FLAGS_mean_value.empty()) << "give --mean_file or --mean_value, not both";
  CREMA_CHECK(FLAGS_top_k > 0) << "--top_k must be positive, got " << FLAGS_top_k;
  CREMA_CHECK(FLAGS_batch_size >= 0) << "--batch_size must be positive (or 0: the net's own), got " << FLAGS_batch_size;
  CREMA_CHECK(FLAGS_log_every > 0) << "--log_every must be positive, got " << FLAGS_log_every;
  ClassifierOptions options;
  if (!FLAGS_mean_file.empty()) {
    CREMA_CHECK(FileExists(FLAGS_mean_file)) << "mean file '" << FLAGS_mean_file << "' does not exist";
    options.transform.set_mean_file(FLAGS_mean_file);
  }
  for (const float value : ParseMeanValues()) options.transform.add_mean_value(value);
  options.transform.set_scale(static_cast<float>(FLAGS_scale));
  options.batch_size = FLAGS_batch_size;
  options.top_k = FLAGS_top_k;
  if (!FLAGS_labels.empty()) {
    options.class_names = ReadLabelsFile(FLAGS_labels);
    options.class_names_origin = FLAGS_labels;
  }
  InputSourceOptions source_options;
  if (!FLAGS_backend.empty()) source_options.backend = ParseDbBackend(FLAGS_backend);
  source_options.root_folder = FLAGS_root_folder;
  std::unique_ptr<InputSource> source = OpenInputSource(FLAGS_input, source_options);

  std::unique_ptr<Net> net = LoadModel(ParsePhase(TEST), /*forward_only=*/true);
  Classifier classifier(net.get(), options);
  LOG(INFO) << "Classifying " << source->Describe() << " in batches of " << classifier.batch_size();
  LOG(INFO) << "Scores: " << classifier.Describe();
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (!FLAGS_output.empty()) {
    file.open(FLAGS_output);
    CREMA_CHECK(file) << "cannot write the predictions to '" << FLAGS_output << "'";
    out = &file;
  }
  *out << classifier.CsvHeader() << "\n";
  ClassificationProgressDisplay display(isatty(STDERR_FILENO) == 1, FLAGS_log_every);
  const ClassificationSummary summary = classifier.Run(
      source.get(), [&](const Prediction& prediction) { *out << classifier.CsvRow(prediction) << "\n"; },
      [&](const ClassificationProgress& progress) { display.Update(progress); });
  display.Finish();
  out->flush();
  CREMA_CHECK(*out) << "writing the predictions to '" << (FLAGS_output.empty() ? "standard output" : FLAGS_output)
                    << "' failed";
  for (const auto& line : summary.Describe()) LOG(INFO) << line;
  CREMA_CHECK(summary.classified > 0) << "none of the " << summary.skipped << " images of " << source->Describe()
                                      << " could be read (see the warnings above)";
  if (!FLAGS_output.empty()) LOG(INFO) << "Predictions written to " << FLAGS_output;
  return 0;
}

// Caffe's device_query: every property of the --gpu devices (all of them for --gpu=all or no --gpu).
int DeviceQuery() {
  std::vector<int> gpus;
  if (FLAGS_gpu.empty() || FLAGS_gpu == "all") {
    for (int i = 0; i < Context::gpu_count(); ++i) gpus.push_back(i);
    if (gpus.empty()) QueryGpu(0);  // throws, saying why there is none
  } else {
    gpus = SelectGpus();
  }
  for (const int gpu : gpus) {
    for (const auto& fact : QueryGpu(gpu)) LOG(INFO) << fact.first << ": " << fact.second;
  }
  return 0;
}

std::atomic<bool> g_monitor_interrupted{false};
extern "C" void HandleMonitorSignal(int) { g_monitor_interrupted = true; }

// crema monitor: the page over logs, served until Ctrl-C, or written as one file.
int Monitor(const std::vector<std::string>& logs) {
  LoggedRuns runs(logs);
  if (!FLAGS_export.empty()) {
    const std::string page = StaticMonitorPage(runs.StateJson());
    std::ofstream file(FLAGS_export, std::ios::binary);
    CREMA_CHECK(file.good()) << "--export='" << FLAGS_export << "': cannot write it";
    file << page;
    file.close();
    CREMA_CHECK(file.good()) << "--export='" << FLAGS_export << "': writing it failed";
    LOG(INFO) << "Wrote the page of " << runs.size() << " run(s) to " << FLAGS_export;
    return 0;
  }
  MonitorServer server(
      FLAGS_monitor.empty() ? "8080" : FLAGS_monitor, [&runs] { return runs.StateJson(); }, {}, "");
  LOG(INFO) << "Monitor: http://" << server.host() << ":" << server.port() << "/ (" << runs.size()
            << " run(s); logs still written are read again as they grow; Ctrl-C ends it)";
  std::signal(SIGINT, HandleMonitorSignal);
  std::signal(SIGTERM, HandleMonitorSignal);
  while (!g_monitor_interrupted) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return 0;
}

// crema fold: the deploy net --model with --weights, rewritten for inference (BatchNorm, Scale and Bias folded into
// the convolutions and inner products, activations after them fused, Dropout gone), written back as plain Caffe
// layers that BVLC Caffe and OpenCV's dnn module read.
int Fold() {
  CREMA_CHECK(!FLAGS_output_model.empty() && !FLAGS_output_weights.empty())
      << "fold writes the folded net's definition and weights: give --output_model=F.prototxt and "
         "--output_weights=F.caffemodel";
  CREMA_CHECK(FLAGS_fold != "none") << "fold with --fold=none would write the net unchanged";
  if (FLAGS_weights.empty()) LOG(WARNING) << "No --weights given: folding the net's initial (random) weights";
  CREMA_CHECK(FLAGS_output_model != FLAGS_output_weights)
      << "--output_model and --output_weights name the same file '" << FLAGS_output_model << "'";
  for (const std::string& input : {FLAGS_model, FLAGS_weights})
    CREMA_CHECK(input.empty() || (input != FLAGS_output_model && input != FLAGS_output_weights))
        << "'" << input << "' is read and would be overwritten: write the folded net elsewhere";
  std::unique_ptr<Net> net = LoadModel(ParsePhase(TEST), /*forward_only=*/true);
  for (const std::string& rewrite : net->rewrites()) LOG(INFO) << "  " << rewrite;
  if (net->rewrites().empty()) LOG(WARNING) << "Nothing of net '" << net->name() << "' folds: it is written as it is";
  // The weights once (the CaffeNet family's are 240 MB), and the definition is that without them.
  const NetParameter weights = FoldedNetParameter(*net);
  NetParameter definition = weights;
  for (LayerParameter& layer : *definition.mutable_layer()) layer.clear_blobs();
  WriteProtoToTextFile(definition, FLAGS_output_model);
  WriteProtoToBinaryFile(weights, FLAGS_output_weights);
  LOG(INFO) << "Wrote the folded net (" << net->plan().size() << " layers; " << net->rewrites().size()
            << " rewrites) to " << FLAGS_output_model << " and its weights to " << FLAGS_output_weights;
  return 0;
}

int Export() {
  CREMA_CHECK(!FLAGS_output.empty()) << "export writes an ONNX model: give --output=MODEL.onnx";
  for (const std::string& input : {FLAGS_model, FLAGS_weights})
    CREMA_CHECK(input.empty() || input != FLAGS_output)
        << "'" << input << "' is read and would be overwritten: write the ONNX model elsewhere";
  if (FLAGS_weights.empty()) LOG(WARNING) << "No --weights given: exporting the net's initial (random) weights";
  std::unique_ptr<Net> net = LoadModel(ParsePhase(TEST), /*forward_only=*/true);
  for (const std::string& rewrite : net->rewrites()) LOG(INFO) << "  " << rewrite;
  OnnxExportOptions options;
  options.opset = FLAGS_opset;
  options.dynamic_batch = FLAGS_dynamic_batch;
  WriteOnnx(*net, FLAGS_output, options);
  LOG(INFO) << "Wrote net '" << net->name() << "'" << (net->rewrites().empty() ? "" : " (folded)") << " as ONNX (opset "
            << options.opset << ") to " << FLAGS_output;
  return 0;
}

int Import() {
  CREMA_CHECK(!FLAGS_model.empty()) << "import reads an ONNX model: give --model=MODEL.onnx";
  CREMA_CHECK(!FLAGS_output_model.empty() && !FLAGS_output_weights.empty())
      << "import writes a net definition and its weights: give --output_model=NET.prototxt and "
         "--output_weights=NET.caffemodel";
  CREMA_CHECK(FLAGS_output_model != FLAGS_output_weights)
      << "--output_model and --output_weights name the same file '" << FLAGS_output_model << "'";
  for (const std::string& output : {FLAGS_output_model, FLAGS_output_weights})
    CREMA_CHECK(output != FLAGS_model) << "'" << output << "' is read and would be overwritten";
  const ImportedNet imported = ImportOnnxFile(FLAGS_model);
  // Built once here, so that what the net's layers refuse (a shape, a setting) is said now, naming the layer.
  NetParameter check = imported.definition;
  check.mutable_state()->set_phase(TEST);
  Net net(check, ToolContext());
  net.CopyTrainedLayersFrom(imported.weights);
  WriteProtoToTextFile(imported.definition, FLAGS_output_model);
  WriteProtoToBinaryFile(imported.weights, FLAGS_output_weights);
  LOG(INFO) << "Wrote " << imported.definition.layer_size() << " layers from " << FLAGS_model << " to "
            << FLAGS_output_model << " and their weights to " << FLAGS_output_weights;
  return 0;
}

// crema quantize: --model's Convolution and InnerProduct layers set to run in 8 bits (QuantizationParameter), each
// input's range measured over --iterations batches of the net's own TEST-phase data (or --calibration's), written to
// --output as the model's definition with a `quantization` in each measured layer. The weights stay as they are:
// their scales are taken per output channel from the weights the net runs with.
int Quantize() {
  CREMA_CHECK(!FLAGS_output.empty()) << "quantize writes the model with its 8-bit settings: give --output=NET.prototxt";
  CREMA_CHECK(FLAGS_iterations > 0) << "--iterations must be positive, got " << FLAGS_iterations;
  CREMA_CHECK(!FLAGS_model.empty()) << "quantize needs --model=NET.prototxt, the net to measure and rewrite";
  CREMA_CHECK(FileExists(FLAGS_model)) << "model file '" << FLAGS_model << "' does not exist";
  for (const std::string& input : {FLAGS_model, FLAGS_weights})
    CREMA_CHECK(input.empty() || input != FLAGS_output)
        << "'" << input << "' is read and would be overwritten: write the quantized model elsewhere";
  if (FLAGS_weights.empty()) LOG(WARNING) << "No --weights given: measuring the net's initial (random) weights";
  // The float net measures: a model quantized already is measured without its settings.
  NetParameter model = ReadNetDefinition(FLAGS_model);
  UpgradeLegacyNetAndLog(&model, FLAGS_model);
  NetParameter measured = model;
  measured.mutable_state()->set_phase(TEST);
  measured.mutable_state()->set_level(FLAGS_level);
  measured.mutable_state()->clear_stage();
  for (const auto& stage : SplitList(FLAGS_stage)) measured.mutable_state()->add_stage(stage);
  int sources = 0;
  for (LayerParameter& layer : *measured.mutable_layer()) {
    layer.clear_quantization();
    if (!FLAGS_calibration.empty() && layer.type() == "Data") {
      layer.mutable_data_param()->set_source(FLAGS_calibration);
      ++sources;
    }
  }
  CREMA_CHECK(FLAGS_calibration.empty() || sources > 0)
      << "--calibration=" << FLAGS_calibration << " replaces a Data layer's source, but the TEST-phase net of "
      << FLAGS_model << " has no Data layer";
  Net net(measured, ToolContext());
  CopyWeightsFiles(&net, SplitList(FLAGS_weights));
  net.PlanMemory(false);
  net.RunAfterWeightsPasses();
  // Each convolution's and inner product's input, as the step is about to read it (a buffer may be reused later in
  // the pass).
  struct Range {
    float low = 0.f, high = 0.f;
    bool seen = false;
    float not_finite = 0.f;  // the first input value that was not a finite number (std::min passes over a NaN)
    bool finite = true;
    void Add(float low_value, float high_value) {
      low = seen ? std::min(low, low_value) : low_value;
      high = seen ? std::max(high, high_value) : high_value;
      seen = true;
    }
  };
  const auto measure = [](const Blob& input, Range* range) {
    const float* data = input.cpu_data();
    for (int j = 0; j < input.count(); ++j) {
      if (!std::isfinite(data[j]) && range->finite) {
        range->finite = false;
        range->not_finite = data[j];
      }
      range->Add(data[j], data[j]);
    }
  };
  // By layer name; and the summands of the sums folded into a convolution (ResNet's shortcuts), by blob name, for the
  // Eltwise layers that add them: an 8-bit convolution may then take its summand in 8 bits.
  std::map<std::string, Range> ranges, summand_ranges;
  for (int i = 0; i < FLAGS_iterations; ++i) {
    for (size_t s = 0; s < net.plan().size(); ++s) {
      const PlanStep& step = net.plan()[s];
      const Layer& layer = *net.layers()[step.layer];
      const std::string type = layer.type();
      if ((type == "Convolution" || type == "InnerProduct") && !step.bottoms.empty())
        measure(*net.blobs()[step.bottoms[0]], &ranges[net.layer_names()[step.layer]]);
      if (layer.fused_sum() && !step.bottoms.empty())
        measure(*net.blobs()[step.bottoms.back()],
                &summand_ranges[net.UserBlobName(net.blob_names()[step.bottoms.back()])]);
      net.ForwardStep(s);
    }
  }
  // Not negative: unsigned, [0, 255]; else signed, [-128, 127], symmetric about zero.
  const auto set_scale = [](const Range& r, QuantizationParameter* q) {
    const bool unsigned_input = r.low >= 0.f;
    const float largest = unsigned_input ? r.high : std::max(-r.low, r.high);
    q->set_input_scale(largest > 0.f ? (unsigned_input ? 255.f : 127.f) / largest : 1.f);
    q->set_input_unsigned(unsigned_input);
    return largest;
  };
  int quantized = 0;
  std::vector<std::string> only_zeros;
  for (LayerParameter& layer : *model.mutable_layer()) {
    const auto range = ranges.find(layer.name());
    if ((layer.type() != "Convolution" && layer.type() != "InnerProduct") || range == ranges.end()) continue;
    const Range& r = range->second;
    CREMA_CHECK(r.finite) << "layer '" << layer.name() << "': its input reached " << r.not_finite
                          << " during calibration; an input that is not finite cannot be quantized";
    QuantizationParameter* q = layer.mutable_quantization();
    if (set_scale(r, q) == 0.f) only_zeros.push_back(layer.name());
    LOG(INFO) << "  " << layer.name() << ": input in [" << r.low << ", " << r.high << "], input_scale "
              << q->input_scale() << (q->input_unsigned() ? ", unsigned" : ", signed");
    ++quantized;
  }
  int sums = 0;
  for (LayerParameter& layer : *model.mutable_layer()) {
    if (layer.type() != "Eltwise") continue;
    Range r;
    for (const std::string& bottom : layer.bottom()) {
      const auto range = summand_ranges.find(bottom);
      if (range == summand_ranges.end()) continue;
      CREMA_CHECK(range->second.finite) << "layer '" << layer.name() << "': its input '" << bottom << "' reached "
                                        << range->second.not_finite << " during calibration";
      r.Add(range->second.low, range->second.high);
    }
    if (!r.seen) continue;
    QuantizationParameter* q = layer.mutable_quantization();
    set_scale(r, q);
    LOG(INFO) << "  " << layer.name() << ": the summand a convolution adds in [" << r.low << ", " << r.high
              << "], input_scale " << q->input_scale() << (q->input_unsigned() ? ", unsigned" : ", signed");
    ++sums;
  }
  CREMA_CHECK(quantized > 0) << "net '" << model.name()
                             << "' has no Convolution or InnerProduct layer in its TEST phase to quantize";
  // An Input layer's blob stays zero: such a net has nothing to measure.
  if (!only_zeros.empty())
    LOG(WARNING) << only_zeros.size() << " of the " << quantized << " layers saw only zeros as input (the first: '"
                 << only_zeros.front() << "'), so their input_scale is 1, a guess: measure a net that reads data "
                 << "(its train_val prototxt, or --calibration=DB for its Data layers), not one fed by Input layers";
  WriteProtoToTextFile(model, FLAGS_output);
  LOG(INFO) << "Wrote " << FLAGS_model << " with " << quantized << " layers set to 8 bits"
            << (sums > 0 ? " and " + std::to_string(sums) + " sums' summands measured" : "") << " (measured over "
            << FLAGS_iterations << " batches) to " << FLAGS_output;
  return 0;
}

const char kUsage[] =
    "command line for crema, a Caffe-compatible deep-learning framework.\n"
    "usage: crema <command> <flags>\n\n"
    "commands:\n"
    "  train   train or fine-tune a net (--solver, optionally --weights or --snapshot)\n"
    "  test    score a trained net (--model, --weights, --iterations)\n"
    "  time    time a net's layers forward and backward, with each layer's engine and the peak memory\n"
    "          (--model, --iterations, --forward_only)\n"
    "  classify  predict the classes of images with a trained net (--model, --weights, --input)\n"
    "  fold    write a deploy net with BatchNorm and Scale folded into its convolutions and its activations\n"
    "          fused, as plain Caffe layers (--model, --weights, --output_model, --output_weights)\n"
    "  export  write a net and its weights as an ONNX model (--model, --weights, --output, --opset, --fold,\n"
    "          --dynamic_batch)\n"
    "  import  write an ONNX model as a net and its weights (--model=M.onnx, --output_model, --output_weights)\n"
    "  quantize  write a net with its convolutions and inner products set to run in 8 bits, their inputs'\n"
    "          ranges measured over"
    " batches of its data (--model, --weights, --iterations, --calibration, --output)\n"
    "  device_query  show the properties of the GPUs (--gpu; default all of them)\n"
    "  monitor LOG_OR_FOLDER...  the training page over finished or running logs, side by side "
    "(--monitor=[HOST:]PORT,\n"
    "          or --export=REPORT.html)";

const char* const kCommands[] = {"train",  "test",   "time",     "classify",     "fold",
                                 "export", "import", "quantize", "device_query", "monitor"};

std::string CommandList() {
  std::string list;
  for (const char* command : kCommands) list += std::string(list.empty() ? "" : ", ") + command;
  return list;
}

bool IsCommand(const std::string& word) {
  for (const char* command : kCommands)
    if (word == command) return true;
  return false;
}

// The command line's shape: one known command, no other argument. "" when right, else what is wrong.
std::string CommandProblem(int argc, char** argv) {
  if (argc < 2) return "no command given; commands: " + CommandList();
  const std::string command = argv[1];
  if (!IsCommand(command)) {
    const std::string nearest = NearestName(command, std::vector<std::string>(std::begin(kCommands), std::end(kCommands)));
    return "unknown command '" + command + "' (" + (nearest.empty() ? "" : "did you mean " + nearest + "? ") +
           "commands: " + CommandList() + ")";
  }
  if (argc == 2) return command == "monitor" ? "monitor needs the logs to show: crema monitor LOG_OR_FOLDER..." : "";
  // monitor takes its logs as arguments.
  if (command == "monitor") return "";
  const std::string extra = argv[2];
  if (IsCommand(extra)) return "one command at a time: got '" + command + "' and '" + extra + "'";
  return "unexpected argument '" + extra + "' after the command '" + command +
         "': crema takes its inputs as flags (e.g. --solver=FILE, --model=FILE)";
}

}  // namespace
}  // namespace crema

namespace crema {
// The commands that read each flag of this file; a flag given to another command changes nothing, which a
// warning says (Caffe is silent), rather than an error, so that scripts written for Caffe keep running.
const std::map<std::string, std::vector<std::string>> kFlagCommands = {
    {"solver", {"train"}},
    {"snapshot", {"train"}},
    {"sigint_effect", {"train"}},
    {"sighup_effect", {"train"}},
    {"collective_timeout", {"train"}},
    {"bucket_mb", {"train"}},
    {"monitor", {"train", "monitor"}},
    {"export", {"monitor"}},
    {"model", {"test", "time", "classify", "fold", "export", "import", "quantize"}},
    {"weights", {"train", "test", "time", "classify", "fold", "export", "quantize"}},
    {"output_model", {"fold", "import"}},
    {"output_weights", {"fold", "import"}},
    {"fold", {"train", "test", "time", "classify", "fold", "export"}},
    {"iterations", {"test", "time", "quantize"}},
    {"calibration", {"quantize"}},
    {"phase", {"test", "time", "classify", "fold", "export"}},
    {"forward_only", {"time"}},
    {"layer_times", {"time"}},
    {"level", {"train", "test", "time", "classify", "fold", "export", "quantize"}},
    {"stage", {"train", "test", "time", "classify", "fold", "export", "quantize"}},
    {"engine", {"train", "test", "time", "classify", "fold", "export"}},
    {"debug_info", {"train", "test", "time", "classify"}},
    {"input", {"classify"}},
    {"output", {"classify", "export", "quantize"}},
    {"opset", {"export"}},
    {"dynamic_batch", {"export"}},
    {"mean_file", {"classify"}},
    {"mean_value", {"classify"}},
    {"scale", {"classify"}},
    {"labels", {"classify"}},
    {"top_k", {"classify"}},
    {"batch_size", {"classify"}},
    {"backend", {"classify"}},
    {"root_folder", {"classify"}},
    {"log_every", {"classify"}},
};

void WarnOfFlagsNotRead(const std::string& command) {
  for (const auto& [flag, commands] : kFlagCommands) {
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(flag.c_str(), &info) || info.is_default) continue;
    if (std::find(commands.begin(), commands.end(), command) != commands.end()) continue;
    std::fprintf(stderr, "crema: warning: --%s is a flag of %s, not of %s; it is ignored\n", flag.c_str(),
                 JoinNames(commands).c_str(), command.c_str());
  }
}
}  // namespace crema

namespace {

// A crash (a bad address, a bad instruction, a bus or arithmetic fault) prints the signal and the stack of the thread
// it hit before the process dies of it as it would have: a report names the functions. Ending signals (SIGTERM,
// SIGINT) keep their own handling.
extern "C" void ReportCrash(int signal) {
  const char* name = signal == SIGSEGV  ? "SIGSEGV (a bad memory access)"
                     : signal == SIGBUS ? "SIGBUS (a bad memory access)"
                     : signal == SIGFPE ? "SIGFPE (an arithmetic fault)"
                                        : "SIGILL (an instruction this CPU lacks)";
  const char intro[] = "crema: crashed with ";
  (void)!write(STDERR_FILENO, intro, sizeof(intro) - 1);
  (void)!write(STDERR_FILENO, name, std::strlen(name));
  const char stack[] = "; the stack:\n";
  (void)!write(STDERR_FILENO, stack, sizeof(stack) - 1);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

}  // namespace

int main(int argc, char** argv) {
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(signal, ReportCrash);
  FLAGS_logtostderr = true;
  FLAGS_colorlogtostderr = false;
  gflags::SetUsageMessage(crema::kUsage);
  gflags::SetVersionString("0.1.0");
  try {
    crema::CheckCommandLineFlags(argc, argv, "tools/crema.cpp");
    crema::HostMemoryLimit();  // reads CREMA_HOST_MEMORY_LIMIT: a bad value is named now, not at the first blob
  } catch (const crema::Error& error) {
    std::fprintf(stderr, "crema: error: %s\n", error.what());
    return 1;
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  const std::string problem = crema::CommandProblem(argc, argv);
  if (!problem.empty()) {
    // A misspelt command needs only the list of commands, which the message gives; a missing one, the usage.
    if (argc >= 2 && !crema::IsCommand(argv[1])) {
      std::fprintf(stderr, "crema: error: %s\n", problem.c_str());
      return 1;
    }
    return crema::ReportUsageError("crema", "tools/crema.cpp", problem);
  }
  const std::string command = argv[1];
  crema::WarnOfFlagsNotRead(command);
  try {
    if (command == "train") return crema::Train();
    if (command == "test") return crema::Test();
    if (command == "time") return crema::Time();
    if (command == "classify") return crema::Classify();
    if (command == "fold") return crema::Fold();
    if (command == "export") return crema::Export();
    if (command == "import") return crema::Import();
    if (command == "quantize") return crema::Quantize();
    if (command == "monitor") return crema::Monitor(std::vector<std::string>(argv + 2, argv + argc));
    return crema::DeviceQuery();
  } catch (const crema::Error& error) {
    if (crema::g_group != nullptr) {
      // The other ranks would wait for this one: the group ends with it.
      std::fprintf(stderr, "crema: error (rank %d of %d): %s\n", crema::g_group->rank(), crema::g_group->size(),
                   error.what());
      std::fflush(stderr);
      crema::g_group->Abort(1);
    }
    std::fprintf(stderr, "crema: error: %s\n", error.what());
    return 1;
  } catch (const std::exception& error) {
    if (crema::g_group != nullptr) {
      std::fprintf(stderr, "crema: internal error (rank %d of %d): %s\n", crema::g_group->rank(),
                   crema::g_group->size(), error.what());
      std::fflush(stderr);
      crema::g_group->Abort(2);
    }
    std::fprintf(stderr, "crema: internal error: %s\n", error.what());
    return 2;
  }
}
