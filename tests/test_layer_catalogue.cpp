// The catalogue is complete: every layer type registered in layers/layer_list.cpp has a test file of its own
// and a row in docs/layers.md. A type added without either fails here, naming what is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "layers/layer_registry.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// "InnerProduct" -> "innerproduct": type names and file names compared without case and underscores, so that
// test_inner_product_layer.cpp, test_relu_layer.cpp and test_hdf5_data_layer.cpp all match their types.
std::string Squashed(const std::string& name) {
  std::string result;
  for (char c : name)
    if (c != '_') result += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return result;
}

// Every layer type of Caffe's catalogue is known (the unknown-type error lists them all), so a Caffe prototxt
// never stops at "unknown type" for one of Caffe's own layers.
TEST(LayerCatalogueTest, EveryCaffeTypeIsKnownAndListedInTheUnknownTypeError) {
  const std::vector<std::string> caffe_types = {"AbsVal",
                                                "Accuracy",
                                                "ArgMax",
                                                "BNLL",
                                                "BatchNorm",
                                                "BatchReindex",
                                                "Bias",
                                                "Clip",
                                                "Concat",
                                                "ContrastiveLoss",
                                                "Convolution",
                                                "Crop",
                                                "Data",
                                                "Deconvolution",
                                                "Dropout",
                                                "DummyData",
                                                "ELU",
                                                "Eltwise",
                                                "Embed",
                                                "EuclideanLoss",
                                                "Exp",
                                                "Filter",
                                                "Flatten",
                                                "HDF5Data",
                                                "HDF5Output",
                                                "HingeLoss",
                                                "Im2col",
                                                "ImageData",
                                                "InfogainLoss",
                                                "InnerProduct",
                                                "Input",
                                                "LRN",
                                                "LSTM",
                                                "LSTMUnit",
                                                "Log",
                                                "MVN",
                                                "MemoryData",
                                                "MultinomialLogisticLoss",
                                                "PReLU",
                                                "Parameter",
                                                "Pooling",
                                                "Power",
                                                "Python",
                                                "RNN",
                                                "ReLU",
                                                "Reduction",
                                                "Reshape",
                                                "SPP",
                                                "Scale",
                                                "Sigmoid",
                                                "SigmoidCrossEntropyLoss",
                                                "Silence",
                                                "Slice",
                                                "Softmax",
                                                "SoftmaxWithLoss",
                                                "Split",
                                                "Swish",
                                                "TanH",
                                                "Threshold",
                                                "Tile",
                                                "WindowData"};
  ASSERT_EQ(caffe_types.size(), 61u);
  const std::vector<std::string> registered = LayerRegistry::Global().Types();
  for (const std::string& type : caffe_types)
    EXPECT_NE(std::find(registered.begin(), registered.end(), type), registered.end()) << type;
  const std::string message = test::ErrorMessage([] {
    LayerRegistry::Global().Create(test::ParseLayer("name: 'x' type: 'Convolutoin'"), {}, std::make_shared<Context>());
  });
  for (const std::string& type : caffe_types) EXPECT_NE(message.find(type), std::string::npos) << type;
}

TEST(LayerCatalogueTest, EveryRegisteredTypeHasATestFile) {
  const std::filesystem::path tests = std::filesystem::path(test::SourceDir()) / "tests";
  std::vector<std::string> test_files;  // squashed names of tests/test_<name>_layer.cpp
  for (const auto& entry : std::filesystem::directory_iterator(tests)) {
    const std::string file = entry.path().filename().string();
    const std::string prefix = "test_", suffix = "_layer.cpp";
    if (file.size() > prefix.size() + suffix.size() && file.rfind(prefix, 0) == 0 &&
        file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string text = test::FileBytes(entry.path().string());
      if (text.find("TEST(") != std::string::npos || text.find("TEST_F(") != std::string::npos)
        test_files.push_back(Squashed(file.substr(prefix.size(), file.size() - prefix.size() - suffix.size())));
    }
  }
  for (const std::string& type : LayerRegistry::Global().Types()) {
    EXPECT_NE(std::find(test_files.begin(), test_files.end(), Squashed(type)), test_files.end())
        << "layer type '" << type << "' is registered but has no tests/test_<name>_layer.cpp with tests in it";
  }
}

TEST(LayerCatalogueTest, EveryRegisteredTypeHasARowInTheCatalogueDoc) {
  const std::string doc = test::FileBytes(test::SourceDir() + "/docs/layers.md");
  ASSERT_FALSE(doc.empty()) << "docs/layers.md could not be read";
  for (const std::string& type : LayerRegistry::Global().Types()) {
    EXPECT_NE(doc.find("\n| `" + type + "` |"), std::string::npos)
        << "layer type '" << type << "' is registered but docs/layers.md has no row '| `" << type << "` |'";
  }
}

// layers/ is in family folders: every registered type's code is one <name>.cpp in exactly one of them (matched as
// the test files are), and only the contract, the registry and helpers shared across families stay at the top.
TEST(LayerCatalogueTest, EveryRegisteredTypeLivesInOneFamilyFolder) {
  namespace fs = std::filesystem;
  const fs::path layers = fs::path(test::SourceDir()) / "layers";
  const std::vector<std::string> families = {"common",        "data",   "loss",      "neuron",
                                             "normalization", "python", "recurrent", "vision"};
  std::map<std::string, std::vector<std::string>> homes;  // squashed file name -> the families holding it
  for (const std::string& family : families) {
    ASSERT_TRUE(fs::is_directory(layers / family)) << (layers / family);
    for (const auto& entry : fs::directory_iterator(layers / family))
      if (entry.path().extension() == ".cpp") homes[Squashed(entry.path().stem().string())].push_back(family);
  }
  for (const std::string& type : LayerRegistry::Global().Types()) {
    const auto found = homes.find(Squashed(type));
    ASSERT_NE(found, homes.end()) << "layer type '" << type << "' has no <name>.cpp in any of layers/'s family folders";
    EXPECT_EQ(found->second.size(), 1u) << "layer type '" << type << "' has a <name>.cpp in several family folders";
  }
  size_t top_files = 0;
  for (const auto& entry : fs::directory_iterator(layers)) top_files += entry.is_regular_file();
  EXPECT_LE(top_files, 12u) << "layers/ holds " << top_files
                            << " files at its top; a layer's code belongs in its family";
}

}  // namespace
}  // namespace crema
