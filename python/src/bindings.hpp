// What the binding files of crema's Python module (crema._crema) share: the handles Python holds, and the
// module's defaults for the nets and solvers it makes (docs/python.md).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>

#include "core/blob.hpp"
#include "core/context.hpp"
#include "net/net.hpp"

namespace crema {
namespace python {

namespace py = pybind11;

// A blob, layer or net shown to Python belongs to a Net or a Solver that Python may drop first (`b =
// crema.Net(...).blobs['data']`). Each handle holds a share of that owner, and every numpy view a handle gives out
// holds one too, so the memory a view points into lives as long as the view.
struct BlobHandle {
  std::shared_ptr<void> owner;
  Blob* blob = nullptr;
  std::string name;
};
struct LayerHandle {
  std::shared_ptr<void> owner;
  Layer* layer = nullptr;
};
struct NetHandle {
  std::shared_ptr<void> owner;
  Net* net = nullptr;
};

// The module's defaults (crema.set_mode_cpu / set_mode_gpu / set_device / set_random_seed), read when a Net or a
// Solver is made; nets and solvers made earlier keep their own context.
struct Defaults {
  Device device = Device::kCPU;
  int gpu_id = 0;
  uint64_t random_seed = Context::kDefaultSeed;
  // Memory plans (net/memory_plan.hpp) are off unless crema.set_memory_plan('share') turns them on: pycaffe's
  // scripts read any blob after a forward pass, and run forward and backward from any layer.
  bool plan_memory = false;
  bool recompute = false;  // set_memory_plan('recompute')
  bool fold = true;        // set_fold
  // set_precision: the precision of every net and solver made afterwards (over a solver's own), where it was called.
  bool precision_set = false;
  Precision precision = Precision::kFloat32;
};
Defaults& ModuleDefaults();
// A context on the default device, seeded with `random_seed`. Raises crema.Error, saying why, where the default
// device is a GPU that this build or this machine does not have.
std::shared_ptr<Context> MakeContext(uint64_t random_seed);

// The values of a blob on the host, as numpy sees them in crema's plain (row-major) order: a view of the blob's
// memory (writes land in the blob), or, for a blob the plan keeps in channel blocks between two oneDNN layers, a
// read-only copy. The pointer is fetched on each call, so a view made after a reshape sees the new storage.
py::array HostArray(const BlobHandle& handle, bool diff);

void BindBlob(py::module_& module);
void BindNet(py::module_& module);
void BindSolver(py::module_& module);
void BindIo(py::module_& module);
void BindPythonLayer(py::module_& module);

}  // namespace python
}  // namespace crema
