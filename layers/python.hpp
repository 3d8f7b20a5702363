// Python: a layer written in Python (python_param: module, layer, param_str, share_in_parallel). The type is
// known so that nets naming it get a clear answer instead of "unknown type": running Python layers needs
// crema's Python bindings, which come in a later step, so building a net with one stops at this layer with an
// error naming the module and class.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class PythonLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Python"; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>&) override {}

 protected:
  void Forward_cpu(const std::vector<Blob*>&, const std::vector<Blob*>&) override {}
  void Backward_cpu(const std::vector<Blob*>&, const std::vector<bool>&, const std::vector<Blob*>&) override {}
};

}  // namespace crema
