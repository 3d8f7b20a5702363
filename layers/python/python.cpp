#include "layers/python/python.hpp"

#include <mutex>
#include <utility>

namespace crema {

namespace {

std::mutex& BackendMutex() {
  static std::mutex mutex;
  return mutex;
}

PythonLayerBackend& Backend() {
  static PythonLayerBackend backend;
  return backend;
}

}  // namespace

void SetPythonLayerBackend(PythonLayerBackend backend) {
  std::lock_guard<std::mutex> lock(BackendMutex());
  Backend() = std::move(backend);
}

PythonLayerBackend CurrentPythonLayerBackend() {
  std::lock_guard<std::mutex> lock(BackendMutex());
  return Backend();
}

std::string PythonLayer::describe_python() const {
  const PythonParameter& param = param_.python_param();
  return "layer '" + name() + "' (Python, module '" + param.module() + "', class '" + param.layer() + "')";
}

void PythonLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const PythonParameter& param = param_.python_param();
  CREMA_CHECK(!param.module().empty() && !param.layer().empty())
      << describe() << ": python_param must name the module and the class (python_param { module: \"...\" "
      << "layer: \"...\" })";
  // Called on a copy, outside the lock: the first call may start an interpreter that installs another backend.
  const PythonLayerBackend backend = CurrentPythonLayerBackend();
  CREMA_CHECK(backend) << describe_python() << ": this program cannot run Python layers (crema was built without "
                       << "Python, or the program does not embed it); run the net from Python (import crema) or "
                       << "with a crema tool built with the Python module";
  impl_ = backend(this);
  impl_->SetUp(bottom, top);
}

void PythonLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  impl_->Reshape(bottom, top);
}

void PythonLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  impl_->Forward(bottom, top);
}

void PythonLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  impl_->Backward(top, propagate_down, bottom);
}

}  // namespace crema
