// Python: a layer written in Python (python_param: module, layer, param_str, share_in_parallel), as Caffe's.
// crema's core knows no Python: the layer hands setup, reshape, forward and backward to a backend that crema's
// Python bindings install at run time (importing crema._crema does; so does the `crema` tool, which starts an
// embedded interpreter at its first Python layer). Without a backend, building a net with a Python layer stops
// at the layer with an error naming its module and class. On a GPU context the Python code runs on the host
// values, as in Caffe: the blobs copy between devices by themselves.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "layers/layer.hpp"

namespace crema {

// The Python object behind one PythonLayer. The backend's calls hold Python's lock themselves, and turn a Python
// exception into a crema::Error that names the layer and carries the traceback.
class PythonLayerImpl {
 public:
  virtual ~PythonLayerImpl() = default;
  virtual void SetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) = 0;
  virtual void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) = 0;
  virtual void Forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) = 0;
  virtual void Backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                        const std::vector<Blob*>& bottom) = 0;
};

class PythonLayer;
// Makes the Python object for `layer` (its python_param names module and class); throws crema::Error on failure.
using PythonLayerBackend = std::function<std::unique_ptr<PythonLayerImpl>(PythonLayer* layer)>;
// Installs (or, with nullptr, removes) the backend that Python layers set up afterwards use; thread-safe.
void SetPythonLayerBackend(PythonLayerBackend backend);
PythonLayerBackend CurrentPythonLayerBackend();

class PythonLayer : public HostOnGpu<Layer> {
 public:
  using HostOnGpu<Layer>::HostOnGpu;
  const char* type() const override { return "Python"; }
  // As in Caffe, a Python layer may run in place: its code sees the same blob as bottom and top.
  bool AllowsInPlace() const override { return true; }
  bool PlanMayRunInPlace() const override { return false; }
  bool Replayable() const override { return false; }  // the user's code may count, draw or write
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // "layer 'loss' (Python, module 'pyloss', class 'EuclideanLossLayer')": how errors name this layer.
  std::string describe_python() const;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  std::unique_ptr<PythonLayerImpl> impl_;
};

}  // namespace crema
