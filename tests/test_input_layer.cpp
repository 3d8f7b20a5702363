#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/data/input.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

TEST(InputLayerTest, OneShapePerTop) {
  test::BlobList top;
  top.Add({});
  top.Add({});
  InputLayer layer(
      test::ParseLayer("name: 'data' type: 'Input' input_param { shape { dim: 2 dim: 3 dim: 4 } shape { dim: 5 } }"));
  layer.SetUp({}, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(top.pointers[1]->shape(), (std::vector<int>{5}));
}

TEST(InputLayerTest, OneShapeForEveryTop) {
  test::BlobList top;
  for (int i = 0; i < 3; ++i) top.Add({});
  InputLayer layer(test::ParseLayer("name: 'data' type: 'Input' input_param { shape { dim: 1 dim: 28 } }"));
  layer.SetUp({}, top.pointers);
  for (Blob* blob : top.pointers) EXPECT_EQ(blob->shape(), (std::vector<int>{1, 28}));
}

// The caller fills the data and may reshape the input between passes; the layer changes neither.
TEST(InputLayerTest, LeavesCallersDataAndShapeAlone) {
  test::BlobList top;
  top.Add({});
  InputLayer layer(test::ParseLayer("name: 'data' type: 'Input' input_param { shape { dim: 2 dim: 3 } }"));
  layer.SetUp({}, top.pointers);
  Blob* blob = top.pointers[0];
  test::FillGaussian(blob);
  const std::vector<float> values(blob->cpu_data(), blob->cpu_data() + blob->count());
  layer.Forward({}, top.pointers);
  EXPECT_EQ(std::vector<float>(blob->cpu_data(), blob->cpu_data() + blob->count()), values);
  layer.Backward(top.pointers, {}, {});
  blob->Reshape({7, 3});
  layer.Reshape({}, top.pointers);
  EXPECT_EQ(blob->shape(), (std::vector<int>{7, 3}));
}

TEST(InputLayerTest, NoShapeKeepsTheGivenShape) {
  test::BlobList top;
  top.Add({4, 4});
  InputLayer layer(test::ParseLayer("name: 'data' type: 'Input'"));
  layer.SetUp({}, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{4, 4}));
}

TEST(InputLayerTest, RejectsShapeCountThatMatchesNeitherRule) {
  test::BlobList top;
  for (int i = 0; i < 3; ++i) top.Add({});
  InputLayer layer(test::ParseLayer("name: 'data' type: 'Input' input_param { shape { dim: 1 } shape { dim: 2 } }"));
  const std::string message = test::ErrorMessage([&] { layer.SetUp({}, top.pointers); });
  EXPECT_NE(message.find("'data'"), std::string::npos) << message;
  EXPECT_NE(message.find("2 shapes"), std::string::npos) << message;
  EXPECT_NE(message.find("3 tops"), std::string::npos) << message;
}

TEST(InputLayerTest, RejectsNegativeDimensionAndBottoms) {
  test::BlobList top;
  top.Add({});
  InputLayer negative(test::ParseLayer("name: 'data' type: 'Input' input_param { shape { dim: 2 dim: -1 } }"));
  const std::string message = test::ErrorMessage([&] { negative.SetUp({}, top.pointers); });
  EXPECT_NE(message.find("input_param.shape"), std::string::npos) << message;

  Blob bottom({1});
  InputLayer with_bottom(test::ParseLayer("name: 'data' type: 'Input' input_param { shape { dim: 1 } }"));
  EXPECT_THROW(with_bottom.SetUp({&bottom}, top.pointers), Error);
}

}  // namespace
}  // namespace crema
