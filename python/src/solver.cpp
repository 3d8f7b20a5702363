// crema.Solver: train from Python. get_solver reads a solver prototxt as `crema train` does and builds the solver
// on the module's device; step, solve, snapshot and restore are the C++ solver's own.
#include "solver/solver.hpp"

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "io/proto_io.hpp"

namespace crema {
namespace python {

namespace {

struct SolverHandle {
  std::shared_ptr<Solver> solver;
};

// As `crema train --solver=path` builds its solver, but on the device crema.set_mode_* chose (pycaffe's rule:
// the file's solver_mode and device_id are not read), and with the solver's random_seed.
SolverHandle GetSolver(const py::object& path_object) {
  const std::string path = py::module_::import("os").attr("fspath")(path_object).cast<std::string>();
  CREMA_CHECK(FileExists(path)) << "solver file '" << path << "' does not exist";
  SolverParameter param;
  ReadProtoFromTextFile(path, &param);
  const Defaults& defaults = ModuleDefaults();
  param.set_solver_mode(defaults.device == Device::kGPU ? SolverParameter::GPU : SolverParameter::CPU);
  param.set_device_id(defaults.gpu_id);
  Solver::CheckNets(param, path);
  std::shared_ptr<Context> context =
      MakeContext(param.random_seed() >= 0 ? static_cast<uint64_t>(param.random_seed()) : Context::kDefaultSeed);
  std::shared_ptr<Solver> solver;
  {
    py::gil_scoped_release release;
    solver = CreateSolver(param, path, context);
    // The solver's own `weights`, as `crema train` copies them when its command line names none.
    for (const auto& weights : param.weights()) {
      CREMA_CHECK(FileExists(weights)) << "weights file '" << weights << "' (the solver's weights) does not exist";
      solver->net()->CopyTrainedLayersFrom(weights);
    }
  }
  return SolverHandle{solver};
}

NetHandle NetOf(const SolverHandle& h, Net* net) { return NetHandle{h.solver, net}; }

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
  module.def("get_solver", &GetSolver, py::arg("path"), "Reads a solver prototxt and builds the solver and its nets.");
}

}  // namespace python
}  // namespace crema
