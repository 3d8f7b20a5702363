#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/common/flatten.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

std::vector<int> FlattenedShape(const std::string& flatten_param, const std::vector<int>& shape) {
  test::BlobList bottom, top;
  bottom.Add(shape);
  top.Add({});
  FlattenLayer layer(test::ParseLayer("name: 'flat' type: 'Flatten' " + flatten_param));
  layer.SetUp(bottom.pointers, top.pointers);
  return top.pointers[0]->shape();
}

TEST(FlattenLayerTest, Shapes) {
  EXPECT_EQ(FlattenedShape("", {2, 3, 6, 5}), (std::vector<int>{2, 90}));
  EXPECT_EQ(FlattenedShape("flatten_param { axis: 2 }", {2, 3, 6, 5}), (std::vector<int>{2, 3, 30}));
  EXPECT_EQ(FlattenedShape("flatten_param { end_axis: -2 }", {2, 3, 6, 5}), (std::vector<int>{2, 18, 5}));
  EXPECT_EQ(FlattenedShape("flatten_param { axis: 0 }", {2, 3, 6, 5}), (std::vector<int>{180}));
  EXPECT_EQ(FlattenedShape("flatten_param { axis: -3 end_axis: 2 }", {2, 3, 6, 5}), (std::vector<int>{2, 18, 5}));
  EXPECT_EQ(FlattenedShape("flatten_param { axis: 1 end_axis: 1 }", {2, 3, 6, 5}), (std::vector<int>{2, 3, 6, 5}));
}

TEST(FlattenLayerTest, ForwardKeepsValuesInOrder) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4}));
  top.Add({});
  FlattenLayer layer(test::ParseLayer("name: 'flat' type: 'Flatten'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const Blob& x = *bottom.pointers[0];
  const Blob& y = *top.pointers[0];
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 3; ++c) {
      for (int h = 0; h < 4; ++h) EXPECT_EQ(y.cpu_data()[n * 12 + c * 4 + h], x.data_at(n, c, h));
    }
  }
}

TEST(FlattenLayerTest, BackwardPassesGradientThrough) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 2, 2}));
  top.Add({});
  FlattenLayer layer(test::ParseLayer("name: 'flat' type: 'Flatten'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  for (int i = 0; i < 24; ++i) top.pointers[0]->mutable_cpu_diff()[i] = 0.5f * i;
  layer.Backward(top.pointers, {true}, bottom.pointers);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(bottom.pointers[0]->cpu_diff()[i], 0.5f * i);
  // (test::GradientChecker does not apply here: it zeroes the bottom's diff after writing the top's, which for
  // a layer whose top shares the bottom's diff erases the top gradient before backward runs.)
}

TEST(FlattenLayerTest, FollowsTheBottomWhenItIsReshaped) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  top.Add({});
  FlattenLayer layer(test::ParseLayer("name: 'flat' type: 'Flatten'"));
  layer.SetUp(bottom.pointers, top.pointers);
  bottom.pointers[0]->Reshape({5, 3, 4});  // grows: the bottom gets new storage
  test::FillGaussian(bottom.pointers[0]);
  // The top still views the old storage, which it may not grow past: refused, not silently reallocated.
  test::ExpectErrorContaining([&] { layer.Reshape(bottom.pointers, top.pointers); },
                              {"5 12", "view of 24 values"});
  // Whoever runs the layer re-makes its views first (a net does so for every step whose bottoms changed).
  layer.MakeTopViews(bottom.pointers, top.pointers);
  layer.Reshape(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{5, 12}));
  layer.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->cpu_data(), bottom.pointers[0]->cpu_data());
  EXPECT_EQ(top.pointers[0]->cpu_data()[59], bottom.pointers[0]->cpu_data()[59]);
}

// axis just after end_axis flattens nothing and inserts a size-1 axis, as Caffe does, with one warning.
TEST(FlattenLayerTest, AxisJustAfterEndAxisInsertsAnAxisWithOneWarning) {
  test::LoggedWarnings warnings;
  EXPECT_EQ(FlattenedShape("flatten_param { axis: 2 end_axis: 1 }", {2, 3, 4}), (std::vector<int>{2, 3, 1, 4}));
  EXPECT_EQ(FlattenedShape("flatten_param { axis: -1 end_axis: -2 }", {2, 3, 4}), (std::vector<int>{2, 3, 1, 4}));
  EXPECT_EQ(FlattenedShape("flatten_param { axis: 1 end_axis: -4 }", {2, 3, 4, 5}),
            (std::vector<int>{2, 1, 3, 4, 5}));
  ASSERT_EQ(warnings.lines().size(), 3u);
  for (const char* part : {"layer 'flat' (Flatten)", "flatten_param.end_axis (1, axis 1)", "size-1 axis",
                           "as Caffe does"})
    EXPECT_NE(warnings.lines()[0].find(part), std::string::npos) << warnings.lines()[0];

  // Once per layer, however often it reshapes.
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  top.Add({});
  FlattenLayer layer(test::ParseLayer("name: 'flat' type: 'Flatten' flatten_param { axis: 2 end_axis: 1 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Reshape(bottom.pointers, top.pointers);
  EXPECT_EQ(warnings.lines().size(), 4u);
}

TEST(FlattenLayerTest, RejectsBadAxes) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  top.Add({});
  FlattenLayer out_of_range(test::ParseLayer("name: 'flat' type: 'Flatten' flatten_param { axis: 3 }"));
  std::string message = test::ErrorMessage([&] { out_of_range.SetUp(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("flatten_param.axis 3"), std::string::npos) << message;
  EXPECT_NE(message.find("'flat'"), std::string::npos) << message;

  FlattenLayer end_out_of_range(test::ParseLayer("name: 'flat' type: 'Flatten' flatten_param { end_axis: -4 }"));
  message = test::ErrorMessage([&] { end_out_of_range.SetUp(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("flatten_param.end_axis -4"), std::string::npos) << message;

  FlattenLayer reversed(test::ParseLayer("name: 'flat' type: 'Flatten' flatten_param { axis: 2 end_axis: 0 }"));
  message = test::ErrorMessage([&] { reversed.SetUp(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("end_axis"), std::string::npos) << message;
}

}  // namespace
}  // namespace crema
