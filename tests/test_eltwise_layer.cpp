#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "layers/common/eltwise.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter EltwiseParam(const std::string& eltwise_param) {
  return test::ParseLayer("name: 'mix' type: 'Eltwise' " + eltwise_param);
}

// Three random bottoms of shape 2 x 3 x 2, and one empty top.
void ThreeBottoms(test::BlobList* bottom, test::BlobList* top) {
  for (int i = 0; i < 3; ++i) test::FillGaussian(bottom->Add({2, 3, 2}), 0.f, 1.f, 10 + i);
  top->Add({});
}

TEST(EltwiseLayerTest, SumWithAndWithoutCoefficients) {
  test::BlobList bottom, top;
  ThreeBottoms(&bottom, &top);
  const std::vector<float> a = test::DataOf(*bottom.pointers[0]), b = test::DataOf(*bottom.pointers[1]),
                           c = test::DataOf(*bottom.pointers[2]);
  EltwiseLayer plain(EltwiseParam(""));  // SUM is the default
  plain.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 3, 2}));
  plain.Forward(bottom.pointers, top.pointers);
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(top.pointers[0]->cpu_data()[i], a[i] + b[i] + c[i], 1e-6f);

  EltwiseLayer weighted(EltwiseParam("eltwise_param { operation: SUM coeff: 1 coeff: -0.5 coeff: 2 }"));
  weighted.SetUp(bottom.pointers, top.pointers);
  weighted.Forward(bottom.pointers, top.pointers);
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(top.pointers[0]->cpu_data()[i], a[i] - 0.5f * b[i] + 2.f * c[i], 1e-5f);
}

TEST(EltwiseLayerTest, Product) {
  test::BlobList bottom, top;
  ThreeBottoms(&bottom, &top);
  EltwiseLayer layer(EltwiseParam("eltwise_param { operation: PROD }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  for (int i = 0; i < 12; ++i) {
    const float expected =
        bottom.pointers[0]->cpu_data()[i] * bottom.pointers[1]->cpu_data()[i] * bottom.pointers[2]->cpu_data()[i];
    EXPECT_NEAR(top.pointers[0]->cpu_data()[i], expected, 1e-6f);
  }
}

TEST(EltwiseLayerTest, MaxKeepsTheWinnerAndBreaksTiesTowardsTheFirstBottom) {
  test::BlobList bottom, top;
  ThreeBottoms(&bottom, &top);
  // Ties: element 0 equal in all bottoms, element 1 equal in bottoms 1 and 2 (and largest there).
  for (Blob* b : bottom.pointers) b->mutable_cpu_data()[0] = 5.f;
  bottom.pointers[0]->mutable_cpu_data()[1] = -9.f;
  bottom.pointers[1]->mutable_cpu_data()[1] = 9.f;
  bottom.pointers[2]->mutable_cpu_data()[1] = 9.f;
  EltwiseLayer layer(EltwiseParam("eltwise_param { operation: MAX }"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(layer.internal_blobs().size(), 1u);
  EXPECT_EQ(layer.internal_blob_names()[0], "mix.argmax");
  layer.Forward(bottom.pointers, top.pointers);
  for (int i = 0; i < 12; ++i) {
    int winner = 0;
    for (int b = 1; b < 3; ++b) {
      if (bottom.pointers[b]->cpu_data()[i] > bottom.pointers[winner]->cpu_data()[i]) winner = b;
    }
    EXPECT_EQ(top.pointers[0]->cpu_data()[i], bottom.pointers[winner]->cpu_data()[i]) << i;
    EXPECT_EQ(layer.internal_blobs()[0]->cpu_data()[i], float(winner)) << i;
  }
  EXPECT_EQ(layer.internal_blobs()[0]->cpu_data()[0], 0.f);
  EXPECT_EQ(layer.internal_blobs()[0]->cpu_data()[1], 1.f);
  // Backward sends each element's gradient to its winner only.
  for (int i = 0; i < 12; ++i) top.pointers[0]->mutable_cpu_diff()[i] = 1.f + i;
  layer.Backward(top.pointers, {true, true, true}, bottom.pointers);
  for (int i = 0; i < 12; ++i) {
    const int winner = static_cast<int>(layer.internal_blobs()[0]->cpu_data()[i]);
    for (int b = 0; b < 3; ++b) EXPECT_EQ(bottom.pointers[b]->cpu_diff()[i], b == winner ? 1.f + i : 0.f);
  }
}

TEST(EltwiseLayerTest, SumGradient) {
  test::BlobList bottom, top;
  ThreeBottoms(&bottom, &top);
  EltwiseLayer layer(EltwiseParam("eltwise_param { coeff: 1.5 coeff: -2 coeff: 0.5 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(EltwiseLayerTest, ProductGradientStable) {
  test::BlobList bottom, top;
  ThreeBottoms(&bottom, &top);
  EltwiseLayer layer(EltwiseParam("eltwise_param { operation: PROD }"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(EltwiseLayerTest, ProductGradientByDivision) {
  test::BlobList bottom, top;
  for (int i = 0; i < 3; ++i) test::FillUniform(bottom.Add({2, 3, 2}), 0.5f, 1.5f, 20 + i);  // away from 0
  top.Add({});
  EltwiseLayer layer(EltwiseParam("eltwise_param { operation: PROD stable_prod_grad: false }"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(EltwiseLayerTest, MaxGradient) {
  test::BlobList bottom, top;
  top.Add({});
  // Bottom b holds values near 3 * (a per-element permutation of 0, 1, 2): far apart, so no step flips a winner.
  for (int b = 0; b < 3; ++b) {
    Blob* x = bottom.Add({2, 3, 2});
    test::FillUniform(x, -0.2f, 0.2f, 30 + b);
    for (int i = 0; i < 12; ++i) x->mutable_cpu_data()[i] += 3.f * ((i + b) % 3);
  }
  EltwiseLayer layer(EltwiseParam("eltwise_param { operation: MAX }"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

// More bottoms than one pass of the GPU's rules reads (rehearsed on the host, and the CPU's loops alike): the
// later groups combine onto the earlier ones' top, and each bottom's product gradient multiplies in every group of
// the others.
TEST(EltwiseLayerTest, ManyBottomsAreTakenInGroups) {
  const int bottoms = kEltwiseGroup + 3, count = 6;
  for (int gpu_code = 0; gpu_code < 2; ++gpu_code) {
    for (const std::string op : {"SUM", "PROD", "MAX"}) {
      SCOPED_TRACE(op + (gpu_code ? ", GPU code on the host" : ", CPU code"));
      auto context = std::make_shared<Context>(Device::kCPU);
      context->set_gpu_code_on_host(gpu_code == 1);
      test::BlobList bottom, top;
      std::string param = "eltwise_param { operation: " + op;
      std::vector<float> coeffs;
      for (int b = 0; b < bottoms; ++b) {
        test::FillUniform(bottom.Add({2, 3}), 0.5f, 1.5f, 40 + b);  // products stay near 1
        coeffs.push_back(op == "SUM" ? 0.25f * (b % 5) - 0.5f : 1.f);
        if (op == "SUM") param += " coeff: " + std::to_string(coeffs.back());
      }
      // MAX: element 0 ties between bottoms 3 and kEltwiseGroup + 1 (the earlier wins), element 1 is won in the last
      // group.
      bottom.pointers[3]->mutable_cpu_data()[0] = 7.f;
      bottom.pointers[kEltwiseGroup + 1]->mutable_cpu_data()[0] = 7.f;
      bottom.pointers[bottoms - 1]->mutable_cpu_data()[1] = 8.f;
      top.Add({});
      EltwiseLayer layer(EltwiseParam(param + " }"), context);
      layer.SetUp(bottom.pointers, top.pointers);
      layer.Forward(bottom.pointers, top.pointers);
      for (int i = 0; i < count; ++i) top.pointers[0]->mutable_cpu_diff()[i] = 1.f + i;
      layer.Backward(top.pointers, std::vector<bool>(bottoms, true), bottom.pointers);
      for (int i = 0; i < count; ++i) {
        double expected = op == "PROD" ? 1 : 0;
        int winner = 0;
        for (int b = 0; b < bottoms; ++b) {
          const float x = bottom.pointers[b]->cpu_data()[i];
          if (op == "SUM") expected += coeffs[b] * x;
          if (op == "PROD") expected *= x;
          if (op == "MAX" && x > bottom.pointers[winner]->cpu_data()[i]) winner = b;
        }
        if (op == "MAX") expected = bottom.pointers[winner]->cpu_data()[i];
        EXPECT_NEAR(top.pointers[0]->cpu_data()[i], expected, 1e-5) << i;
        if (op == "MAX" && i < 2) {
          EXPECT_EQ(winner, i == 0 ? 3 : bottoms - 1);
          EXPECT_EQ(layer.internal_blobs()[0]->cpu_data()[i], static_cast<float>(winner));
        }
        for (int b = 0; b < bottoms; ++b) {
          double gradient = 1.f + i;
          if (op == "SUM") gradient *= coeffs[b];
          if (op == "MAX" && b != winner) gradient = 0;
          for (int other = 0; op == "PROD" && other < bottoms; ++other)
            if (other != b) gradient *= bottom.pointers[other]->cpu_data()[i];
          EXPECT_NEAR(bottom.pointers[b]->cpu_diff()[i], gradient, 1e-4 * std::max(1.0, std::fabs(gradient)))
              << "bottom " << b << ", element " << i;
        }
      }
    }
  }
}

TEST(EltwiseLayerTest, FollowsReshapedBottoms) {
  test::BlobList bottom, top;
  ThreeBottoms(&bottom, &top);
  EltwiseLayer layer(EltwiseParam("eltwise_param { operation: MAX }"));
  layer.SetUp(bottom.pointers, top.pointers);
  for (Blob* b : bottom.pointers) b->Reshape({4, 5});
  layer.Reshape(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{4, 5}));
  EXPECT_EQ(layer.internal_blobs()[0]->shape(), (std::vector<int>{4, 5}));
}

TEST(EltwiseLayerTest, RejectsBadParametersAndShapes) {
  test::BlobList bottom, top;
  ThreeBottoms(&bottom, &top);
  EltwiseLayer count(EltwiseParam("eltwise_param { coeff: 1 coeff: 2 }"));
  test::ExpectErrorContaining([&] { count.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'mix' (Eltwise)", "eltwise_param.coeff has 2", "one per bottom (3)"});
  EltwiseLayer prod(EltwiseParam("eltwise_param { operation: PROD coeff: 1 coeff: 2 coeff: 3 }"));
  test::ExpectErrorContaining([&] { prod.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'mix' (Eltwise)", "eltwise_param.coeff", "PROD"});
  bottom.pointers[2]->Reshape({2, 3, 3});
  EltwiseLayer shapes(EltwiseParam(""));
  test::ExpectErrorContaining([&] { shapes.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'mix' (Eltwise)", "bottom 2", "2 3 3 (18)", "2 3 2 (12)"});
  test::BlobList one;
  one.Add({2});
  EltwiseLayer single(EltwiseParam(""));
  test::ExpectErrorContaining([&] { single.SetUp(one.pointers, top.pointers); }, {"at least 2 bottom"});
}

}  // namespace
}  // namespace crema
