// ONNX models made by PyTorch (tests/data/onnx/make_pytorch_models.py: torch.onnx.export at opset 13, random weights
// from a fixed seed) imported by crema import's library and run: PyTorch's own outputs for the stored input, within
// 1e-4 of their largest magnitude. A ResNet-18-shaped net (BatchNormalization kept, strided 1x1 projections, Add of
// the shortcut, a padded MaxPool, global average pooling, Flatten and Gemm) and a GoogLeNet-shaped one (MaxPool
// with ceil_mode, inception concats, an average over padding counted as PyTorch counts it, Dropout, Softmax).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "core/context.hpp"
#include "net/net.hpp"
#include "onnx/import.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

std::vector<float> ReadFloats(const std::string& path) {
  const std::string bytes = test::FileBytes(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

std::vector<int> ReadShape(std::istream& in) {
  std::string line;
  std::getline(in, line);
  std::istringstream words(line);
  std::vector<int> shape;
  for (int dim; words >> dim;) shape.push_back(dim);
  return shape;
}

// The imported net of tests/data/onnx/NAME.onnx run on NAME.input.bin, against NAME.output.bin.
void ExpectPyTorchsOutputs(const std::string& name, const std::vector<std::string>& must_have_types) {
  const std::string base = test::SourceDir() + "/tests/data/onnx/" + name;
  const ImportedNet imported = ImportOnnxFile(base + ".onnx");
  std::ifstream shapes(base + ".shapes.txt");
  const std::vector<int> input_shape = ReadShape(shapes), output_shape = ReadShape(shapes);
  NetParameter param = imported.definition;
  param.mutable_state()->set_phase(TEST);
  for (LayerParameter& layer : *param.mutable_layer())
    if (layer.type() == "Input") layer.mutable_input_param()->mutable_shape(0)->set_dim(0, input_shape[0]);
  std::set<std::string> types;
  for (const LayerParameter& layer : param.layer()) types.insert(layer.type());
  for (const std::string& type : must_have_types) EXPECT_TRUE(types.count(type)) << name << " has no " << type;
  Net net(param, std::make_shared<Context>(Device::kCPU));
  net.CopyTrainedLayersFrom(imported.weights);
  ASSERT_EQ(net.input_blobs().size(), 1u);
  Blob& input = *net.input_blobs()[0];
  ASSERT_EQ(input.shape(), input_shape);
  const std::vector<float> x = ReadFloats(base + ".input.bin");
  ASSERT_EQ(x.size(), static_cast<size_t>(input.count()));
  std::copy(x.begin(), x.end(), input.mutable_cpu_data());
  net.Forward();
  ASSERT_EQ(net.output_blob_indices().size(), 1u);
  const Blob& output = *net.blobs()[net.output_blob_indices()[0]];
  EXPECT_EQ(output.shape(), output_shape);
  const std::vector<float> expected = ReadFloats(base + ".output.bin"), actual = PlainValues(output);
  ASSERT_EQ(actual.size(), expected.size());
  double largest = 0, worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    largest = std::max(largest, std::fabs(static_cast<double>(expected[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(actual[i]) - expected[i]));
  }
  EXPECT_GT(largest, 0.0);
  EXPECT_LE(worst, 1e-4 * largest) << name << ": largest " << largest;
  std::cout << "  " << name << ": worst difference " << worst / largest << " of the largest output" << std::endl;
}

TEST(OnnxImportTest, PyTorchResNet18ShapedGivesPyTorchsOutputs) {
  ExpectPyTorchsOutputs("resnet18_shaped", {"Convolution", "BatchNorm", "Scale", "Eltwise", "Pooling", "InnerProduct"});
}

TEST(OnnxImportTest, PyTorchGoogLeNetShapedGivesPyTorchsOutputs) {
  ExpectPyTorchsOutputs("googlenet_shaped", {"Convolution", "Concat", "Pooling", "InnerProduct", "Softmax"});
}

}  // namespace
}  // namespace crema
