#include "layers/python.hpp"

namespace crema {

void PythonLayer::LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) {
  const PythonParameter& param = param_.python_param();
  CREMA_FAIL() << describe() << ": python_param names module '" << param.module() << "', layer '" << param.layer()
               << "'; Python layers need crema's Python bindings, which this build does not have yet";
}

}  // namespace crema
