#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "layers/common/slice.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter SliceParam(const std::string& slice_param = "") {
  return test::ParseLayer("name: 'cut' type: 'Slice' " + slice_param);
}

TEST(SliceLayerTest, CutsAtSlicePoints) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 6, 2, 3}));
  for (int t = 0; t < 3; ++t) top.Add({});
  SliceLayer layer(SliceParam("slice_param { slice_point: 1 slice_point: 4 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 1, 2, 3}));
  ASSERT_EQ(top.pointers[1]->shape(), (std::vector<int>{2, 3, 2, 3}));
  ASSERT_EQ(top.pointers[2]->shape(), (std::vector<int>{2, 2, 2, 3}));
  layer.Forward(bottom.pointers, top.pointers);
  const Blob& x = *bottom.pointers[0];
  const int first_channel[3] = {0, 1, 4};
  for (int t = 0; t < 3; ++t) {
    const Blob& y = *top.pointers[t];
    for (int n = 0; n < 2; ++n) {
      for (int c = 0; c < y.channels(); ++c) {
        for (int h = 0; h < 2; ++h) {
          for (int w = 0; w < 3; ++w) EXPECT_EQ(y.data_at(n, c, h, w), x.data_at(n, first_channel[t] + c, h, w));
        }
      }
    }
  }
}

TEST(SliceLayerTest, CutsEquallyWithoutSlicePoints) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4}));
  top.Add({});
  top.Add({});
  SliceLayer layer(SliceParam("slice_param { axis: -1 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 3, 2}));
  ASSERT_EQ(top.pointers[1]->shape(), (std::vector<int>{2, 3, 2}));
  layer.Forward(bottom.pointers, top.pointers);
  const float* x = bottom.pointers[0]->cpu_data();
  for (int r = 0; r < 6; ++r) {
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(top.pointers[0]->cpu_data()[r * 2 + k], x[r * 4 + k]);
      EXPECT_EQ(top.pointers[1]->cpu_data()[r * 2 + k], x[r * 4 + 2 + k]);
    }
  }
}

TEST(SliceLayerTest, DeprecatedSliceDimAndFirstAxis) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({4, 3}));
  top.Add({});
  top.Add({});
  SliceLayer layer(SliceParam("slice_param { slice_dim: 0 slice_point: 3 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{3, 3}));
  ASSERT_EQ(top.pointers[1]->shape(), (std::vector<int>{1, 3}));
  layer.Forward(bottom.pointers, top.pointers);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(top.pointers[0]->cpu_data()[i], bottom.pointers[0]->cpu_data()[i]);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(top.pointers[1]->cpu_data()[i], bottom.pointers[0]->cpu_data()[9 + i]);
}

TEST(SliceLayerTest, Gradient) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 5, 3}));
  for (int t = 0; t < 3; ++t) top.Add({});
  SliceLayer layer(SliceParam("slice_param { slice_point: 2 slice_point: 3 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(SliceLayerTest, FollowsAReshapedBottom) {
  test::BlobList bottom, top;
  bottom.Add({2, 6, 3});
  for (int t = 0; t < 3; ++t) top.Add({});
  SliceLayer equal(SliceParam());
  equal.SetUp(bottom.pointers, top.pointers);
  bottom.pointers[0]->Reshape({4, 9, 2});
  equal.Reshape(bottom.pointers, top.pointers);
  for (Blob* t : top.pointers) EXPECT_EQ(t->shape(), (std::vector<int>{4, 3, 2}));

  SliceLayer points(SliceParam("slice_param { slice_point: 1 slice_point: 5 }"));
  points.SetUp(bottom.pointers, top.pointers);
  bottom.pointers[0]->Reshape({1, 7, 5});
  points.Reshape(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{1, 1, 5}));
  EXPECT_EQ(top.pointers[1]->shape(), (std::vector<int>{1, 4, 5}));
  EXPECT_EQ(top.pointers[2]->shape(), (std::vector<int>{1, 2, 5}));
}

// The last slice point at the axis' end leaves the last top empty, as Caffe does, with one warning naming it; the
// CPU code and the GPU code rehearsed on the host cut and join around it, and a net runs with it.
TEST(SliceLayerTest, LastSlicePointAtTheEndGivesAnEmptyTopWithOneWarning) {
  for (int gpu_code = 0; gpu_code < 2; ++gpu_code) {
    SCOPED_TRACE(gpu_code);
    auto context = std::make_shared<Context>();
    context->set_gpu_code_on_host(gpu_code == 1);
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 5, 3}));
    for (int t = 0; t < 3; ++t) top.Add({});
    test::LoggedWarnings warnings;
    SliceLayer layer(test::ParseLayer("name: 'cut' type: 'Slice' top: 'a' top: 'b' top: 'c' "
                                      "slice_param { slice_point: 2 slice_point: 5 }"),
                     context);
    layer.SetUp(bottom.pointers, top.pointers);
    layer.Reshape(bottom.pointers, top.pointers);
    EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 2, 3}));
    EXPECT_EQ(top.pointers[1]->shape(), (std::vector<int>{2, 3, 3}));
    EXPECT_EQ(top.pointers[2]->shape(), (std::vector<int>{2, 0, 3}));
    ASSERT_EQ(warnings.lines().size(), 1u);
    for (const char* part : {"layer 'cut' (Slice)", "slice_point (5)", "top 'c' is empty", "as Caffe does"})
      EXPECT_NE(warnings.lines()[0].find(part), std::string::npos) << warnings.lines()[0];
    layer.Forward(bottom.pointers, top.pointers);
    EXPECT_EQ(top.pointers[1]->cpu_data()[17], bottom.pointers[0]->cpu_data()[29]);
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers, 0);
  }
  Net net(test::ParseNet(R"(
    force_backward: true
    layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 4 } } }
    layer { name: 'cut' type: 'Slice' bottom: 'data' top: 'a' top: 'rest' slice_param { slice_point: 4 } }
    layer { name: 'relu' type: 'ReLU' bottom: 'rest' top: 'rest' }
    layer { name: 'join' type: 'Concat' bottom: 'a' bottom: 'rest' top: 'whole' }
    layer { name: 'loss' type: 'EuclideanLoss' bottom: 'whole' bottom: 'data' top: 'loss' })"));
  EXPECT_EQ(net.blob_by_name("rest")->shape(), (std::vector<int>{2, 0}));
  test::FillGaussian(net.blob_by_name("data"));
  EXPECT_EQ(net.ForwardBackward(), 0.f);
  EXPECT_EQ(test::DiffOf(*net.blob_by_name("data")), std::vector<float>(8, 0.f));
}

TEST(SliceLayerTest, RejectsBadParametersAndShapes) {
  test::BlobList bottom, two, three;
  bottom.Add({2, 5, 3});
  two.Add({});
  two.Add({});
  for (int t = 0; t < 3; ++t) three.Add({});
  SliceLayer uneven(SliceParam());
  test::ExpectErrorContaining([&] { uneven.SetUp(bottom.pointers, two.pointers); },
                              {"layer 'cut' (Slice)", "slice_param.slice_point", "2 5 3", "size 5", "2 equal"});
  SliceLayer count(SliceParam("slice_param { slice_point: 2 }"));
  test::ExpectErrorContaining([&] { count.SetUp(bottom.pointers, three.pointers); },
                              {"layer 'cut' (Slice)", "slice_param.slice_point has 1 point", "3 top(s) need 2"});
  SliceLayer decreasing(SliceParam("slice_param { slice_point: 3 slice_point: 2 }"));
  test::ExpectErrorContaining([&] { decreasing.SetUp(bottom.pointers, three.pointers); },
                              {"layer 'cut' (Slice)", "slice_param.slice_point 1 (2)", "above 3", "2 5 3"});
  SliceLayer past_end(SliceParam("slice_param { slice_point: 6 }"));
  test::ExpectErrorContaining([&] { past_end.SetUp(bottom.pointers, two.pointers); },
                              {"slice_param.slice_point 0 (6)", "below 5", "or equal to it"});
  SliceLayer end_not_last(SliceParam("slice_param { slice_point: 5 slice_point: 5 }"));
  test::ExpectErrorContaining([&] { end_not_last.SetUp(bottom.pointers, three.pointers); },
                              {"slice_param.slice_point 0 (5)", "below 5"});
  SliceLayer zero(SliceParam("slice_param { slice_point: 0 }"));
  test::ExpectErrorContaining([&] { zero.SetUp(bottom.pointers, two.pointers); }, {"slice_param.slice_point 0 (0)"});
  SliceLayer out_of_range(SliceParam("slice_param { axis: -4 }"));
  test::ExpectErrorContaining([&] { out_of_range.SetUp(bottom.pointers, two.pointers); },
                              {"layer 'cut' (Slice)", "slice_param.axis -4", "2 5 3"});
  SliceLayer dim_out_of_range(SliceParam("slice_param { slice_dim: 3 }"));
  test::ExpectErrorContaining([&] { dim_out_of_range.SetUp(bottom.pointers, two.pointers); },
                              {"slice_param.slice_dim 3", "2 5 3"});
  SliceLayer both(SliceParam("slice_param { axis: 1 slice_dim: 1 }"));
  test::ExpectErrorContaining([&] { both.SetUp(bottom.pointers, two.pointers); },
                              {"slice_param.axis", "slice_param.slice_dim"});
  // Shrinking the bottom below the slice points is caught on the next Reshape.
  SliceLayer shrink(SliceParam("slice_param { slice_point: 4 }"));
  shrink.SetUp(bottom.pointers, two.pointers);
  bottom.pointers[0]->Reshape({2, 3, 3});
  test::ExpectErrorContaining([&] { shrink.Reshape(bottom.pointers, two.pointers); },
                              {"slice_param.slice_point 0 (4)", "below 3", "2 3 3"});
}

}  // namespace
}  // namespace crema
