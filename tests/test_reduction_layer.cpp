#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "layers/common/reduction.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter ReductionParam(const std::string& reduction_param) {
  return test::ParseLayer("name: 'red' type: 'Reduction' " + reduction_param);
}

// The reduction of each of `outer` consecutive blocks of x, computed here with plain loops.
std::vector<double> Reference(const std::vector<float>& x, int outer, const std::string& op, double coeff) {
  const int block = static_cast<int>(x.size()) / outer;
  std::vector<double> result(outer, 0.0);
  for (int n = 0; n < outer; ++n) {
    for (int k = 0; k < block; ++k) {
      const double v = x[n * block + k];
      if (op == "SUM" || op == "MEAN") result[n] += v;
      if (op == "ASUM") result[n] += std::fabs(v);
      if (op == "SUMSQ") result[n] += v * v;
    }
    result[n] *= coeff;
    if (op == "MEAN") result[n] /= block;
  }
  return result;
}

TEST(ReductionLayerTest, EveryOperationAndAxis) {
  for (const std::string op : {"SUM", "ASUM", "SUMSQ", "MEAN"}) {
    for (int axis : {0, 1, 2, -1}) {
      test::BlobList bottom, top;
      test::FillGaussian(bottom.Add({2, 3, 4}));
      top.Add({});
      ReductionLayer layer(
          ReductionParam("reduction_param { operation: " + op + " axis: " + std::to_string(axis) + " coeff: 1.5 }"));
      layer.SetUp(bottom.pointers, top.pointers);
      const int canonical = axis < 0 ? axis + 3 : axis;
      const std::vector<int> full{2, 3, 4};
      ASSERT_EQ(top.pointers[0]->shape(), std::vector<int>(full.begin(), full.begin() + canonical)) << op << axis;
      layer.Forward(bottom.pointers, top.pointers);
      const int outer = top.pointers[0]->count();
      const std::vector<double> expected = Reference(test::DataOf(*bottom.pointers[0]), outer, op, 1.5);
      for (int n = 0; n < outer; ++n) EXPECT_NEAR(top.pointers[0]->cpu_data()[n], expected[n], 1e-4) << op << axis;
    }
  }
}

TEST(ReductionLayerTest, DefaultsAreASumOfEverythingIntoAScalar) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3}));
  top.Add({});
  ReductionLayer layer(ReductionParam(""));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->num_axes(), 0);
  EXPECT_EQ(top.pointers[0]->count(), 1);
  layer.Forward(bottom.pointers, top.pointers);
  double sum = 0;
  for (float v : test::DataOf(*bottom.pointers[0])) sum += v;
  EXPECT_NEAR(top.pointers[0]->cpu_data()[0], sum, 1e-5);
}

TEST(ReductionLayerTest, Gradients) {
  for (const std::string op : {"SUM", "ASUM", "SUMSQ", "MEAN"}) {
    for (int axis : {0, 1}) {
      test::BlobList bottom, top;
      test::FillGaussian(bottom.Add({2, 3, 2}));
      top.Add({});
      ReductionLayer layer(
          ReductionParam("reduction_param { operation: " + op + " axis: " + std::to_string(axis) + " coeff: -0.7 }"));
      layer.SetUp(bottom.pointers, top.pointers);
      // ASUM has a kink at 0: inputs near it are skipped.
      test::GradientChecker checker(1e-2f, 1e-3f, 1701, 0.f, op == "ASUM" ? 0.02f : -1.f);
      SCOPED_TRACE(op + " axis " + std::to_string(axis));
      checker.CheckGradient(&layer, bottom.pointers, top.pointers);
    }
  }
}

TEST(ReductionLayerTest, FollowsAReshapedBottom) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  top.Add({});
  ReductionLayer layer(ReductionParam("reduction_param { operation: MEAN axis: -1 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  bottom.pointers[0]->Reshape({5, 2});
  layer.Reshape(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{5}));
  bottom.pointers[0]->set_data(3.f);
  layer.Forward(bottom.pointers, top.pointers);
  for (int n = 0; n < 5; ++n) EXPECT_NEAR(top.pointers[0]->cpu_data()[n], 3.f, 1e-6f);  // the mean of 2 now
}

TEST(ReductionLayerTest, RejectsABadAxis) {
  test::BlobList bottom, top;
  bottom.Add({2, 3});
  top.Add({});
  ReductionLayer axis(ReductionParam("reduction_param { axis: 2 }"));
  test::ExpectErrorContaining([&] { axis.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'red' (Reduction)", "reduction_param.axis 2", "2 3 (6)"});
  ReductionLayer negative(ReductionParam("reduction_param { axis: -3 }"));
  test::ExpectErrorContaining([&] { negative.SetUp(bottom.pointers, top.pointers); }, {"reduction_param.axis -3"});
}

}  // namespace
}  // namespace crema
