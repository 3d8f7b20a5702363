// Python layers in the `crema` tool: the tool links this file and crema._crema's binding sources (a second
// compilation of them, against the tool's own crema_core, so that one process never holds two copies of crema).
// Until a net has a Python layer nothing happens; the first one starts an interpreter, makes crema._crema from the
// linked-in bindings (whose initialisation installs the real backend, python_layer.cpp), imports the `crema`
// package over it so that layer code can `import crema`, and hands the layer on.
#include <pybind11/embed.h>

#include <mutex>
#include <string>

#include "bindings.hpp"
#include "layers/python/python.hpp"

// The module's initialisation function, from module.cpp's PYBIND11_MODULE.
extern "C" PyObject* PyInit__crema();

namespace crema {
namespace python {

namespace {

// Where `import crema` finds the package's Python files when PYTHONPATH does not: the build tree, then the
// install directory (both known when the tool is built).
const char* const kPackageFolders[] = {CREMA_PYTHON_BUILD_FOLDER, CREMA_PYTHON_INSTALL_FOLDER};

void StartInterpreter() {
  // No Python signal handlers: Ctrl-C stays the solver's (snapshot and stop), not a KeyboardInterrupt.
  py::initialize_interpreter(/*init_signal_handlers=*/false, 0, nullptr, /*add_program_dir_to_path=*/false);
  {
    py::module_ sys = py::module_::import("sys");
    // Registered before anything imports crema, so that `from ._crema import ...` finds these bindings and the
    // package's extension file (a crema of its own) is never loaded.
    auto extension = py::reinterpret_steal<py::module_>(PyInit__crema());
    if (!extension) throw py::error_already_set();
    extension.attr("__name__") = "crema._crema";
    sys.attr("modules")["crema._crema"] = extension;
    py::list path = sys.attr("path");
    for (const char* folder : kPackageFolders) path.append(folder);
    try {
      py::module_ package = py::module_::import("crema");
      package.attr("_crema") = extension;
    } catch (py::error_already_set& error) {
      // Without the package's files, `import crema` gets the bindings themselves (Net, Blob, Layer, TRAIN, ...).
      if (!error.matches(PyExc_ModuleNotFoundError)) throw;
      sys.attr("modules")["crema"] = extension;
    }
  }
  // The interpreter's lock is taken by each Python layer call (from whichever thread runs the net) and released
  // here for good; the interpreter lives until the process ends.
  PyEval_SaveThread();
}

std::unique_ptr<PythonLayerImpl> StartPythonAndMake(PythonLayer* layer) {
  static std::once_flag started;
  try {
    std::call_once(started, StartInterpreter);
  } catch (py::error_already_set& error) {
    CREMA_FAIL() << layer->describe_python() << ": starting the embedded Python interpreter failed: " << error.what();
  }
  // Initialising crema._crema replaced this function with the real backend.
  const PythonLayerBackend backend = CurrentPythonLayerBackend();
  const auto* starter = backend.target<decltype(&StartPythonAndMake)>();
  CREMA_CHECK(backend && !(starter && *starter == &StartPythonAndMake))
      << layer->describe_python() << ": the embedded crema._crema did not install its Python layer backend";
  return backend(layer);
}

// Set when the tool starts: this file is linked in as an object file, never as an archive member that the linker
// could drop, and installing costs nothing until a net has a Python layer.
struct InstallStarter {
  InstallStarter() { SetPythonLayerBackend(&StartPythonAndMake); }
} install_starter;

}  // namespace
}  // namespace python
}  // namespace crema
