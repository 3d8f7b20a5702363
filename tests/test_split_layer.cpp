#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/common/split.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

TEST(SplitLayerTest, EveryTopSeesTheBottom) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4}));
  for (int i = 0; i < 3; ++i) top.Add({});
  SplitLayer layer(test::ParseLayer("name: 'split' type: 'Split'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  for (Blob* t : top.pointers) {
    ASSERT_EQ(t->shape(), bottom.pointers[0]->shape());
    for (int i = 0; i < t->count(); ++i) EXPECT_EQ(t->cpu_data()[i], bottom.pointers[0]->cpu_data()[i]);
  }
}

TEST(SplitLayerTest, BackwardSumsTheTopGradients) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4}));
  for (int i = 0; i < 3; ++i) top.Add({});
  SplitLayer layer(test::ParseLayer("name: 'split' type: 'Split'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  for (int t = 0; t < 3; ++t) {
    for (int i = 0; i < 24; ++i) top.pointers[t]->mutable_cpu_diff()[i] = float(t + 1) * (i - 10);
  }
  bottom.pointers[0]->set_diff(1000.f);  // must be overwritten, not added to
  layer.Backward(top.pointers, {true}, bottom.pointers);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(bottom.pointers[0]->cpu_diff()[i], 6.f * (i - 10)) << i;
}

TEST(SplitLayerTest, SingleTopCopiesTheGradient) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({5}));
  top.Add({});
  SplitLayer layer(test::ParseLayer("name: 'split' type: 'Split'"));
  layer.SetUp(bottom.pointers, top.pointers);
  for (int i = 0; i < 5; ++i) top.pointers[0]->mutable_cpu_diff()[i] = i;
  layer.Backward(top.pointers, {true}, bottom.pointers);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(bottom.pointers[0]->cpu_diff()[i], float(i));
}

TEST(SplitLayerTest, Gradient) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 2}));
  top.Add({});
  top.Add({});
  SplitLayer layer(test::ParseLayer("name: 'split' type: 'Split'"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(SplitLayerTest, RejectsInPlaceAndMissingTops) {
  Blob shared({3});
  std::vector<Blob*> both{&shared};
  SplitLayer in_place(test::ParseLayer("name: 'split' type: 'Split'"));
  EXPECT_THROW(in_place.SetUp(both, both), Error);
  SplitLayer no_tops(test::ParseLayer("name: 'split' type: 'Split'"));
  EXPECT_THROW(no_tops.SetUp(both, {}), Error);
}

}  // namespace
}  // namespace crema
