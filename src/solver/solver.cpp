#include "solver/solver.hpp"

#include <fcntl.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <map>

#include "core/derived_copy.hpp"
#include "core/math_functions.hpp"
#include "io/proto_io.hpp"
#include "io/snapshot_io.hpp"
#include "net/upgrade.hpp"
#include "parallel/gradient_reducer.hpp"
#include "solver/adaptive_solvers.hpp"
#include "solver/loss_scaling.hpp"
#include "solver/lr_policy.hpp"
#include "solver/sgd_solver.hpp"
#include "solver/update_rules.hpp"

namespace crema {

namespace {

// A relative path from the solver file is tried from the working directory first (Caffe's rule), then
// beside the solver file.
std::string ResolveNetPath(const std::string& path, const std::string& solver_path) {
  if (path.empty() || path[0] == '/' || FileExists(path) || solver_path.empty()) return path;
  const std::string beside = (std::filesystem::path(solver_path).parent_path() / path).string();
  return FileExists(beside) ? beside : path;
}

// A net file the solver names: there, and a file (a folder would read as an empty net).
void CheckNetFile(const std::string& field, const std::string& path, const std::string& solver_path) {
  CREMA_CHECK(!path.empty()) << "the solver's " << field << " is empty; set it to the path of a net prototxt";
  const std::string resolved = ResolveNetPath(path, solver_path);
  const bool relative = path[0] != '/' && !solver_path.empty();
  CREMA_CHECK(FileExists(resolved)) << "net file '" << resolved << "' (the solver's " << field
                                    << ") does not exist"
                                    << (relative ? "; a relative path is looked for from the working directory, "
                                                   "then beside the solver file"
                                                 : "");
  std::error_code error;
  CREMA_CHECK(!std::filesystem::is_directory(resolved, error))
      << "net file '" << resolved << "' (the solver's " << field << ") is a folder, not a net prototxt";
}

NetParameter ReadNet(const std::string& path) {
  CREMA_CHECK(FileExists(path)) << "net file '" << path << "' does not exist";
  NetParameter net;
  ReadProtoFromTextFile(path, &net);
  UpgradeLegacyNetAndLog(&net, path);  // here, so that a legacy net's notice names its file
  return net;
}

// The net's state: phase, then the file's own state, then the solver's state for it.
void ApplyState(NetParameter* net, Phase phase, const NetState* solver_state) {
  NetState state;
  state.set_phase(phase);
  state.MergeFrom(net->state());
  state.set_phase(phase);
  if (solver_state != nullptr) state.MergeFrom(*solver_state);
  *net->mutable_state() = state;
}

}  // namespace

std::shared_ptr<Context> Solver::ContextFor(const SolverParameter& param) {
  // Caffe's default solver_mode is GPU; where there is none, Caffe's users expect training on the CPU.
  bool gpu = param.solver_mode() == SolverParameter::GPU;
  if (gpu && Context::gpu_count() == 0) {
    if (param.has_solver_mode())
      LOG(WARNING) << "The solver asks for solver_mode: GPU, but no GPU is available; training on the CPU.";
    gpu = false;
  }
  auto context = std::make_shared<Context>(
      gpu ? Device::kGPU : Device::kCPU, param.device_id(),
      param.random_seed() >= 0 ? static_cast<uint64_t>(param.random_seed()) : Context::kDefaultSeed);
  ApplyComputeSettings(param, context.get());
  return context;
}

void Solver::ApplyComputeSettings(const SolverParameter& param, Context* context) {
  if (param.has_cudnn_algorithms())
    context->set_cudnn_algorithms(param.cudnn_algorithms() == SolverParameter::HEURISTIC
                                      ? Context::CudnnAlgorithms::kHeuristic
                                      : Context::CudnnAlgorithms::kMeasured);
  context->set_precision(SchemaPrecision(param.precision()));
}

void Solver::CheckNets(const SolverParameter& param, const std::string& solver_path) {
  const int sources = param.has_train_net_param() + param.has_train_net() + param.has_net_param() + param.has_net();
  CREMA_CHECK(sources >= 1) << "the solver names no net: set net (a prototxt path), net_param, train_net or "
                               "train_net_param";
  CREMA_CHECK(sources == 1) << "the solver names its training net " << sources
                            << " times; set exactly one of net, net_param, train_net, train_net_param";
  if (param.has_train_net()) CheckNetFile("train_net", param.train_net(), solver_path);
  if (param.has_net()) CheckNetFile("net", param.net(), solver_path);
  for (const auto& path : param.test_net()) CheckNetFile("test_net", path, solver_path);

  // The test nets: each test_net and test_net_param, then as many copies of the general net (net, net_param,
  // in the TEST phase) as test_iter values remain.
  const bool general = param.has_net() || param.has_net_param();
  const int own = param.test_net_size() + param.test_net_param_size();
  const int tests = general ? std::max(own, param.test_iter_size()) : own;
  CREMA_CHECK(param.test_iter_size() == tests)
      << "the solver has " << tests << " test net(s) but " << param.test_iter_size()
      << " test_iter value(s); give one test_iter per test net";
  for (int i = 0; i < param.test_iter_size(); ++i) {
    CREMA_CHECK(param.test_iter(i) >= 0) << "test_iter " << param.test_iter(i) << " (test net #" << i
                                         << ") must not be negative: it is the number of batches of each test";
    // Caffe's way of switching one test off: its net is built and never run.
    if (param.test_iter(i) == 0)
      LOG(WARNING) << "test_iter 0 for test net #" << i << ": that net is never run, as in Caffe";
  }
  CREMA_CHECK(param.test_interval() >= 0) << "solver test_interval must not be negative, got "
                                          << param.test_interval();
  // Testing that never happens is found out only when the log has no test scores, hours later: said now. Caffe
  // trains such a solver untested, and so does crema.
  if (tests == 0 && param.test_interval() > 0)
    LOG(WARNING) << "The solver sets test_interval " << param.test_interval() << ", but it has no test net ("
                 << (general ? "no test_iter for the test phase of its net: add test_iter, the batches of each test"
                             : "test_net or test_net_param")
                 << "): training will not be tested";
  CREMA_CHECK(tests == 0 || param.test_interval() > 0)
      << "the solver has test nets but test_interval is " << param.test_interval() << "; set it above 0";
  CREMA_CHECK(param.test_state_size() == 0 || param.test_state_size() == tests)
      << "the solver has " << tests << " test net(s) but " << param.test_state_size() << " test_state(s)";
}

void Solver::CheckSettings(const SolverParameter& param) {
  CREMA_CHECK(param.has_base_lr()) << "the solver sets no base_lr: set the learning rate (e.g. base_lr: 0.01)";
  CREMA_CHECK(std::isfinite(param.base_lr()) && param.base_lr() >= 0)
      << "solver base_lr must be positive, got " << param.base_lr()
      << (param.base_lr() < 0 ? " (a negative rate climbs the loss instead of descending it)" : "");
  if (param.base_lr() == 0)
    LOG(WARNING) << "The solver's base_lr is 0: no parameter will change (only running statistics such as "
                    "BatchNorm's)";
  CheckLearningRatePolicy(param);
  CREMA_CHECK(param.max_iter() >= 0) << "solver max_iter must not be negative, got " << param.max_iter();
  CREMA_CHECK(param.iter_size() >= 1) << "solver iter_size must be at least 1, got " << param.iter_size();
  CREMA_CHECK(param.average_loss() >= 1) << "solver average_loss must be at least 1, got " << param.average_loss();
  // Checked whether or not the run scales its loss (AUTOMATIC decides only once the net is built).
  CREMA_CHECK(std::isfinite(param.initial_loss_scale()) && param.initial_loss_scale() > 0)
      << "solver initial_loss_scale must be a positive number, got " << param.initial_loss_scale();
  CREMA_CHECK(param.loss_scale_growth_interval() >= 1)
      << "solver loss_scale_growth_interval must be at least 1, got " << param.loss_scale_growth_interval();
  // Caffe reads the type only to apply a weight decay: without one, an unknown type is accepted there.
  const bool known_regularization = param.regularization_type() == "L2" || param.regularization_type() == "L1";
  CREMA_CHECK(known_regularization || param.weight_decay() == 0)
      << "unknown regularization_type \"" << param.regularization_type() << "\"; use L2 or L1";
  if (!known_regularization)
    LOG(WARNING) << "unknown regularization_type \"" << param.regularization_type()
                 << "\" is not used, as in Caffe: weight_decay is 0 (L2 or L1 are the types)";
  CREMA_CHECK(std::isfinite(param.weight_decay()) && param.weight_decay() >= 0)
      << "solver weight_decay must not be negative, got " << param.weight_decay();
  CREMA_CHECK(param.display() >= 0) << "solver display must not be negative, got " << param.display()
                                    << " (0 turns the display off)";
  CREMA_CHECK(param.snapshot() >= 0) << "solver snapshot must not be negative, got " << param.snapshot();
}

void Solver::CheckMaxIter(const SolverParameter& param) {
  CREMA_CHECK(param.max_iter() > 0)
      << "the solver sets " << (param.has_max_iter() ? "max_iter: " + std::to_string(param.max_iter()) : "no max_iter")
      << ": set max_iter to the number of iterations to train";
}

Solver::Solver(const SolverParameter& param, const std::string& solver_path, std::shared_ptr<Context> context,
               int history_sets, RuleCheck check_rule)
    : param_(param), recorded_solver_(param), history_sets_(history_sets) {
  recorded_solver_.clear_net_param();
  recorded_solver_.clear_train_net_param();
  CheckNets(param_, solver_path);
  CheckSettings(param_);
  if (check_rule != nullptr) check_rule(param_);
  if (!solver_path.empty()) SnapshotBesideSolverFile(solver_path, &param_);
  CREMA_CHECK(param_.snapshot() == 0 || param_.has_snapshot_prefix())
      << "the solver snapshots every " << param_.snapshot() << " iterations but sets no snapshot_prefix";
  if (param_.has_snapshot_prefix()) {
    // Hours of training must not end in a snapshot that cannot be written: check the folder now.
    CheckSnapshotFolder(param_.snapshot_prefix());
    RemovePartialSnapshots(param_.snapshot_prefix());
  }
  context_ = context ? std::move(context) : ContextFor(param_);
  InitTrainNet(solver_path);
  InitTestNets(solver_path);
  for (int set = 0; set < history_sets_; ++set)
    for (Blob* blob : net_->learnable_params()) history_.push_back(std::make_shared<Blob>(blob->shape()));
  // Parameter gradients are complete only in the last of an iteration's iter_size backward passes.
  net_->set_gradient_ready_callback([this](const Net::GradientReady& ready) {
    if (last_backward_pass_)
      for (SolverCallback* callback : callbacks_) callback->OnParameterGradientReady(iter_, ready);
  });
  LOG(INFO) << "Solver: learning rate policy " << param_.lr_policy() << ", base_lr "
            << param_.base_lr() << ", batch accumulation iter_size " << param_.iter_size();
  // Dynamic loss scaling where asked for, or (AUTOMATIC) where a layer of the train net computes in float16.
  bool float16 = false;
  for (const auto& layer : net_->layers()) float16 = float16 || layer->computes_in() == Precision::kFloat16;
  if (param_.loss_scaling() == SolverParameter::DYNAMIC ||
      (param_.loss_scaling() == SolverParameter::AUTOMATIC && float16)) {
    loss_scaling_ = std::make_unique<LossScaling>(param_.initial_loss_scale(), param_.loss_scale_growth_interval());
    LOG(INFO) << "Solver: dynamic loss scaling from scale " << loss_scaling_->scale() << ", doubled after "
              << param_.loss_scale_growth_interval() << " iterations without an overflow, halved at one"
              << (float16 ? " (layers compute in float16)" : "");
  }
}

Solver::~Solver() = default;

void Solver::JoinGroup(Communicator* group, size_t bucket_bytes) {
  CREMA_CHECK(group_ == nullptr) << "the solver is already rank " << group_->rank() << " of a group";
  const Replica& replica = context_->replica();
  CREMA_CHECK(replica.rank == group->rank() && replica.count == group->size())
      << "the solver's context is replica " << replica.rank << " of " << replica.count << ", but it joins as rank "
      << group->rank() << " of " << group->size() << ": make the context that replica before the solver is built";
  group_ = group;
  reducer_ = std::make_unique<GradientReducer>(net_.get(), group, bucket_bytes);
  callbacks_.insert(callbacks_.begin(), reducer_.get());
  // Caffe's users were surprised that several GPUs multiplied the batch: the log says what each rank reads.
  int batch = 0;
  std::string source;
  for (const PlanStep& step : net_->plan()) {
    const Layer& layer = *net_->layers()[step.layer];
    if (step.bottoms.empty() && layer.HasRuntimeState() && !step.tops.empty()) {
      batch = net_->blobs()[step.tops[0]]->shape().empty() ? 0 : net_->blobs()[step.tops[0]]->shape(0);
      source = layer.name();
      break;
    }
  }
  LOG(INFO) << "Data parallelism: " << group->Describe() << "; this is rank " << group->rank() << ".";
  if (batch > 0) {
    const int global = batch * group->size() * param_.iter_size();
    LOG(INFO) << "Data parallelism: each rank reads " << batch << " records a pass (data layer '" << source
              << "'); rank r reads records r*" << batch << " to r*" << batch << "+" << batch - 1 << " of every "
              << batch * group->size() << ", so the global batch is " << global
              << (param_.iter_size() > 1 ? " (with iter_size " + std::to_string(param_.iter_size()) + ")" : "")
              << ". The gradients are averaged over the ranks: base_lr " << param_.base_lr()
              << " acts on the global batch's mean gradient, as for one process reading " << global << ".";
  }
  for (int t = 0; t < param_.test_iter_size(); ++t)
    if (param_.test_iter(t) % group->size() != 0)
      LOG(WARNING) << "Data parallelism: test_iter " << param_.test_iter(t) << " (test net #" << t
                   << ") is not a multiple of the " << group->size() << " ranks: each test scores "
                   << (param_.test_iter(t) + group->size() - 1) / group->size() * group->size()
                   << " batches (every rank runs as many passes), not the " << param_.test_iter(t)
                   << " one process would; a multiple of " << group->size() << " scores the same batches";
  LOG(INFO) << "Data parallelism: " << net_->learnable_params().size() << " parameter blobs ("
            << reducer_->bytes() / 1048576.0 << " MB of gradients) summed in " << reducer_->buckets()
            << (reducer_->buckets() == 1 ? " bucket, once backward has filled it." : " buckets while backward runs.");
}

void Solver::ShareStateFromRankZero() {
  // Rank 0's weights and state, as one message: the weights' NetParameter, then the state (lengths first).
  std::string bytes;
  if (group_->rank() == 0) {
    NetParameter weights;
    net_->ToProto(&weights, false);
    SolverState state;
    MakeSnapshotState("", &state);
    for (const auto& other : other_ranks_states_) *state.add_layer_state() = other;
    const std::string weight_bytes = weights.SerializeAsString();
    const uint64_t length = weight_bytes.size();
    bytes.assign(reinterpret_cast<const char*>(&length), sizeof(length));
    bytes += weight_bytes;
    bytes += state.SerializeAsString();
  }
  group_->Broadcast(&bytes, 0);
  other_ranks_states_.clear();
  shared_from_rank_zero_ = true;
  if (group_->rank() == 0) return;
  uint64_t length = 0;
  CREMA_CHECK(bytes.size() >= sizeof(length))
      << "rank " << group_->rank() << ": rank 0's weights and state are cut short";
  std::memcpy(&length, bytes.data(), sizeof(length));
  NetParameter weights;
  SolverState state;
  CREMA_CHECK(length <= bytes.size() - sizeof(length) &&
              weights.ParseFromArray(bytes.data() + sizeof(length), static_cast<int>(length)) &&
              state.ParseFromArray(bytes.data() + sizeof(length) + length,
                                   static_cast<int>(bytes.size() - sizeof(length) - length)))
      << "rank " << group_->rank() << ": rank 0's weights and state do not parse";
  net_->CopyTrainedLayersFrom(weights);
  TakeUpState(state, "rank 0's state");
}

std::string Solver::RuntimeStateBytes() const {
  SolverState state;
  net_->SaveRuntimeState("train", &state);
  for (size_t t = 0; t < test_nets_.size(); ++t) test_nets_[t]->SaveRuntimeState("test" + std::to_string(t), &state);
  return state.SerializeAsString();
}

bool Solver::UnscaleGradients() {
  const Device device = context_->device();
  const float used = loss_scaling_->scale();
  // A sum of magnitudes is infinite or NaN where any value is (or where the sum itself overflows: then the gradients
  // are too large to trust anyway).
  bool finite = true;
  for (Blob* param : net_->learnable_params())
    finite = finite && std::isfinite(asum(*context_, param->count(), param->diff_on(device)));
  if (!loss_scaling_->AfterBackward(finite, iter_)) return false;
  for (Blob* param : net_->learnable_params())
    scale(*context_, param->count(), 1.f / used, param->mutable_diff_on(device));
  return true;
}

void Solver::InitTrainNet(const std::string& solver_path) {
  NetParameter net_param;
  if (param_.has_train_net_param()) {
    net_param = param_.train_net_param();
  } else if (param_.has_train_net()) {
    net_param = ReadNet(ResolveNetPath(param_.train_net(), solver_path));
  } else if (param_.has_net_param()) {
    net_param = param_.net_param();
  } else {
    net_param = ReadNet(ResolveNetPath(param_.net(), solver_path));
  }
  recorded_train_net_ = net_param;
  ApplyState(&net_param, TRAIN, param_.has_train_state() ? &param_.train_state() : nullptr);
  net_debug_info_ = net_param.debug_info();
  net_ = std::make_unique<Net>(net_param, context_);
  // The passes that follow the weights: for a net that trains, the element types (bf16 data between convolutions
  // computing in bf16, plan_element_types); the inference rewrites are for nets that run forward only.
  net_->RunAfterWeightsPasses();
  // Without a loss, backward has nothing to start from: every gradient is 0 and training changes nothing.
  CREMA_CHECK(net_->has_loss()) << "the train net '" << net_->name() << "' has no loss (no loss layer, and no "
                                << "layer with a loss_weight, in phase TRAIN): training would change nothing";
}

void Solver::InitTestNets(const std::string& solver_path) {
  std::vector<NetParameter> nets;
  for (const auto& p : param_.test_net_param()) nets.push_back(p);
  for (const auto& path : param_.test_net()) nets.push_back(ReadNet(ResolveNetPath(path, solver_path)));
  const bool general = param_.has_net() || param_.has_net_param();
  const int from_general = general ? param_.test_iter_size() - static_cast<int>(nets.size()) : 0;
  if (from_general > 0) {
    const NetParameter shared =
        param_.has_net_param() ? param_.net_param() : ReadNet(ResolveNetPath(param_.net(), solver_path));
    for (int i = 0; i < from_general; ++i) nets.push_back(shared);
  }
  // CheckNets made sure that test_iter, test_state and test_interval agree with these nets.
  for (size_t i = 0; i < nets.size(); ++i) {
    ApplyState(&nets[i], TEST, param_.test_state_size() ? &param_.test_state(static_cast<int>(i)) : nullptr);
    test_nets_.push_back(std::make_unique<Net>(nets[i], context_));
    test_nets_.back()->PlanMemory(false);  // tested forward only: activations freed after their last reader
    test_nets_.back()->ShareTrainedLayersWith(*net_);
    // A test net runs forward only: it is rewritten for inference (net/fold.hpp) over the train net's weights, and
    // its folded weights are derived again before the first test pass after each update (Net::AddDerivedParams).
    test_nets_.back()->RunAfterWeightsPasses();
  }
}

float Solver::CurrentLearningRate() { return LearningRate(param_, iter_, &current_step_); }

void Solver::Solve(const std::string& resume_file) {
  CheckMaxIter(param_);
  CREMA_CHECK(!param_.snapshot_after_train() || param_.has_snapshot_prefix())
      << "the solver snapshots after training (snapshot_after_train, true by default) but sets no "
         "snapshot_prefix; set one, or snapshot_after_train: false";
  LOG(INFO) << "Solving " << net_->name();
  // In a group, rank 0 alone reads the snapshot; every rank then starts from its weights and state.
  if (!resume_file.empty() && (group_ == nullptr || group_->rank() == 0)) {
    LOG(INFO) << "Restoring previous solver status from " << resume_file;
    Restore(resume_file);
  }
  if (group_ != nullptr) ShareStateFromRankZero();
  Step(param_.max_iter() - iter_);
  if (stopped_) {
    LOG(INFO) << "Optimization stopped early at iteration " << iter_ << ".";
    return;
  }
  if (param_.snapshot_after_train() && (param_.snapshot() == 0 || iter_ % param_.snapshot() != 0)) Snapshot();
  // Caffe reports the loss and tests once more after the last update.
  if (param_.display() && iter_ % param_.display() == 0) {
    double loss = net_->Forward();
    if (group_ != nullptr) {
      group_->AllReduceSum(&loss, 1);
      loss /= group_->size();
    }
    LOG(INFO) << "Iteration " << iter_ << ", loss = " << static_cast<float>(loss);
  }
  if (param_.test_interval() && iter_ % param_.test_interval() == 0) TestAll();
  LOG(INFO) << "Optimization Done.";
}

void Solver::Step(int iterations) {
  // A group's first steps start from rank 0's weights and state, however the solver is driven (Solve shares them after
  // a resume; a program that calls Step gets them here).
  if (group_ != nullptr && !shared_from_rank_zero_) ShareStateFromRankZero();
  const int stop_iter = iter_ + iterations;
  auto last_display = std::chrono::steady_clock::now();
  int last_display_iter = iter_;
  while (iter_ < stop_iter) {
    net_->ClearParamDiffsInBackward();  // each parameter's zeroing, where it may, in its layer's backward
    if (param_.test_interval() && iter_ % param_.test_interval() == 0 &&
        (iter_ > 0 || param_.test_initialization()))
      TestAll();
    const bool display = param_.display() && iter_ % param_.display() == 0;
    // As in Caffe, the solver's debug_info logs the iterations that display; the net's own, every iteration.
    net_->set_debug_info(net_debug_info_ || (display && param_.debug_info()));

    for (SolverCallback* callback : callbacks_) callback->OnStart(iter_);
    if (loss_scaling_) net_->set_loss_scale(loss_scaling_->scale());
    float loss = 0.f;
    for (int i = 0; i < param_.iter_size(); ++i) {
      last_backward_pass_ = i + 1 == param_.iter_size();
      loss += net_->ForwardBackward();
    }
    loss /= param_.iter_size();
    // The gradients are complete (in a group: summed over the ranks) before anything reads them.
    for (SolverCallback* callback : callbacks_) callback->OnGradientsReady(iter_);
    // In a group the ranks agree on the loss (its mean over them) and on a snapshot or stop asked of any of them.
    bool snapshot_now = false, stop_now = false;
    if (group_ != nullptr) {
      double agreed[3] = {loss, snapshot_requested_.exchange(false) ? 1.0 : 0.0, stop_requested_ ? 1.0 : 0.0};
      group_->AllReduceSum(agreed, 3);
      loss = static_cast<float>(agreed[0] / group_->size());
      snapshot_now = agreed[1] > 0;
      stop_now = agreed[2] > 0;
    }
    if (!std::isfinite(loss)) {
      const std::string where = net_->DescribeFirstNonFinite();
      CREMA_FAIL() << "training diverged at iteration " << iter_ << ": the loss is " << loss
                   << (where.empty() ? std::string() : "; first non-finite value: " + where)
                   << ". Lower base_lr, or check the data and the weight fillers.";
    }
    UpdateSmoothedLoss(loss);
    if (display) {
      const auto now = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(now - last_display).count();
      LOG(INFO) << "Iteration " << iter_ << ", loss = " << smoothed_loss_;
      if (iter_ > last_display_iter && seconds > 0)
        LOG(INFO) << "Speed: " << std::fixed << std::setprecision(2) << (iter_ - last_display_iter) / seconds
                  << " iter/s";
      last_display = now;
      last_display_iter = iter_;
      // The outputs of the last forward pass (the loss line above is smoothed; these are not).
      OutputScores outputs;
      outputs.Add(*net_);
      const auto means = outputs.Means();
      for (size_t k = 0; k < means.size(); ++k)
        LOG(INFO) << "    Train net output #" << k << ": " << OutputScores::Describe(means[k]);
      if (reducer_ && reducer_->last_seconds() > 0)
        LOG(INFO) << "    Gradient all-reduce: " << std::fixed << std::setprecision(2) << reducer_->last_seconds() * 1e3
                  << " ms in flight, " << std::setprecision(0)
                  << 100 * reducer_->last_overlapped_seconds() / reducer_->last_seconds()
                  << "% of it during backward; the update waited " << std::setprecision(2)
                  << reducer_->last_waited_seconds() * 1e3 << " ms for it" << std::defaultfloat;
    }
    // Under loss scaling, the gradients back to their size; an iteration whose gradients overflowed updates nothing.
    const bool update = !loss_scaling_ || UnscaleGradients();
    if (update) ApplyUpdate();
    net_->set_debug_info(net_debug_info_);
    ++iter_;
    const bool scheduled = param_.snapshot() && iter_ % param_.snapshot() == 0;
    if (group_ == nullptr) {
      snapshot_now = snapshot_requested_.exchange(false);
      stop_now = stop_requested_;
    }
    if (scheduled || snapshot_now) Snapshot();
    // In a group only what the ranks agreed on counts: a request that came after the agreement waits for the next.
    if (stop_now) {
      stopped_ = true;
      break;
    }
  }
}

void Solver::UpdateSmoothedLoss(float loss) {
  losses_.push_back(loss);
  if (static_cast<int>(losses_.size()) > param_.average_loss()) losses_.pop_front();
  double sum = 0;
  for (float value : losses_) sum += value;
  smoothed_loss_ = static_cast<float>(sum / losses_.size());
}

void Solver::ApplyUpdate() {
  const float rate = CurrentLearningRate();
  if (param_.display() && iter_ % param_.display() == 0) LOG(INFO) << "Iteration " << iter_ << ", lr = " << rate;
  ClipGradients();
  const auto& params = net_->learnable_params();
  // On the host, one pass over each parameter: its update (the prologue and the rule, UpdateOf) and the step, stretch
  // by stretch (core/derived_copy.hpp). The same operations on each value in the same order as the two passes below,
  // so the same bits, with the parameter, its gradient and its histories read and written once (CaffeNet's 61 million
  // weights: 40 bytes a weight in four passes with momentum and weight decay, 20 in one). The GPU, and debug_info
  // (which reports each parameter between the update and the step), take two passes: the update, then the step.
  if (context_->device() == Device::kCPU && !net_->debug_info()) {
    for (size_t i = 0; i < params.size(); ++i) {
      const std::unique_ptr<UpdateRule> update = UpdateOf(static_cast<int>(i), rate);
      WriteWithStep(*context_, params[i], [&](int64_t begin, int64_t end) { update->RunRange(begin, end); });
    }
    return;
  }
  for (size_t i = 0; i < params.size(); ++i) UpdateOf(static_cast<int>(i), rate)->Run(*context_, params[i]->count());
  if (net_->debug_info()) {
    // Each parameter before its update, and the step about to be subtracted.
    for (size_t i = 0; i < params.size(); ++i) {
      const int index = static_cast<int>(i);
      double data = 0, diff = 0;
      const float* data_values = params[i]->cpu_data();
      const float* diff_values = params[i]->cpu_diff();
      for (int k = 0; k < params[i]->count(); ++k) {
        data += std::fabs(data_values[k]);
        diff += std::fabs(diff_values[k]);
      }
      const double count = std::max(1, params[i]->count());
      LOG(INFO) << "    [Update] Layer " << net_->learnable_param_layer(index) << ", param "
                << net_->learnable_param_display_name(index) << " data: " << data / count << "; diff: " << diff / count;
    }
  }
  // data -= diff, on the device; on the host, with the copies engines derive from the data written as it is
  // (core/derived_copy.hpp).
  for (Blob* param : params) WriteWithStep(*context_, param);
}

Solver::UpdateOperands Solver::OperandsFor(int param_index, float rate) {
  Blob* param = net_->learnable_params()[param_index];
  const Device device = context_->device();
  const size_t params = net_->learnable_params().size();
  return UpdateOperands{param->count(), param->mutable_diff_on(device), history_[param_index]->mutable_data_on(device),
                        history_sets_ > 1 ? history_[params + param_index]->mutable_data_on(device) : nullptr,
                        rate * net_->params_lr()[param_index]};
}

std::unique_ptr<UpdateRule> Solver::UpdateOf(int param_index, float rate) {
  Blob* param = net_->learnable_params()[param_index];
  const Device device = context_->device();
  float* diff = param->mutable_diff_on(device);
  GradientPrologue prologue;
  // The gradient averaged over the iteration's iter_size passes.
  if (param_.iter_size() != 1) {
    prologue.averages = true;
    prologue.average = ScaleBy{diff, 1.f / param_.iter_size()};
  }
  const float decay = param_.weight_decay() * net_->params_weight_decay()[param_index];
  if (decay != 0.f) {
    const float* data = param->data_on(device);
    if (param_.regularization_type() == "L2") {
      prologue.decays = GradientPrologue::kL2;
      prologue.l2 = L2Decay{data, diff, decay};
    } else {
      prologue.decays = GradientPrologue::kL1;
      prologue.l1 = L1Decay{data, diff, decay};
    }
  }
  std::unique_ptr<UpdateRule> rule = UpdateRuleFor(param_index, rate);
  rule->set_prologue(prologue);
  return rule;
}

void Solver::ClipGradients() {
  const float threshold = param_.clip_gradients();
  if (threshold < 0) return;
  const Device device = context_->device();
  double sumsq = 0;
  for (Blob* param : net_->learnable_params())
    sumsq += dot(*context_, param->count(), param->diff_on(device), param->diff_on(device));
  const float norm = static_cast<float>(std::sqrt(sumsq));
  if (norm > threshold) {
    const float factor = threshold / norm;
    LOG(INFO) << "Gradient clipping: scaling down gradients (L2 norm " << norm << " > " << threshold
              << ") by scale factor " << factor;
    for (Blob* param : net_->learnable_params()) scale(*context_, param->count(), factor, param->mutable_diff_on(device));
  }
}

std::vector<std::vector<OutputScores::Mean>> Solver::TestAll() {
  std::vector<std::vector<OutputScores::Mean>> results;
  for (size_t t = 0; t < test_nets_.size(); ++t) {
    const int iterations = param_.test_iter(static_cast<int>(t));
    if (iterations == 0) {  // switched off (test_iter: 0)
      results.emplace_back();
      continue;
    }
    LOG(INFO) << "Iteration " << iter_ << ", Testing net (#" << t << ")";
    Net& test_net = *test_nets_[t];
    OutputScores scores;
    double loss = 0;
    // In a group of N, rank r's k-th batch is the one process's batch k*N + r (its data layers read their part of
    // each global batch): the ranks split the test_iter batches, each running as many passes (the last round whole,
    // so that the data cursors stay together: JoinGroup warns where test_iter is not a multiple of N), and their sums
    // are added up.
    const int ranks = group_ ? group_->size() : 1;
    const int passes = (iterations + ranks - 1) / ranks;
    for (int k = 0; k < passes; ++k) {
      loss += test_net.Forward();
      scores.Add(test_net);
    }
    if (group_ != nullptr) {
      std::vector<double> totals = scores.Totals();
      totals.push_back(loss);
      group_->AllReduceSum(totals.data(), totals.size());
      loss = totals.back();
      totals.pop_back();
      scores.SetTotals(totals);
    }
    if (param_.test_compute_loss()) LOG(INFO) << "Test loss: " << loss / scores.passes();
    results.push_back(scores.Means());
    for (size_t k = 0; k < results.back().size(); ++k)
      LOG(INFO) << "    Test net output #" << k << ": " << OutputScores::Describe(results.back()[k]);
  }
  return results;
}

std::string Solver::SnapshotFilename(const std::string& extension) const {
  return param_.snapshot_prefix() + "_iter_" + std::to_string(iter_) + extension;
}

void Solver::CheckSnapshotFolder(const std::string& prefix) {
  const std::filesystem::path folder = FolderOf(prefix);
  std::error_code error;
  CREMA_CHECK(std::filesystem::is_directory(folder, error))
      << "snapshot_prefix '" << prefix << "': the folder '" << folder.string() << "' "
      << (std::filesystem::exists(folder, error) ? "is not a folder" : "does not exist")
      << "; create it before training, or change snapshot_prefix";
  // Try it: permissions alone do not tell (root ignores them; a read-only mount does not).
  const std::string probe = (folder / (".crema_write_probe." + std::to_string(getpid()))).string();
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const int reason = errno;
  if (fd >= 0) {
    close(fd);
    unlink(probe.c_str());
  }
  CREMA_CHECK(fd >= 0 || reason == EEXIST) << "snapshot_prefix '" << prefix << "': cannot write in the folder '"
                                           << folder.string() << "': " << std::strerror(reason);
}

void Solver::SnapshotBesideSolverFile(const std::string& solver_path, SolverParameter* param) {
  const std::filesystem::path solver_file(solver_path);
  std::error_code error;
  if (!param->has_snapshot_prefix()) {
    param->set_snapshot_prefix(std::filesystem::path(solver_file).replace_extension().string());
    LOG(INFO) << "The solver sets no snapshot_prefix; snapshots go beside it: " << param->snapshot_prefix();
  } else if (std::filesystem::is_directory(param->snapshot_prefix(), error)) {
    param->set_snapshot_prefix((std::filesystem::path(param->snapshot_prefix()) / solver_file.stem()).string());
    LOG(INFO) << "snapshot_prefix names a folder; snapshots go there, named after the solver file: "
              << param->snapshot_prefix();
  }
}

void Solver::RemovePartialSnapshots(const std::string& prefix) {
  const std::string name = std::filesystem::path(prefix).filename().string();
  for (const std::string& file : RemoveAbandonedTemporaries(FolderOf(prefix), name + "_iter_"))
    LOG(WARNING) << "Removed " << file << ": part of a snapshot whose writing was interrupted (the process was "
                 << "killed); the snapshots under their own names are complete";
}

void Solver::MakeSnapshotState(const std::string& weights_file, SolverState* state) const {
  state->Clear();
  state->set_iter(iter_);
  state->set_learned_net(weights_file);
  state->set_current_step(current_step_);
  state->set_type(type());
  for (const auto& blob : history_) blob->ToProto(state->add_history());
  net_->SaveRuntimeState("train", state);
  for (size_t t = 0; t < test_nets_.size(); ++t) test_nets_[t]->SaveRuntimeState("test" + std::to_string(t), state);
  for (float loss : losses_) state->add_loss_window(loss);
  if (loss_scaling_) {
    state->set_loss_scale(loss_scaling_->scale());
    state->set_loss_scale_steady_iterations(loss_scaling_->steady_iterations());
  }
  *state->mutable_solver() = recorded_solver_;
  *state->mutable_train_net() = recorded_train_net_;
}

std::string Solver::Snapshot() {
  CREMA_CHECK(param_.has_snapshot_prefix()) << "cannot snapshot: the solver sets no snapshot_prefix";
  // In a group, rank 0 writes the snapshot, with every rank's runtime state.
  std::vector<std::string> ranks_states;
  if (group_ != nullptr) {
    ranks_states = group_->Gather(group_->rank() == 0 ? std::string() : RuntimeStateBytes(), 0);
    if (group_->rank() != 0) return "";
  }
  const SolverParameter::SnapshotFormat format = param_.snapshot_format();
  const char* kind = format == SolverParameter::HDF5 ? "HDF5 file" : "binary proto file";
  // The weights first: a state on disk always names weights that are complete on disk.
  const std::string model_file = SnapshotFilename(WeightsExtension(format));
  NetParameter weights;
  net_->ToProto(&weights, param_.snapshot_diff());
  LOG(INFO) << "Snapshotting to " << kind << " " << model_file;
  const bool weights_existed = FileExists(model_file);
  WriteWeightsFile(weights, model_file, format);

  SolverState state;
  MakeSnapshotState(model_file, &state);
  for (size_t r = 1; r < ranks_states.size(); ++r) {
    SolverState rank_state;
    CREMA_CHECK(rank_state.ParseFromString(ranks_states[r])) << "rank " << r << "'s runtime state does not parse";
    for (auto& layer_state : *rank_state.mutable_layer_state()) {
      layer_state.set_replica(static_cast<int>(r));
      *state.add_layer_state() = layer_state;
    }
  }
  if (group_ != nullptr) state.set_replicas(group_->size());
  const std::string state_file = SnapshotFilename(SolverStateExtension(format));
  LOG(INFO) << "Snapshotting solver state to " << kind << " " << state_file;
  try {
    WriteSolverStateFile(state, state_file, format);
  } catch (const Error& error) {
    // Weights without their state look like a snapshot to resume from, and are not one: they go too (unless a
    // snapshot of this iteration was already there, written whole before).
    std::error_code ignored;
    if (!weights_existed) std::filesystem::remove(model_file, ignored);
    CREMA_FAIL() << error.what() << ": the snapshot of iteration " << iter_ << " is not made ("
                 << (weights_existed ? "" : "its weights file, written first, was removed again; ")
                 << "earlier snapshots are intact)";
  }
  return state_file;
}

void Solver::Restore(const std::string& state_file) {
  CREMA_CHECK(FileExists(state_file)) << "solver state file '" << state_file << "' does not exist";
  SolverState state;
  ReadSolverStateFile(state_file, &state);
  CheckStateFits(state.type(), state.history_size(), state_file);
  const int ranks = group_ ? group_->size() : 1;
  const int replicas = state.has_replicas() ? state.replicas() : 1;
  CREMA_CHECK(replicas == ranks)
      << "solver state '" << state_file << "' was written by a run of " << replicas
      << (replicas == 1 ? " process" : " data-parallel processes") << ", and this run has " << ranks
      << ": resuming needs the same number ("
      << (replicas == 1 ? "run without mpirun" : "mpirun -np " + std::to_string(replicas))
      << "), since each rank's data cursor and random streams are in the state. To go on with " << ranks
      << ", start from its weights instead: --weights=" << state.learned_net();
  ReportChangesSince(state, state_file);
  if (state.has_learned_net()) {
    // The state names its weights by the path used when it was written; when that is gone (the files were
    // moved), look for the weights beside the state file.
    std::string weights = state.learned_net();
    if (!FileExists(weights)) {
      const std::filesystem::path state_path(state_file);
      const std::string beside = (state_path.parent_path() / std::filesystem::path(weights).filename()).string();
      CREMA_CHECK(FileExists(beside)) << "solver state '" << state_file << "' names weights '" << weights
                                      << "', which exist neither there nor at '" << beside << "'";
      weights = beside;
    }
    net_->CopyTrainedLayersFrom(weights);
  }
  TakeUpState(state, "solver state '" + state_file + "'");
  // Rank 0 sends the other ranks theirs (ShareStateFromRankZero).
  other_ranks_states_.clear();
  for (const auto& layer_state : state.layer_state())
    if (layer_state.replica() != 0) other_ranks_states_.push_back(layer_state);
}

void Solver::TakeUpState(const SolverState& state, const std::string& origin) {
  for (int i = 0; i < state.history_size(); ++i) {
    try {
      history_[i]->FromProto(state.history(i), /*reshape=*/false);
    } catch (const Error& error) {
      CREMA_FAIL() << origin << ", history blob " << i << ": " << error.what();
    }
  }
  iter_ = state.iter();
  current_step_ = state.current_step();
  // This rank's runtime state only (rank 0's entries have no replica).
  const int rank = group_ ? group_->rank() : 0;
  SolverState mine;
  for (const auto& layer_state : state.layer_state())
    if (layer_state.replica() == rank) *mine.add_layer_state() = layer_state;
  net_->RestoreRuntimeState("train", mine);
  for (size_t t = 0; t < test_nets_.size(); ++t) test_nets_[t]->RestoreRuntimeState("test" + std::to_string(t), mine);
  losses_.assign(state.loss_window().begin(), state.loss_window().end());
  if (loss_scaling_ && state.has_loss_scale())
    loss_scaling_->Restore(state.loss_scale(), state.loss_scale_steady_iterations(), origin);
  else if (loss_scaling_)
    LOG(INFO) << origin << " holds no loss scale (it was trained without scaling): scaling starts from "
              << loss_scaling_->scale();
}

namespace {

// The changes from the net a state was trained with to this run's: the net's own fields, then layer by layer,
// layers matched by name (a name given to several layers matches them in order).
std::vector<std::string> NetChanges(const NetParameter& before, const NetParameter& after) {
  NetParameter before_rest = before, after_rest = after;
  before_rest.clear_layer();
  after_rest.clear_layer();
  std::vector<std::string> lines = DescribeChanges(before_rest, after_rest);
  std::map<std::string, std::vector<const LayerParameter*>> earlier;
  for (const auto& layer : before.layer()) earlier[layer.name()].push_back(&layer);
  std::map<std::string, size_t> matched;
  for (const auto& layer : after.layer()) {
    const std::vector<const LayerParameter*>& candidates = earlier[layer.name()];
    size_t& next = matched[layer.name()];
    const std::string named = "layer '" + layer.name() + "'";
    if (next == candidates.size()) {
      lines.push_back(named + " (" + layer.type() + ") added");
      continue;
    }
    for (const auto& line : DescribeChanges(*candidates[next++], layer)) lines.push_back(named + " " + line);
  }
  std::map<std::string, size_t> seen;
  for (const auto& layer : before.layer())
    if (++seen[layer.name()] > matched[layer.name()])
      lines.push_back("layer '" + layer.name() + "' (" + layer.type() + ") removed");
  return lines;
}

}  // namespace

void Solver::ReportChangesSince(const SolverState& state, const std::string& state_file) const {
  // States written before crema recorded the configuration (and Caffe's) have nothing to compare.
  std::vector<std::string> changes;
  if (state.has_solver())
    for (const auto& line : DescribeChanges(state.solver(), recorded_solver_)) changes.push_back("solver " + line);
  if (state.has_train_net())
    for (const auto& line : NetChanges(state.train_net(), recorded_train_net_)) changes.push_back("net " + line);
  if (changes.empty()) return;
  LOG(WARNING) << "Resuming from '" << state_file << "' with " << changes.size() << " change(s) to the solver or "
               << "net it was trained with; training goes on with the new values:";
  for (const auto& change : changes) LOG(WARNING) << "  changed since the snapshot: " << change;
}

void Solver::CheckStateFits(const std::string& state_type, int history_count, const std::string& state_file) const {
  // The histories of two rules mean different things (a velocity, a sum of squares, ...): continuing one rule
  // from another's would silently train with nonsense.
  CREMA_CHECK(state_type.empty() || state_type == type())
      << "solver state '" << state_file << "' was written by solver type " << state_type
      << ", but this solver's type is " << type() << "; resume with type: \"" << state_type
      << "\" or start without the state";
  CREMA_CHECK(history_count == static_cast<int>(history_.size()))
      << "solver state '" << state_file << "' holds " << history_count << " history blob(s), but the " << type()
      << " solver keeps " << history_.size() << " (" << history_sets_
      << " per learnable parameter blob, of which the net has " << net_->learnable_params().size() << ")";
}

namespace {

template <typename Rule>
std::unique_ptr<Solver> Make(const SolverParameter& param, const std::string& solver_path,
                             std::shared_ptr<Context> context) {
  return std::make_unique<Rule>(param, solver_path, std::move(context));
}

// Caffe's type names, in the order of the deprecated SolverType enum.
const struct {
  const char* name;
  std::unique_ptr<Solver> (*make)(const SolverParameter&, const std::string&, std::shared_ptr<Context>);
} kSolverTypes[] = {{"SGD", Make<SGDSolver>},           {"Nesterov", Make<NesterovSolver>},
                    {"AdaGrad", Make<AdaGradSolver>},   {"RMSProp", Make<RMSPropSolver>},
                    {"AdaDelta", Make<AdaDeltaSolver>}, {"Adam", Make<AdamSolver>}};

}  // namespace

std::vector<std::string> KnownSolverTypes() {
  std::vector<std::string> names;
  for (const auto& type : kSolverTypes) names.push_back(type.name);
  return names;
}

std::unique_ptr<Solver> CreateSolver(const SolverParameter& param, const std::string& solver_path,
                                     std::shared_ptr<Context> context) {
  Solver::CheckNets(param, solver_path);
  std::string type = param.type();
  if (param.has_solver_type()) {
    // The deprecated enum names the same rules. Caffe refuses a file that sets both; one whose two fields
    // agree is harmless, so only a contradiction is an error here.
    const std::string legacy = kSolverTypes[param.solver_type()].name;
    CREMA_CHECK(!param.has_type() || param.type() == legacy)
        << "the solver sets type: \"" << param.type()
        << "\" and the deprecated solver_type: " << SolverParameter::SolverType_Name(param.solver_type())
        << ", which disagree; keep only type";
    type = legacy;
  }
  std::string known;
  for (const auto& candidate : kSolverTypes) {
    if (type == candidate.name) return candidate.make(param, solver_path, std::move(context));
    known += std::string(known.empty() ? "" : ", ") + candidate.name;
  }
  CREMA_FAIL() << "unknown solver type \"" << type << "\"; known types: " << known;
  return nullptr;
}

std::unique_ptr<Solver> CreateSolverFromFile(const std::string& path) {
  CREMA_CHECK(FileExists(path)) << "solver file '" << path << "' does not exist";
  SolverParameter param;
  ReadProtoFromTextFile(path, &param);
  return CreateSolver(param, path);
}

}  // namespace crema
