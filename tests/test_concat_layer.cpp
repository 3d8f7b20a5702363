#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/common/concat.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter ConcatParam(const std::string& concat_param = "") {
  return test::ParseLayer("name: 'cat' type: 'Concat' " + concat_param);
}

TEST(ConcatLayerTest, JoinsAlongChannels) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 2, 3}), 0.f, 1.f, 1);
  test::FillGaussian(bottom.Add({2, 1, 2, 3}), 0.f, 1.f, 2);
  test::FillGaussian(bottom.Add({2, 2, 2, 3}), 0.f, 1.f, 3);
  top.Add({});
  ConcatLayer layer(ConcatParam());
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 6, 2, 3}));
  layer.Forward(bottom.pointers, top.pointers);
  const Blob& y = *top.pointers[0];
  for (int n = 0; n < 2; ++n) {
    int c_top = 0;
    for (const Blob* x : bottom.pointers) {
      for (int c = 0; c < x->channels(); ++c, ++c_top) {
        for (int h = 0; h < 2; ++h) {
          for (int w = 0; w < 3; ++w) EXPECT_EQ(y.data_at(n, c_top, h, w), x->data_at(n, c, h, w));
        }
      }
    }
  }
}

TEST(ConcatLayerTest, JoinsAlongTheFirstAndLastAxes) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({1, 2, 3}), 0.f, 1.f, 1);
  test::FillGaussian(bottom.Add({2, 2, 3}), 0.f, 1.f, 2);
  top.Add({});
  ConcatLayer first(ConcatParam("concat_param { axis: 0 }"));
  first.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{3, 2, 3}));
  first.Forward(bottom.pointers, top.pointers);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(top.pointers[0]->cpu_data()[i], bottom.pointers[0]->cpu_data()[i]);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(top.pointers[0]->cpu_data()[6 + i], bottom.pointers[1]->cpu_data()[i]);

  test::BlobList bottom2, top2;
  test::FillGaussian(bottom2.Add({2, 3, 1}), 0.f, 1.f, 3);
  test::FillGaussian(bottom2.Add({2, 3, 2}), 0.f, 1.f, 4);
  top2.Add({});
  ConcatLayer last(ConcatParam("concat_param { axis: -1 }"));
  last.SetUp(bottom2.pointers, top2.pointers);
  ASSERT_EQ(top2.pointers[0]->shape(), (std::vector<int>{2, 3, 3}));
  last.Forward(bottom2.pointers, top2.pointers);
  const float* a = bottom2.pointers[0]->cpu_data();
  const float* b = bottom2.pointers[1]->cpu_data();
  const float* y = top2.pointers[0]->cpu_data();
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(y[r * 3], a[r]);
    EXPECT_EQ(y[r * 3 + 1], b[r * 2]);
    EXPECT_EQ(y[r * 3 + 2], b[r * 2 + 1]);
  }
}

TEST(ConcatLayerTest, DeprecatedConcatDim) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  bottom.Add({2, 3, 5});
  top.Add({});
  ConcatLayer layer(ConcatParam("concat_param { concat_dim: 2 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 3, 9}));
}

TEST(ConcatLayerTest, SingleBottomIsCopied) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3}));
  top.Add({});
  ConcatLayer layer(ConcatParam());
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(test::DataOf(*top.pointers[0]), test::DataOf(*bottom.pointers[0]));
}

TEST(ConcatLayerTest, Gradient) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 2, 3}), 0.f, 1.f, 1);
  test::FillGaussian(bottom.Add({2, 1, 3}), 0.f, 1.f, 2);
  test::FillGaussian(bottom.Add({2, 3, 3}), 0.f, 1.f, 3);
  top.Add({});
  ConcatLayer layer(ConcatParam());
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
  // One bottom alone: the others' diffs are left alone.
  bottom.pointers[0]->set_diff(7.f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers, 1);
  EXPECT_EQ(bottom.pointers[0]->cpu_diff()[0], 7.f);
}

TEST(ConcatLayerTest, FollowsReshapedBottoms) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  bottom.Add({2, 1, 4});
  top.Add({});
  ConcatLayer layer(ConcatParam());
  layer.SetUp(bottom.pointers, top.pointers);
  bottom.pointers[0]->Reshape({5, 2, 3});
  bottom.pointers[1]->Reshape({5, 4, 3});
  layer.Reshape(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{5, 6, 3}));
}

TEST(ConcatLayerTest, RejectsBadParametersAndShapes) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  bottom.Add({2, 3, 5});
  top.Add({});
  ConcatLayer mismatch(ConcatParam());
  test::ExpectErrorContaining([&] { mismatch.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'cat' (Concat)", "bottom 1", "2 3 5", "2 3 4", "axis 1"});
  ConcatLayer out_of_range(ConcatParam("concat_param { axis: 3 }"));
  test::ExpectErrorContaining([&] { out_of_range.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'cat' (Concat)", "concat_param.axis 3", "2 3 4"});
  ConcatLayer dim_out_of_range(ConcatParam("concat_param { concat_dim: 3 }"));
  test::ExpectErrorContaining([&] { dim_out_of_range.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'cat' (Concat)", "concat_param.concat_dim 3", "2 3 4"});
  ConcatLayer both(ConcatParam("concat_param { axis: 2 concat_dim: 2 }"));
  test::ExpectErrorContaining([&] { both.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'cat' (Concat)", "concat_param.axis", "concat_param.concat_dim"});
  test::BlobList fewer_axes;
  fewer_axes.Add({2, 3, 4});
  fewer_axes.Add({2, 3});
  ConcatLayer axes(ConcatParam());
  test::ExpectErrorContaining([&] { axes.SetUp(fewer_axes.pointers, top.pointers); }, {"bottom 1", "2 3 (6)"});
  ConcatLayer no_bottoms(ConcatParam());
  EXPECT_THROW(no_bottoms.SetUp({}, top.pointers), Error);
}

}  // namespace
}  // namespace crema
