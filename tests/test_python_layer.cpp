#include <gtest/gtest.h>

#include <algorithm>

#include "layers/layer_registry.hpp"
#include "layers/python/python.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// The type is known (not "unknown type"), and in a program without Python (no backend installed: this test, a
// tool built without the Python module) a net that uses it stops at that layer, naming the module and class.
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
      {"layer 'py' (Python, module 'my_layers', class 'Normalize')", "cannot run Python layers"});
}

// What the Python bindings install, done in C++: the layer hands every call to the backend's object, and a top with
// a loss_weight is a loss through the base class (its diff holds the weight when backward runs).
class SumLoss : public PythonLayerImpl {
 public:
  void SetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override { ++setups; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    ++reshapes;
    top[0]->Reshape(std::vector<int>{});
  }
  void Forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    float sum = 0;
    for (int i = 0; i < bottom[0]->count(); ++i) sum += bottom[0]->cpu_data()[i];
    top[0]->mutable_cpu_data()[0] = sum;
  }
  void Backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom) override {
    for (int i = 0; i < bottom[0]->count(); ++i) bottom[0]->mutable_cpu_diff()[i] = top[0]->cpu_diff()[0];
  }
  static int setups, reshapes;
};
int SumLoss::setups = 0;
int SumLoss::reshapes = 0;

TEST(PythonLayerTest, AnInstalledBackendRunsTheLayerAndItsLoss) {
  std::string module;
  SetPythonLayerBackend([&module](PythonLayer* layer) {
    module = layer->layer_param().python_param().module();
    return std::unique_ptr<PythonLayerImpl>(new SumLoss);
  });
  Net net(test::ParseNet(R"(
    force_backward: true
    layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 } } }
    layer { name: 'loss' type: 'Python' bottom: 'data' top: 'loss' loss_weight: 0.5
            python_param { module: 'my_losses' layer: 'Sum' } })"));
  SetPythonLayerBackend(nullptr);
  EXPECT_EQ(module, "my_losses");
  EXPECT_EQ(SumLoss::setups, 1);
  EXPECT_GE(SumLoss::reshapes, 1);
  Blob* data = net.blob_by_name("data");
  for (int i = 0; i < data->count(); ++i) data->mutable_cpu_data()[i] = static_cast<float>(i);
  EXPECT_FLOAT_EQ(net.ForwardBackward(), 0.5f * 15);
  for (int i = 0; i < data->count(); ++i) EXPECT_FLOAT_EQ(data->cpu_diff()[i], 0.5f);
}

// A Python layer may run in place, as in Caffe (top = bottom): its code sees the one blob as both.
class DoubleInPlace : public PythonLayerImpl {
 public:
  void SetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {}
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
  }
  void Forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    for (int i = 0; i < bottom[0]->count(); ++i) top[0]->mutable_cpu_data()[i] = 2 * bottom[0]->cpu_data()[i];
  }
  void Backward(const std::vector<Blob*>& top, const std::vector<bool>&, const std::vector<Blob*>& bottom) override {
    for (int i = 0; i < bottom[0]->count(); ++i) bottom[0]->mutable_cpu_diff()[i] = 2 * top[0]->cpu_diff()[i];
  }
};

TEST(PythonLayerTest, RunsInPlace) {
  SetPythonLayerBackend([](PythonLayer*) { return std::unique_ptr<PythonLayerImpl>(new DoubleInPlace); });
  Net net(test::ParseNet(R"(
    layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 } } }
    layer { name: 'double' type: 'Python' bottom: 'data' top: 'data'
            python_param { module: 'my_layers' layer: 'Double' } })"));
  SetPythonLayerBackend(nullptr);
  Blob* data = net.blob_by_name("data");
  for (int i = 0; i < data->count(); ++i) data->mutable_cpu_data()[i] = static_cast<float>(i);
  net.Forward();
  for (int i = 0; i < data->count(); ++i) EXPECT_FLOAT_EQ(data->cpu_data()[i], 2.f * i);
}

}  // namespace
}  // namespace crema
