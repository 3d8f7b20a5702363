#include <gtest/gtest.h>

#include <algorithm>

#include "layers/layer_registry.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// The type is known (not "unknown type"), and a net that uses it stops at that layer, naming the Python module
// and class and why it cannot run.
TEST(PythonLayerTest, ANetWithAPythonLayerStopsWithAClearError) {
  const std::vector<std::string> types = LayerRegistry::Global().Types();
  EXPECT_NE(std::find(types.begin(), types.end(), "Python"), types.end());
  test::ExpectErrorContaining(
      [] {
        Net net(test::ParseNet(R"(
          layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 } } }
          layer { name: 'py' type: 'Python' bottom: 'data' top: 'out'
                  python_param { module: 'my_layers' layer: 'Normalize' } })"));
      },
      {"layer 'py' (Python)", "module 'my_layers'", "layer 'Normalize'", "Python bindings"});
}

}  // namespace
}  // namespace crema
