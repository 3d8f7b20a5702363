// Solver: the training loop (iterations, tests, display, snapshots, signals) over one training net and its
// test nets. An update rule (SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam) is a subclass that turns each
// parameter's gradient into the step to subtract; the loop, the regularisation and the snapshots are shared.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "net/net.hpp"
#include "net/output_scores.hpp"
#include "parallel/communicator.hpp"
#include "solver/loss_scaling.hpp"

namespace crema {

class GradientReducer;
class UpdateRule;

// Hooks for what runs beside a solver (data parallelism's gradient sum is built on them): a solver calls every
// callback it was given, in the order given, at these points of each iteration.
class SolverCallback {
 public:
  virtual ~SolverCallback() = default;
  // Before the iteration's forward and backward passes (e.g. broadcast the parameters).
  virtual void OnStart(int iteration) {}
  // During the iteration's last backward pass, as soon as learnable parameter `ready.index()`'s gradient is complete
  // (e.g. start its all-reduce while the rest of backward runs: through ready.Then, which orders it after the
  // gradient on a GPU's streams; Net::GradientReady).
  virtual void OnParameterGradientReady(int iteration, const Net::GradientReady& ready) {}
  // After the iteration's backward passes, before the gradients are read (loss scaling's overflow check, clipping,
  // the update): e.g. wait for the all-reduces.
  virtual void OnGradientsReady(int iteration) {}
};

class Solver {
 public:
  // Checks of the settings only one update rule reads (its momentum, delta, decays).
  using RuleCheck = void (*)(const SolverParameter& param);

  // `solver_path` (may be empty) is where `param` was read from: relative net paths that do not exist from
  // the working directory are looked up beside it. The solver's nets share `context`; without one, the solver
  // makes ContextFor(param). The update rule keeps `history_sets` (1 or 2) history blobs per learnable parameter.
  // Every setting is checked before a net is built, in the order a person would fix them: the nets
  // (CheckNets), the shared settings (CheckSettings), `check_rule`, the snapshot folder.
  explicit Solver(const SolverParameter& param, const std::string& solver_path = "",
                  std::shared_ptr<Context> context = nullptr, int history_sets = 1, RuleCheck check_rule = nullptr);
  // The context a solver runs on: the device solver_mode and device_id name, seeded by random_seed (1701 when
  // unset).
  static std::shared_ptr<Context> ContextFor(const SolverParameter& param);
  // What `param` says of how its nets compute, onto `context`: cuDNN's choice of algorithms (where set) and the
  // precision. ContextFor applies it; so does whoever makes a solver's context otherwise (Python's get_solver).
  static void ApplyComputeSettings(const SolverParameter& param, Context* context);
  virtual ~Solver();

  // Trains to max_iter, starting from a snapshot when `resume_file` is given.
  void Solve(const std::string& resume_file = "");
  // Runs `iterations` training iterations (tests and snapshots fall where the schedule puts them).
  void Step(int iterations);
  // Runs every test net once; returns the mean of each output of each test net, logged in Caffe's shapes.
  std::vector<std::vector<OutputScores::Mean>> TestAll();

  // Writes <prefix>_iter_<iter>.caffemodel and .solverstate (snapshot_format: HDF5: .caffemodel.h5 and
  // .solverstate.h5, in Caffe's HDF5 layout; see io/snapshot_io.hpp), each atomically, the weights first.
  // Returns the state's path.
  std::string Snapshot();
  // Loads a .solverstate or .solverstate.h5 (and the weights it names; when they are no longer where the state
  // says, the file of that name beside the state).
  void Restore(const std::string& state_file);
  // The first thing a solver is told: that it names its training net exactly once (net, net_param, train_net
  // or train_net_param), that the net files it names are files that exist (relative paths as ResolveNetPath),
  // and that its test nets, test_iter values and test_interval agree. Throws naming the field or file.
  static void CheckNets(const SolverParameter& param, const std::string& solver_path = "");
  // The settings every update rule shares: base_lr, lr_policy and what it needs, max_iter (not negative; 0 is
  // allowed here, for solvers driven by Step), iter_size, average_loss, regularization_type,
  // weight_decay, display, snapshot. Throws naming the field and its value; logs a warning for a base_lr of 0.
  static void CheckSettings(const SolverParameter& param);
  // Solve trains to max_iter, so it must be set and positive: `crema train` checks it right after CheckNets.
  static void CheckMaxIter(const SolverParameter& param);
  // Throws naming the folder when the folder of snapshot prefix `prefix` does not exist or cannot be written
  // (the constructor checks snapshot_prefix with it, before any iteration).
  static void CheckSnapshotFolder(const std::string& prefix);
  // Caffe's rule for a solver read from a file: with no snapshot_prefix the snapshots go beside the solver
  // file, named after it (lenet_solver.prototxt: lenet_solver_iter_N.caffemodel); a snapshot_prefix that
  // names an existing folder gets the solver file's name appended.
  static void SnapshotBesideSolverFile(const std::string& solver_path, SolverParameter* param);
  // Removes the hidden temporary files of snapshot writes under `prefix` that a killed run left behind.
  static void RemovePartialSnapshots(const std::string& prefix);

  // Ask the loop to snapshot (and, for stop, then end) at the end of the current iteration; safe to call
  // from a signal handler.
  void RequestSnapshot() { snapshot_requested_ = true; }
  void RequestStop() { stop_requested_ = true; }
  // Not owned; must outlive the solver's use of it.
  void AddCallback(SolverCallback* callback) { callbacks_.push_back(callback); }

  // Data parallelism: this solver is rank group->rank() of group->size() solvers that train together (not owned; must
  // outlive the solver). Its context must have been made that replica (Context::set_replica) before the solver was
  // built, so that its data layers read their part of each global batch. From then on: the gradients are averaged
  // over the group during backward (GradientReducer, before the other callbacks); every rank starts from rank 0's
  // weights and state (Solve's resume reads the snapshot on rank 0 alone; otherwise the first Step shares them); the
  // ranks agree each iteration on the loss (its mean), and on a snapshot or stop asked of any of them; tests are split
  // over the ranks and their outputs summed; rank 0 alone writes snapshots, holding every rank's data cursors and
  // random streams. `bucket_bytes`: the size of the gradient buckets (0: GradientReducer::DefaultBucketBytes).
  void JoinGroup(Communicator* group, size_t bucket_bytes = 0);

  int iter() const { return iter_; }
  const SolverParameter& param() const { return param_; }
  // The training net as the solver read it (from its net or train_net file, or its net_param), before the
  // training state chose its layers.
  const NetParameter& train_net_definition() const { return recorded_train_net_; }
  Net* net() { return net_.get(); }
  // The test nets, in the order of the solver's test_net / test_net_param / net's TEST phase; they share the
  // training net's parameters (the Python module shows them as solver.test_nets).
  const std::vector<std::unique_ptr<Net>>& test_nets() const { return test_nets_; }
  Context& context() const { return *context_; }
  // Caffe's layout, so that Caffe's .solverstate files load: one blob per learnable parameter, in parameter
  // order; a rule with two histories (AdaDelta, Adam) has a second such set after the first.
  const std::vector<std::shared_ptr<Blob>>& history() const { return history_; }
  // Caffe's name of the update rule ("SGD", "Adam", ...), as in SolverParameter.type.
  virtual const char* type() const = 0;

  // The rate of the current iteration.
  float CurrentLearningRate();
  // One update of every learnable parameter from its accumulated gradient (for tests of update rules).
  void ApplyUpdate();
  // Dynamic loss scaling, where it is on (SolverParameter.loss_scaling); else null.
  const LossScaling* loss_scaling() const { return loss_scaling_.get(); }

 protected:
  // The rule that turns params[index]'s diff into the step to subtract, given the parameter's own rate
  // (solver/update_rules.hpp), set up over the operands OperandsFor gives.
  virtual std::unique_ptr<UpdateRule> UpdateRuleFor(int param_index, float rate) = 0;

  // What an update rule reads and writes for one learnable parameter, on the solver's device.
  struct UpdateOperands {
    int count;
    float* diff;       // the regularised gradient in, the step to subtract out
    float* history;    // the parameter's blob in the first history set
    float* history2;   // and in the second (nullptr for a rule with one set)
    float local_rate;  // the solver's rate times the parameter's lr_mult
  };
  UpdateOperands OperandsFor(int param_index, float rate);

  // A state written by another update rule, or holding another number of history blobs, cannot continue this
  // run: throws naming the file. `state_type` is empty for a state that does not record it (Caffe's).
  void CheckStateFits(const std::string& state_type, int history_count, const std::string& state_file) const;

  std::vector<std::shared_ptr<Blob>> history_;

 private:
  void InitTrainNet(const std::string& solver_path);
  void InitTestNets(const std::string& solver_path);
  // What ApplyUpdate runs over params[index] before the step, value by value: the gradient averaged over iter_size
  // (where it is above 1) and the weight decay (where not 0), the rule's prologue, then the solver's rule
  // (UpdateRuleFor).
  std::unique_ptr<UpdateRule> UpdateOf(int param_index, float rate);
  void ClipGradients();
  void UpdateSmoothedLoss(float loss);
  std::string SnapshotFilename(const std::string& extension) const;
  // Everything Snapshot stores about the solver, whatever the file format.
  void MakeSnapshotState(const std::string& weights_file, SolverState* state) const;
  // Takes up a state read by Restore (or sent by rank 0): history, iteration, runtime state of this rank, loss window
  // and scale. `origin` names it in errors.
  void TakeUpState(const SolverState& state, const std::string& origin);
  // Data parallelism: every rank takes rank 0's weights and state.
  void ShareStateFromRankZero();
  // Data parallelism: this rank's runtime state (data cursors, random streams), for rank 0's snapshot.
  std::string RuntimeStateBytes() const;
  // Names, in warnings, every field of the solver and train net that changed since `state` was written.
  void ReportChangesSince(const SolverState& state, const std::string& state_file) const;

  SolverParameter param_;
  // What snapshots record of the run's configuration: the solver as given (its inline train net left to
  // recorded_train_net_), and the train net as read, before the phase filter.
  SolverParameter recorded_solver_;
  NetParameter recorded_train_net_;
  std::shared_ptr<Context> context_;
  std::vector<SolverCallback*> callbacks_;
  Communicator* group_ = nullptr;
  std::unique_ptr<GradientReducer> reducer_;
  // Rank 0 of a group, after Restore: the other ranks' runtime states in the state it read, sent on to them.
  std::vector<LayerRuntimeState> other_ranks_states_;
  bool shared_from_rank_zero_ = false;  // every rank has taken rank 0's weights and state
  std::unique_ptr<Net> net_;
  bool net_debug_info_ = false;  // the train net's own debug_info (its prototxt's); the solver's adds to it
  std::vector<std::unique_ptr<Net>> test_nets_;
  int history_sets_ = 1;
  int iter_ = 0;
  int current_step_ = 0;
  std::deque<float> losses_;
  float smoothed_loss_ = 0.f;
  bool last_backward_pass_ = true;  // the current backward pass is the iteration's last (iter_size)
  std::atomic<bool> snapshot_requested_{false};
  std::atomic<bool> stop_requested_{false};
  bool stopped_ = false;  // Step ended early on a stop request (in a group: one the ranks agreed on)
  // Dynamic loss scaling (SolverParameter.loss_scaling), where it is on.
  std::unique_ptr<LossScaling> loss_scaling_;
  // Under loss scaling: whether the scaled gradients are finite (the scale follows, LossScaling::AfterBackward), and
  // where they are, each divided by the scale their backward ran with.
  bool UnscaleGradients();
};

// The solver types CreateSolver knows (SolverParameter.type), in the order of the deprecated solver_type enum.
std::vector<std::string> KnownSolverTypes();
// Builds the solver named by param.type (or the deprecated solver_type); throws listing the known types (after
// Solver::CheckNets: a solver without a net is told so first).
std::unique_ptr<Solver> CreateSolver(const SolverParameter& param, const std::string& solver_path = "",
                                     std::shared_ptr<Context> context = nullptr);
// Reads a solver prototxt (errors name file:line:column) and builds it.
std::unique_ptr<Solver> CreateSolverFromFile(const std::string& path);

}  // namespace crema
