// crema.Solver: train from Python. get_solver reads a solver prototxt as `crema train` does and builds the solver
// on the module's device; step, solve, snapshot and restore are the C++ solver's own.
#include "solver/solver.hpp"

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "io/proto_io.hpp"
#include "parallel/communicator.hpp"

namespace crema {
namespace python {

namespace {

// pycaffe's add_callback(on_start, on_gradients): Python functions called at each iteration, before its forward
// and backward passes and after them (before the update). Step runs without Python's lock; a call takes it.
class PythonCallback : public SolverCallback {
 public:
  PythonCallback(py::object on_start, py::object on_gradients)
      : on_start_(std::move(on_start)), on_gradients_(std::move(on_gradients)) {}
  ~PythonCallback() override {
    if (!Py_IsInitialized()) {
      on_start_.release();
      on_gradients_.release();
      return;
    }
    py::gil_scoped_acquire acquire;
    on_start_ = py::object();
    on_gradients_ = py::object();
  }
  void OnStart(int) override { Call(on_start_); }
  void OnGradientsReady(int) override { Call(on_gradients_); }

 private:
  static void Call(const py::object& function) {
    py::gil_scoped_acquire acquire;
    if (!function.is_none()) function();
  }
  py::object on_start_, on_gradients_;
};

// What a solver's Python objects share: the callbacks outlive the solver that calls them (members go in reverse
// order: the solver first).
struct SolverBox {
  std::vector<std::unique_ptr<PythonCallback>> callbacks;
  std::shared_ptr<Solver> solver;
};

struct SolverHandle {
  std::shared_ptr<SolverBox> box;
  Solver* solver = nullptr;
};

// One Python class per update rule (pycaffe's SGDSolver, AdamSolver, ...), each a subclass of crema.Solver.
template <int kRule>
struct RuleSolverHandle : SolverHandle {};

const char* const kRules[] = {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"};

// The process group of a script started by mpirun with more than one process (null otherwise): made by the first
// solver, and ended (MPI_Finalize, once every rank is there) when the interpreter exits.
Communicator* ProcessGroup() {
  static std::unique_ptr<Communicator> group;
  static bool made = false;
  if (!made) {
    made = true;
    group = ProcessGroupFromEnvironment();
    if (group) py::module_::import("atexit").attr("register")(py::cpp_function([] { group.reset(); }));
  }
  return group.get();
}

// As `crema train --solver=path` builds its solver, but on the device crema.set_mode_* chose (pycaffe's rule:
// the file's solver_mode and device_id are not read), and with the solver's random_seed. In a script started by
// mpirun with N processes, the solver is rank r of N as under `mpirun crema train` (docs/distributed.md): its own
// part of each batch and random streams (seed + r), the gradients averaged, rank 0's weights and state from the first
// step on, rank 0 writing the snapshots.
SolverHandle GetSolver(const py::object& path_object) {
  const std::string path = py::module_::import("os").attr("fspath")(path_object).cast<std::string>();
  CREMA_CHECK(FileExists(path)) << "solver file '" << path << "' does not exist";
  SolverParameter param;
  ReadProtoFromTextFile(path, &param);
  const Defaults& defaults = ModuleDefaults();
  param.set_solver_mode(defaults.device == Device::kGPU ? SolverParameter::GPU : SolverParameter::CPU);
  param.set_device_id(defaults.gpu_id);
  Solver::CheckNets(param, path);
  Communicator* group = ProcessGroup();
  const uint64_t seed = param.random_seed() >= 0 ? static_cast<uint64_t>(param.random_seed()) : Context::kDefaultSeed;
  std::shared_ptr<Context> context = MakeContext(group ? seed + static_cast<uint64_t>(group->rank()) : seed);
  if (group) context->set_replica(group->rank(), group->size());
  // The solver's cuDNN algorithms and precision; crema.set_precision overrides the latter, as --precision does.
  Solver::ApplyComputeSettings(param, context.get());
  if (defaults.precision_set) context->set_precision(defaults.precision);
  std::shared_ptr<Solver> solver;
  {
    py::gil_scoped_release release;
    solver = CreateSolver(param, path, context);
    if (group) solver->JoinGroup(group);
    // The solver's own `weights`, as `crema train` copies them when its command line names none (in a group, rank 0,
    // whose weights every rank takes).
    for (const auto& weights : param.weights()) {
      if (group && group->rank() != 0) break;
      CREMA_CHECK(FileExists(weights)) << "weights file '" << weights << "' (the solver's weights) does not exist";
      solver->net()->CopyTrainedLayersFrom(weights);
    }
  }
  auto box = std::make_shared<SolverBox>();
  box->solver = solver;
  return SolverHandle{box, solver.get()};
}

NetHandle NetOf(const SolverHandle& h, Net* net) { return NetHandle{h.box, net}; }

template <int kRule>
py::object AsRule(const SolverHandle& h) {
  RuleSolverHandle<kRule> typed;
  typed.box = h.box;
  typed.solver = h.solver;
  return py::cast(std::move(typed));
}

// The solver as an object of its rule's class.
py::object Typed(const SolverHandle& h) {
  const std::string type = h.solver->type();
  if (type == kRules[0]) return AsRule<0>(h);
  if (type == kRules[1]) return AsRule<1>(h);
  if (type == kRules[2]) return AsRule<2>(h);
  if (type == kRules[3]) return AsRule<3>(h);
  if (type == kRules[4]) return AsRule<4>(h);
  if (type == kRules[5]) return AsRule<5>(h);
  return py::cast(h);
}

template <int kRule>
void BindRule(py::module_& module) {
  const std::string rule = kRules[kRule];
  py::class_<RuleSolverHandle<kRule>, SolverHandle>(
      module, (rule + "Solver").c_str(),
      ("A solver of type " + rule + ": " + rule + "Solver(path) reads a solver prototxt of that type.").c_str())
      .def(py::init([rule](const py::object& path) {
             SolverHandle h = GetSolver(path);
             CREMA_CHECK(rule == h.solver->type())
                 << "solver file '" << py::str(path).cast<std::string>() << "' is of type " << h.solver->type()
                 << ", not " << rule << " (crema.get_solver reads any type)";
             RuleSolverHandle<kRule> typed;
             typed.box = h.box;
             typed.solver = h.solver;
             return typed;
           }),
           py::arg("path"));
}

}  // namespace

void BindSolver(py::module_& module) {
  py::class_<SolverHandle>(module, "Solver",
                           "A solver read from a prototxt by crema.get_solver(path); its nets share the device "
                           "crema.set_mode_cpu/gpu chose when it was made.")
      .def_property_readonly("type", [](const SolverHandle& h) { return std::string(h.solver->type()); })
      .def_property_readonly("iter", [](const SolverHandle& h) { return h.solver->iter(); })
      .def_property_readonly("net", [](const SolverHandle& h) { return NetOf(h, h.solver->net()); })
      .def_property_readonly("test_nets",
                             [](const SolverHandle& h) {
                               std::vector<NetHandle> nets;
                               for (const auto& net : h.solver->test_nets()) nets.push_back(NetOf(h, net.get()));
                               return nets;
                             })
      .def(
          "step",
          [](const SolverHandle& h, int iterations) {
            CREMA_CHECK(iterations >= 0) << "step: the number of iterations must not be negative, got " << iterations;
            py::gil_scoped_release release;
            h.solver->Step(iterations);
          },
          py::arg("iterations"), "Runs that many training iterations (tests and snapshots as the solver schedules).")
      .def(
          "solve",
          [](const SolverHandle& h, const py::object& resume_file) {
            Solver::CheckMaxIter(h.solver->param());
            const std::string resume = resume_file.is_none()
                                           ? std::string()
                                           : py::module_::import("os").attr("fspath")(resume_file).cast<std::string>();
            py::gil_scoped_release release;
            h.solver->Solve(resume);
          },
          py::arg("resume_file") = py::none(),
          "Trains to max_iter, as crema train does (from a .solverstate when resume_file is given).")
      .def(
          "snapshot",
          [](const SolverHandle& h) {
            py::gil_scoped_release release;
            return h.solver->Snapshot();
          },
          "Writes <prefix>_iter_<iter>.caffemodel and .solverstate; returns the .solverstate's path.")
      .def(
          "restore",
          [](const SolverHandle& h, const py::object& state_file) {
            const std::string path = py::module_::import("os").attr("fspath")(state_file).cast<std::string>();
            CREMA_CHECK(FileExists(path)) << "snapshot file '" << path << "' does not exist";
            py::gil_scoped_release release;
            h.solver->Restore(path);
          },
          py::arg("state_file"), "Continues from a .solverstate (and the weights it names).")
      .def(
          "apply_update",
          [](const SolverHandle& h) {
            py::gil_scoped_release release;
            h.solver->ApplyUpdate();
          },
          "One update of every learnable parameter from its gradient (diff), at the current iteration's rate; "
          "the iteration count stays.")
      .def(
          "share_weights",
          [](const SolverHandle& h, const NetHandle& net) { net.net->ShareTrainedLayersWith(*h.solver->net()); },
          py::arg("net"), "Makes `net` use the training net's parameter memory for every layer the two share.")
      .def(
          "add_callback",
          [](const SolverHandle& h, py::object on_start, py::object on_gradients) {
            h.box->callbacks.push_back(std::make_unique<PythonCallback>(std::move(on_start), std::move(on_gradients)));
            h.solver->AddCallback(h.box->callbacks.back().get());
          },
          py::arg("on_start"), py::arg("on_gradients"),
          "Calls on_start() before each iteration's forward and backward passes and on_gradients() after them, "
          "before the update (either may be None).")
      .def(
          "test_all",
          [](const SolverHandle& h) {
            py::gil_scoped_release release;
            h.solver->TestAll();
          },
          "Runs every test net for its test_iter batches (the scores are logged).")
      .def("__repr__", [](const SolverHandle& h) {
        return "<crema.Solver " + std::string(h.solver->type()) + " at iteration " + std::to_string(h.solver->iter()) +
               ">";
      });
  BindRule<0>(module);
  BindRule<1>(module);
  BindRule<2>(module);
  BindRule<3>(module);
  BindRule<4>(module);
  BindRule<5>(module);
  module.def(
      "get_solver", [](const py::object& path) { return Typed(GetSolver(path)); }, py::arg("path"),
      "Reads a solver prototxt and builds the solver (an object of its rule's class, e.g. SGDSolver) and its nets.");
}

}  // namespace python
}  // namespace crema
