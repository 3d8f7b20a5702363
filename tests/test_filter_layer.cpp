#include <gtest/gtest.h>

#include <vector>

#include "layers/common/filter.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

void SetSelector(Blob* selector, const std::vector<float>& values) {
  std::copy(values.begin(), values.end(), selector->mutable_cpu_data());
}

TEST(FilterLayerTest, KeepsTheSelectedItemsOfEveryDataBottom) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({5, 2, 3}), 0.f, 1.f, 1);
  test::FillGaussian(bottom.Add({5}), 0.f, 1.f, 2);
  SetSelector(bottom.Add({5, 1}), {0, 1, 1, 0, 1});
  top.Add({});
  top.Add({});
  FilterLayer layer(test::ParseLayer("name: 'f' type: 'Filter'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{3, 2, 3}));
  ASSERT_EQ(top.pointers[1]->shape(), (std::vector<int>{3}));
  const int kept[] = {1, 2, 4};
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(top.pointers[0]->cpu_data()[k * 6 + i], bottom.pointers[0]->cpu_data()[kept[k] * 6 + i]);
    EXPECT_EQ(top.pointers[1]->cpu_data()[k], bottom.pointers[1]->cpu_data()[kept[k]]);
  }
  // Gradients go back to the kept items; the dropped ones get zero.
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers, 0);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers, 1);
  top.pointers[0]->set_diff(1.f);
  layer.Backward(top.pointers, {true, false, false}, bottom.pointers);
  for (int n : {0, 3}) EXPECT_EQ(bottom.pointers[0]->cpu_diff()[n * 6], 0.f);
  for (int n : kept) EXPECT_EQ(bottom.pointers[0]->cpu_diff()[n * 6], 1.f);
}

// In a net the selector's values (not its shape) decide the top's shape: the net reshapes Filter before every
// forward pass, so the layers after it follow.
TEST(FilterLayerTest, InANetTheKeptCountFollowsTheSelectorOnEveryPass) {
  Net net(test::ParseNet(R"(
    layer { name: 'input' type: 'Input' top: 'data' top: 'select'
            input_param { shape { dim: 4 dim: 3 } shape { dim: 4 } } }
    layer { name: 'f' type: 'Filter' bottom: 'data' bottom: 'select' top: 'kept' }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'kept' top: 'out'
            inner_product_param { num_output: 2 weight_filler { type: 'gaussian' } } })"));
  test::FillGaussian(net.blob_by_name("data"), 0.f, 1.f, 3);
  for (const std::vector<float>& select : {std::vector<float>{1, 0, 1, 1}, {0, 1, 0, 0}, {1, 1, 1, 1}}) {
    SetSelector(net.blob_by_name("select"), select);
    net.Forward();
    int kept = 0;
    for (float s : select) kept += s != 0.f;
    EXPECT_EQ(net.blob_by_name("kept")->shape(), (std::vector<int>{kept, 3}));
    EXPECT_EQ(net.blob_by_name("out")->shape(), (std::vector<int>{kept, 2}));
  }
}

TEST(FilterLayerTest, MismatchedItemsAndTopsAreNamed) {
  test::BlobList bottom, top;
  bottom.Add({4, 2});
  bottom.Add({3});
  top.Add({});
  FilterLayer layer(test::ParseLayer("name: 'f' type: 'Filter'"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'f' (Filter)", "4 2 (8)", "has 3"});
  top.Add({});
  FilterLayer tops(test::ParseLayer("name: 'f' type: 'Filter'"));
  test::ExpectErrorContaining([&] { tops.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'f' (Filter)", "one top per data bottom"});
}

}  // namespace
}  // namespace crema
