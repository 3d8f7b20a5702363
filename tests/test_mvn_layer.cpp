#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "layers/normalization/mvn.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

struct Fixture {
  test::BlobList bottom, top;
  std::unique_ptr<MVNLayer> layer;
  Fixture(const std::string& param, const std::vector<int>& shape) {
    test::FillGaussian(bottom.Add(shape), 1.f, 2.f, 11);
    top.Add({});
    layer = std::make_unique<MVNLayer>(test::ParseLayer("name: 'm' type: 'MVN' mvn_param { " + param + " }"));
    layer->SetUp(bottom.pointers, top.pointers);
  }
};

// Each group's result computed directly: subtract the mean, divide by the population standard deviation + eps.
void ExpectNormalized(const Fixture& fixture, int groups, bool normalize, double eps) {
  const std::vector<float> x = test::DataOf(*fixture.bottom.pointers[0]);
  const std::vector<float> y = test::DataOf(*fixture.top.pointers[0]);
  const int size = static_cast<int>(x.size()) / groups;
  for (int g = 0; g < groups; ++g) {
    double mean = 0, var = 0;
    for (int i = 0; i < size; ++i) mean += x[g * size + i];
    mean /= size;
    for (int i = 0; i < size; ++i) var += (x[g * size + i] - mean) * (x[g * size + i] - mean);
    var /= size;
    const double divisor = normalize ? std::sqrt(var) + eps : 1.0;
    for (int i = 0; i < size; ++i)
      ASSERT_NEAR(y[g * size + i], (x[g * size + i] - mean) / divisor, 1e-5) << "group " << g << " value " << i;
  }
}

TEST(MVNLayerTest, NormalizesEachChannelOrEachItem) {
  {
    Fixture fixture("", {2, 3, 4, 5});
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
    ExpectNormalized(fixture, 6, true, 1e-9);
  }
  {
    Fixture fixture("across_channels: true eps: 0.1", {2, 3, 4, 5});
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
    ExpectNormalized(fixture, 2, true, 0.1);
  }
  {
    Fixture fixture("normalize_variance: false", {3, 2, 5});
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
    ExpectNormalized(fixture, 6, false, 0);
  }
}

TEST(MVNLayerTest, Gradients) {
  for (const char* param : {"", "across_channels: true", "normalize_variance: false", "eps: 0.5"}) {
    SCOPED_TRACE(param);
    Fixture fixture(param, {2, 3, 2, 3});
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers);
  }
}

TEST(MVNLayerTest, AConstantGroupGivesZerosAndAOneAxisInputIsNamed) {
  Fixture fixture("", {1, 2, 3});
  fixture.bottom.pointers[0]->set_data(4.f);
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  EXPECT_EQ(test::AbsSum(test::DataOf(*fixture.top.pointers[0])), 0.0);
  test::BlobList bottom, top;
  bottom.Add({5});
  top.Add({});
  MVNLayer layer(test::ParseLayer("name: 'm' type: 'MVN'"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, {"layer 'm' (MVN)", "5 (5)"});
}

}  // namespace
}  // namespace crema
