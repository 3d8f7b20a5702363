#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/common/argmax.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter ArgMaxParam(const std::string& argmax_param) {
  return test::ParseLayer("name: 'am' type: 'ArgMax' " + argmax_param);
}

// The indices of the k largest of `values`, largest first, by repeated scans (equal values: higher index first).
std::vector<int> TopK(const std::vector<float>& values, int k) {
  std::vector<int> chosen;
  std::vector<bool> used(values.size(), false);
  for (int r = 0; r < k; ++r) {
    int best = -1;
    for (int j = 0; j < static_cast<int>(values.size()); ++j) {
      if (!used[j] && (best < 0 || values[j] >= values[best])) best = j;
    }
    used[best] = true;
    chosen.push_back(best);
  }
  return chosen;
}

TEST(ArgMaxLayerTest, OverEachItem) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({3, 2, 5}));
  top.Add({});
  ArgMaxLayer layer(ArgMaxParam(""));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{3, 1, 1}));
  layer.Forward(bottom.pointers, top.pointers);
  const std::vector<float> x = test::DataOf(*bottom.pointers[0]);
  for (int n = 0; n < 3; ++n) {
    const std::vector<float> item(x.begin() + n * 10, x.begin() + (n + 1) * 10);
    EXPECT_EQ(top.pointers[0]->cpu_data()[n], float(TopK(item, 1)[0])) << n;
  }
}

TEST(ArgMaxLayerTest, TopKWithMaxValues) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({3, 2, 2, 2}));
  top.Add({});
  ArgMaxLayer layer(ArgMaxParam("argmax_param { out_max_val: true top_k: 3 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{3, 2, 3, 1}));
  layer.Forward(bottom.pointers, top.pointers);
  const std::vector<float> x = test::DataOf(*bottom.pointers[0]);
  const float* y = top.pointers[0]->cpu_data();
  for (int n = 0; n < 3; ++n) {
    const std::vector<float> item(x.begin() + n * 8, x.begin() + (n + 1) * 8);
    const std::vector<int> best = TopK(item, 3);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(y[n * 6 + k], float(best[k])) << n << " " << k;
      EXPECT_EQ(y[n * 6 + 3 + k], item[best[k]]) << n << " " << k;
    }
  }
}

TEST(ArgMaxLayerTest, AlongAnAxis) {
  for (const bool out_max_val : {false, true}) {
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 4, 3}));
    top.Add({});
    ArgMaxLayer layer(ArgMaxParam(std::string("argmax_param { axis: 1 top_k: 2 out_max_val: ") +
                                  (out_max_val ? "true" : "false") + " }"));
    layer.SetUp(bottom.pointers, top.pointers);
    ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 2, 3}));
    layer.Forward(bottom.pointers, top.pointers);
    const Blob& x = *bottom.pointers[0];
    const Blob& y = *top.pointers[0];
    for (int n = 0; n < 2; ++n) {
      for (int w = 0; w < 3; ++w) {
        std::vector<float> column;
        for (int c = 0; c < 4; ++c) column.push_back(x.data_at(n, c, w));
        const std::vector<int> best = TopK(column, 2);
        for (int k = 0; k < 2; ++k) {
          EXPECT_EQ(y.data_at(n, k, w), out_max_val ? column[best[k]] : float(best[k])) << n << " " << w << " " << k;
        }
      }
    }
  }
}

TEST(ArgMaxLayerTest, NegativeAxisAndTies) {
  test::BlobList bottom, top;
  Blob* x = bottom.Add({2, 3});
  const float values[6] = {1.f, 4.f, 4.f, 2.f, 2.f, 2.f};
  std::copy(values, values + 6, x->mutable_cpu_data());
  top.Add({});
  ArgMaxLayer layer(ArgMaxParam("argmax_param { axis: -1 top_k: 3 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 3}));
  layer.Forward(bottom.pointers, top.pointers);
  // Equal values come higher index first (Caffe's order).
  EXPECT_EQ(test::DataOf(*top.pointers[0]), (std::vector<float>{2, 1, 0, 2, 1, 0}));
}

TEST(ArgMaxLayerTest, FollowsAReshapedBottom) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  top.Add({});
  ArgMaxLayer layer(ArgMaxParam("argmax_param { top_k: 2 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  bottom.pointers[0]->Reshape({5, 2, 2, 2, 2});
  layer.Reshape(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{5, 1, 2, 1, 1}));
  ArgMaxLayer along(ArgMaxParam("argmax_param { axis: 2 top_k: 2 }"));
  along.SetUp(bottom.pointers, top.pointers);
  bottom.pointers[0]->Reshape({4, 1, 3});
  along.Reshape(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{4, 1, 2}));
}

TEST(ArgMaxLayerTest, HasNoGradient) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3}));
  top.Add({});
  ArgMaxLayer layer(ArgMaxParam(""));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_FALSE(layer.AllowForceBackward(0));
  layer.Forward(bottom.pointers, top.pointers);
  layer.Backward(top.pointers, {false}, bottom.pointers);  // nothing asked: fine
  test::ExpectErrorContaining([&] { layer.Backward(top.pointers, {true}, bottom.pointers); },
                              {"layer 'am' (ArgMax)", "no gradient", "propagate_down"});
}

TEST(ArgMaxLayerTest, RejectsBadParameters) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 2});
  top.Add({});
  ArgMaxLayer zero(ArgMaxParam("argmax_param { top_k: 0 }"));
  test::ExpectErrorContaining([&] { zero.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'am' (ArgMax)", "argmax_param.top_k is 0"});
  ArgMaxLayer too_many(ArgMaxParam("argmax_param { top_k: 7 }"));
  test::ExpectErrorContaining([&] { too_many.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'am' (ArgMax)", "argmax_param.top_k 7", "6 values", "2 3 2 (12)"});
  ArgMaxLayer too_many_on_axis(ArgMaxParam("argmax_param { axis: 1 top_k: 4 }"));
  test::ExpectErrorContaining([&] { too_many_on_axis.SetUp(bottom.pointers, top.pointers); },
                              {"argmax_param.top_k 4", "3 values", "argmax_param.axis 1", "2 3 2 (12)"});
  ArgMaxLayer axis(ArgMaxParam("argmax_param { axis: 3 }"));
  test::ExpectErrorContaining([&] { axis.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'am' (ArgMax)", "argmax_param.axis 3", "2 3 2 (12)"});
}

}  // namespace
}  // namespace crema
