#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "layers/data/dummy_data.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

std::unique_ptr<DummyDataLayer> MakeDummyData(const std::string& param, test::BlobList* top, int tops) {
  for (int t = 0; t < tops; ++t) top->Add({});
  auto layer = std::make_unique<DummyDataLayer>(
      test::ParseLayer("name: 'd' type: 'DummyData' dummy_data_param { " + param + " }"));
  test::BlobList bottom;
  layer->SetUp(bottom.pointers, top->pointers);
  return layer;
}

TEST(DummyDataLayerTest, ShapesAndConstantFillersPerTopOrForAll) {
  test::BlobList top;
  auto layer =
      MakeDummyData("shape { dim: 2 dim: 3 } shape { dim: 4 } data_filler { type: 'constant' value: 7 }", &top, 2);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(top.pointers[1]->shape(), (std::vector<int>{4}));
  for (Blob* blob : top.pointers)
    for (float v : test::DataOf(*blob)) EXPECT_EQ(v, 7.f);
  // The legacy 4-d form, one value for both tops where given once; no filler means zeros.
  test::BlobList legacy;
  MakeDummyData("num: 2 channels: 3 channels: 1 height: 4 width: 5", &legacy, 2);
  EXPECT_EQ(legacy.pointers[0]->shape(), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(legacy.pointers[1]->shape(), (std::vector<int>{2, 1, 4, 5}));
  EXPECT_EQ(test::AbsSum(test::DataOf(*legacy.pointers[1])), 0.0);
}

// A constant top is written once; a random filler draws anew on every forward pass, with the filler's
// distribution.
TEST(DummyDataLayerTest, RandomFillersDrawEveryPass) {
  test::BlobList top;
  auto layer = MakeDummyData(
      "shape { dim: 4000 } data_filler { type: 'constant' value: 2 } data_filler { type: 'uniform' min: 1 max: 3 }",
      &top, 2);
  test::BlobList bottom;
  const std::vector<float> first = test::DataOf(*top.pointers[1]);
  top.pointers[0]->set_data(-1.f);
  layer->Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->cpu_data()[0], -1.f);  // not refilled
  const std::vector<float> second = test::DataOf(*top.pointers[1]);
  EXPECT_NE(first, second);
  double sum = 0;
  for (float v : second) {
    ASSERT_GE(v, 1.f);
    ASSERT_LE(v, 3.f);
    sum += v;
  }
  EXPECT_NEAR(sum / second.size(), 2.0, 0.05);
}

TEST(DummyDataLayerTest, BadParametersAreNamed) {
  const auto error = [](const std::string& param, int tops) {
    test::BlobList top;
    return test::ErrorMessage([&] { MakeDummyData(param, &top, tops); });
  };
  const std::string shapeless = error("", 1);
  EXPECT_EQ(shapeless.find("layer 'd' (DummyData)"), 0u) << shapeless;
  EXPECT_NE(shapeless.find("needs a shape"), std::string::npos) << shapeless;
  EXPECT_NE(error("shape { dim: 2 } shape { dim: 3 }", 3).find("dummy_data_param.shape has 2 values for 3 tops"),
            std::string::npos);
  EXPECT_NE(error("shape { dim: 2 } num: 2", 1).find("not both"), std::string::npos);
  EXPECT_NE(error("num: 1 channels: 1 height: 1", 1).find("dummy_data_param.width"), std::string::npos);
  EXPECT_NE(error("shape { dim: 2 } data_filler { type: 'nope' }", 1).find("data_filler"), std::string::npos);
}

}  // namespace
}  // namespace crema
