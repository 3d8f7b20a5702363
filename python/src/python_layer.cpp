// Layers written in Python (`type: "Python"`, docs/python.md): the backend that layers/python/python.hpp hands setup,
// reshape, forward and backward to, installed when crema._crema is initialised (imported from Python, or started
// by the `crema` tool's embedded interpreter, embed.cpp). The layer's class is pycaffe's: setup(bottom, top),
// reshape(bottom, top), forward(bottom, top), backward(top, propagate_down, bottom), with lists of crema.Blob,
// and the attributes param_str and phase.
#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "layers/python/python.hpp"

namespace crema {
namespace python {

namespace {

// A Python exception as crema reports it: the layer's description, then Python's own traceback.
Error PythonError(const PythonLayer& layer, const char* call, py::error_already_set& error) {
  std::string traceback;
  try {
    // An exception raised from C (a failed import) may come without a traceback object.
    const auto or_none = [](const py::object& part) -> py::object { return part ? part : py::none(); };
    py::object lines =
        py::module_::import("traceback")
            .attr("format_exception")(or_none(error.type()), or_none(error.value()), or_none(error.trace()));
    traceback = py::str("").attr("join")(lines).cast<std::string>();
  } catch (const std::exception&) {
    traceback = error.what();  // pybind11's own rendering, should the traceback module itself fail
  }
  while (!traceback.empty() && traceback.back() == '\n') traceback.pop_back();
  return Error(layer.describe_python() + ": " + call + " raised a Python exception:\n" + traceback);
}

class PythonObjectLayer : public PythonLayerImpl {
 public:
  PythonObjectLayer(PythonLayer* layer, py::object self) : layer_(layer), self_(std::move(self)) {}

  // The object may go while Python's lock is released (a net whose construction failed at a later layer, in a
  // binding that let go of the lock), and must not outlive the interpreter.
  ~PythonObjectLayer() override {
    if (!Py_IsInitialized()) {
      self_.release();
      return;
    }
    py::gil_scoped_acquire acquire;
    self_ = py::object();
  }

  void SetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    Call("setup", [&] { self_.attr("setup")(Blobs(bottom, true), Blobs(top, false)); });
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    Call("reshape", [&] { self_.attr("reshape")(Blobs(bottom, true), Blobs(top, false)); });
  }
  void Forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    Call("forward", [&] { self_.attr("forward")(Blobs(bottom, true), Blobs(top, false)); });
  }
  void Backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom) override {
    Call("backward", [&] {
      py::list propagate;
      for (const bool value : propagate_down) propagate.append(py::bool_(value));
      self_.attr("backward")(Blobs(top, false), propagate, Blobs(bottom, true));
    });
  }

 private:
  template <typename Body>
  void Call(const char* name, Body body) {
    py::gil_scoped_acquire acquire;
    try {
      body();
    } catch (py::error_already_set& error) {
      throw PythonError(*layer_, (std::string(name) + "()").c_str(), error);
    }
  }

  // The blobs of one call, named as the prototxt names them. They belong to the net, which Python may not hold
  // (crema train): a layer must not keep them past the call (copies of their values it may keep).
  py::list Blobs(const std::vector<Blob*>& blobs, bool bottoms) const {
    const LayerParameter& param = layer_->layer_param();
    py::list list;
    for (size_t i = 0; i < blobs.size(); ++i) {
      const int index = static_cast<int>(i);
      std::string name = bottoms ? (index < param.bottom_size() ? param.bottom(index) : "")
                                 : (index < param.top_size() ? param.top(index) : "");
      list.append(BlobHandle{nullptr, blobs[i], std::move(name)});
    }
    return list;
  }

  PythonLayer* layer_;
  py::object self_;
};

std::unique_ptr<PythonLayerImpl> MakePythonLayer(PythonLayer* layer) {
  py::gil_scoped_acquire acquire;
  const PythonParameter& param = layer->layer_param().python_param();
  try {
    py::object cls = py::module_::import(param.module().c_str()).attr(param.layer().c_str());
    py::object self = cls();
    // A class derived from crema.Layer sees its own layer through the base class (name, type, blobs).
    py::object layer_type = py::module_::import("crema._crema").attr("Layer");
    if (py::isinstance(self, layer_type)) self.cast<LayerHandle&>().layer = layer;
    self.attr("param_str") = py::str(param.param_str());
    self.attr("phase") = static_cast<int>(layer->phase());
    return std::make_unique<PythonObjectLayer>(layer, std::move(self));
  } catch (py::error_already_set& error) {
    Error failure = PythonError(*layer, "loading the class", error);
    if (!error.matches(PyExc_ImportError)) throw failure;
    // The usual cause: the module's folder is not on the path the interpreter searches.
    const std::string path = py::str(py::module_::import("sys").attr("path")).cast<std::string>();
    throw Error(std::string(failure.what()) + "\n(modules are looked up on PYTHONPATH; sys.path is " + path + ")");
  }
}

}  // namespace

void BindPythonLayer(py::module_& module) {
  // Python layers derive from crema.Layer, as from caffe.Layer in pycaffe: crema.Layer() then makes a layer that
  // is not attached yet, which the backend attaches to its C++ layer right after making the object.
  py::object layer_type = module.attr("Layer");
  layer_type.attr("__init__") =
      py::cpp_function([](py::detail::value_and_holder& self) { self.value_ptr() = new LayerHandle(); },
                       py::name("__init__"), py::is_method(layer_type), py::detail::is_new_style_constructor());
  SetPythonLayerBackend(&MakePythonLayer);
}

}  // namespace python
}  // namespace crema
