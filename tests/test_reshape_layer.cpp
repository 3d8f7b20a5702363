#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/common/reshape.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter ReshapeParam(const std::string& reshape_param) {
  return test::ParseLayer("name: 'rs' type: 'Reshape' reshape_param { " + reshape_param + " }");
}

std::vector<int> ReshapedShape(const std::string& reshape_param, const std::vector<int>& shape) {
  test::BlobList bottom, top;
  bottom.Add(shape);
  top.Add({});
  ReshapeLayer layer(ReshapeParam(reshape_param));
  layer.SetUp(bottom.pointers, top.pointers);
  return top.pointers[0]->shape();
}

TEST(ReshapeLayerTest, Shapes) {
  EXPECT_EQ(ReshapedShape("shape { dim: 6 dim: 10 }", {2, 3, 2, 5}), (std::vector<int>{6, 10}));
  EXPECT_EQ(ReshapedShape("shape { dim: 0 dim: -1 }", {2, 3, 2, 5}), (std::vector<int>{2, 30}));
  EXPECT_EQ(ReshapedShape("shape { dim: -1 dim: 0 dim: 5 }", {2, 3, 2, 5}), (std::vector<int>{4, 3, 5}));
  EXPECT_EQ(ReshapedShape("shape { dim: 0 dim: 0 dim: 0 dim: 0 }", {2, 3, 2, 5}), (std::vector<int>{2, 3, 2, 5}));
  // axis and num_axes: only the chosen range is replaced.
  EXPECT_EQ(ReshapedShape("axis: 1 num_axes: 2 shape { dim: -1 }", {2, 3, 2, 5}), (std::vector<int>{2, 6, 5}));
  EXPECT_EQ(ReshapedShape("axis: 2 shape { dim: 10 }", {2, 3, 2, 5}), (std::vector<int>{2, 3, 10}));
  EXPECT_EQ(ReshapedShape("axis: 1 num_axes: 0 shape { dim: 1 }", {2, 3}), (std::vector<int>{2, 1, 3}));
  EXPECT_EQ(ReshapedShape("axis: -1 num_axes: 0 shape { dim: 1 dim: 1 }", {2, 3}), (std::vector<int>{2, 3, 1, 1}));
  EXPECT_EQ(ReshapedShape("axis: -2 num_axes: 1 shape { dim: 5 dim: 1 }", {2, 3, 5}), (std::vector<int>{2, 3, 5, 1}));
  EXPECT_EQ(ReshapedShape("axis: 0 num_axes: 1 shape { dim: 1 dim: -1 }", {4, 3}), (std::vector<int>{1, 4, 3}));
  EXPECT_EQ(ReshapedShape("axis: 1 shape { dim: 0 dim: -1 }", {2, 3, 4}), (std::vector<int>{2, 3, 4}));
}

TEST(ReshapeLayerTest, TopIsAViewOfDataAndDiff) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4}));
  top.Add({});
  ReshapeLayer layer(ReshapeParam("shape { dim: 4 dim: -1 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{4, 6}));
  EXPECT_EQ(top.pointers[0]->cpu_data(), bottom.pointers[0]->cpu_data());
  EXPECT_EQ(test::DataOf(*top.pointers[0]), test::DataOf(*bottom.pointers[0]));
  for (int i = 0; i < 24; ++i) top.pointers[0]->mutable_cpu_diff()[i] = 0.25f * i;
  layer.Backward(top.pointers, {true}, bottom.pointers);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(bottom.pointers[0]->cpu_diff()[i], 0.25f * i);
  // (The GradientChecker does not apply to a top that shares the bottom's diff; see test_flatten_layer.cpp.)
}

TEST(ReshapeLayerTest, FollowsAReshapedBottom) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  top.Add({});
  ReshapeLayer layer(ReshapeParam("shape { dim: 0 dim: -1 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  bottom.pointers[0]->Reshape({5, 3, 2});  // grows: new storage, so the view is re-made first
  layer.MakeTopViews(bottom.pointers, top.pointers);
  layer.Reshape(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{5, 6}));
  EXPECT_EQ(top.pointers[0]->cpu_data(), bottom.pointers[0]->cpu_data());
}

TEST(ReshapeLayerTest, RejectsBadParametersAndShapes) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  top.Add({});
  ReshapeLayer two_inferred(ReshapeParam("shape { dim: -1 dim: -1 }"));
  test::ExpectErrorContaining([&] { two_inferred.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'rs' (Reshape)", "reshape_param.shape (-1 -1)", "more than one -1"});
  ReshapeLayer negative(ReshapeParam("shape { dim: -2 dim: 12 }"));
  test::ExpectErrorContaining([&] { negative.SetUp(bottom.pointers, top.pointers); },
                              {"reshape_param.shape (-2 12)", "dimension 0 = -2"});
  ReshapeLayer wrong_count(ReshapeParam("shape { dim: 5 dim: 5 }"));
  test::ExpectErrorContaining([&] { wrong_count.SetUp(bottom.pointers, top.pointers); },
                              {"reshape_param.shape (5 5)", "5 5 (25)", "2 3 4 (24)"});
  ReshapeLayer not_divisible(ReshapeParam("shape { dim: 5 dim: -1 }"));
  test::ExpectErrorContaining([&] { not_divisible.SetUp(bottom.pointers, top.pointers); },
                              {"reshape_param.shape (5 -1)", "infer", "2 3 4 (24)"});
  ReshapeLayer copy_past_end(ReshapeParam("axis: 2 shape { dim: 0 dim: 0 }"));
  test::ExpectErrorContaining([&] { copy_past_end.SetUp(bottom.pointers, top.pointers); },
                              {"reshape_param.shape (0 0)", "copies dimension 3", "2 3 4 (24)"});
  ReshapeLayer axis(ReshapeParam("axis: 4 shape { dim: 1 }"));
  test::ExpectErrorContaining([&] { axis.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'rs' (Reshape)", "reshape_param.axis 4", "2 3 4 (24)"});
  ReshapeLayer negative_axis(ReshapeParam("axis: -5 shape { dim: 1 }"));
  test::ExpectErrorContaining([&] { negative_axis.SetUp(bottom.pointers, top.pointers); }, {"reshape_param.axis -5"});
  ReshapeLayer num_axes(ReshapeParam("axis: 1 num_axes: 3 shape { dim: 12 }"));
  test::ExpectErrorContaining([&] { num_axes.SetUp(bottom.pointers, top.pointers); },
                              {"reshape_param.num_axes 3", "2 3 4 (24)"});
  ReshapeLayer bad_num_axes(ReshapeParam("num_axes: -2 shape { dim: 24 }"));
  test::ExpectErrorContaining([&] { bad_num_axes.SetUp(bottom.pointers, top.pointers); },
                              {"reshape_param.num_axes -2"});
}

}  // namespace
}  // namespace crema
