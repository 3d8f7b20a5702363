#include <gtest/gtest.h>

#include <vector>

#include "layers/common/silence.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

TEST(SilenceLayerTest, TakesAnyBottomsAndProducesNothing) {
  test::BlobList bottom;
  test::FillGaussian(bottom.Add({2, 3}));
  test::FillGaussian(bottom.Add({4}));
  test::FillGaussian(bottom.Add({1, 2, 3}));
  const std::vector<float> before = test::DataOf(*bottom.pointers[0]);
  SilenceLayer layer(test::ParseLayer("name: 'quiet' type: 'Silence'"));
  layer.SetUp(bottom.pointers, {});
  EXPECT_EQ(layer.Forward(bottom.pointers, {}), 0.f);
  EXPECT_EQ(test::DataOf(*bottom.pointers[0]), before);
  // Reshaped bottoms are fine too.
  bottom.pointers[1]->Reshape({7, 2});
  layer.Reshape(bottom.pointers, {});
}

TEST(SilenceLayerTest, BackwardWritesZeroGradients) {
  test::BlobList bottom;
  bottom.Add({2, 3});
  bottom.Add({4});
  SilenceLayer layer(test::ParseLayer("name: 'quiet' type: 'Silence'"));
  layer.SetUp(bottom.pointers, {});
  for (Blob* b : bottom.pointers) b->set_diff(3.f);
  layer.Backward({}, {true, false}, bottom.pointers);
  for (float d : test::DiffOf(*bottom.pointers[0])) EXPECT_EQ(d, 0.f);
  for (float d : test::DiffOf(*bottom.pointers[1])) EXPECT_EQ(d, 3.f);  // not asked for: left alone
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, {});
}

TEST(SilenceLayerTest, RejectsTopsAndMissingBottoms) {
  test::BlobList bottom, top;
  bottom.Add({2});
  top.Add({});
  SilenceLayer with_top(test::ParseLayer("name: 'quiet' type: 'Silence'"));
  test::ExpectErrorContaining([&] { with_top.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'quiet' (Silence)", "0 top"});
  SilenceLayer no_bottom(test::ParseLayer("name: 'quiet' type: 'Silence'"));
  test::ExpectErrorContaining([&] { no_bottom.SetUp({}, {}); }, {"layer 'quiet' (Silence)", "at least 1 bottom"});
}

}  // namespace
}  // namespace crema
