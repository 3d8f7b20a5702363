#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/filler.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

FillerParameter ParseFiller(const std::string& text) {
  const LayerParameter layer = test::ParseLayer("convolution_param { weight_filler { " + text + " } }");
  return layer.convolution_param().weight_filler();
}

struct Moments {
  double mean, variance;
};

Moments MomentsOf(const Blob& blob) {
  const float* data = blob.cpu_data();
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < blob.count(); ++i) {
    sum += data[i];
    sum_sq += static_cast<double>(data[i]) * data[i];
  }
  const double mean = sum / blob.count();
  return {mean, sum_sq / blob.count() - mean * mean};
}

TEST(FillerTest, ConstantSetsEveryValue) {
  Blob blob({2, 3, 4});
  RandomStream random(1);
  Fill(ParseFiller("type: 'constant' value: 2.5"), &blob, &random);
  for (int i = 0; i < blob.count(); ++i) EXPECT_EQ(blob.cpu_data()[i], 2.5f);
  // The schema's default filler is constant 0.
  Fill(FillerParameter(), &blob, &random);
  for (int i = 0; i < blob.count(); ++i) EXPECT_EQ(blob.cpu_data()[i], 0.f);
}

TEST(FillerTest, UniformStaysWithinBounds) {
  Blob blob({100, 100});
  RandomStream random(2);
  Fill(ParseFiller("type: 'uniform' min: -1.5 max: 0.5"), &blob, &random);
  for (int i = 0; i < blob.count(); ++i) {
    EXPECT_GE(blob.cpu_data()[i], -1.5f);
    EXPECT_LE(blob.cpu_data()[i], 0.5f);
  }
  const Moments m = MomentsOf(blob);
  EXPECT_NEAR(m.mean, -0.5, 0.02);
  EXPECT_NEAR(m.variance, 4.0 / 12, 0.01);  // (max - min)^2 / 12
  EXPECT_THROW(Fill(ParseFiller("type: 'uniform' min: 1 max: 0"), &blob, &random), Error);
}

TEST(FillerTest, GaussianHasItsMeanAndStd) {
  Blob blob({200, 500});
  RandomStream random(3);
  Fill(ParseFiller("type: 'gaussian' mean: 1 std: 2"), &blob, &random);
  const Moments m = MomentsOf(blob);
  EXPECT_NEAR(m.mean, 1.0, 0.03);
  EXPECT_NEAR(std::sqrt(m.variance), 2.0, 0.03);
}

TEST(FillerTest, SparseGaussianKeepsTheExpectedFraction) {
  // Caffe's rule: `sparse` non-zero output weights per input, so each weight is kept with probability
  // sparse / shape(0) = 40 / 400 (not sparse / fan-in = 40 / 100, which would keep 40%).
  Blob blob({400, 100});
  RandomStream random(4);
  Fill(ParseFiller("type: 'gaussian' sparse: 40"), &blob, &random);
  int nonzero = 0;
  for (int i = 0; i < blob.count(); ++i) nonzero += blob.cpu_data()[i] != 0.f;
  EXPECT_NEAR(static_cast<double>(nonzero) / blob.count(), 0.1, 0.01);
}

// Weights of shape (out, in, k, k): fan_in = in * k * k, fan_out = out * k * k.
struct FanCase {
  const char* norm;
  double fan;
};
const std::vector<int> kWeightShape = {400, 20, 3, 3};
const FanCase kFanCases[] = {{"FAN_IN", 20 * 9}, {"FAN_OUT", 400 * 9}, {"AVERAGE", (20 * 9 + 400 * 9) / 2.0}};

TEST(FillerTest, XavierVarianceIsOneOverFan) {
  for (const FanCase& c : kFanCases) {
    Blob blob(kWeightShape);
    RandomStream random(5);
    Fill(ParseFiller(std::string("type: 'xavier' variance_norm: ") + c.norm), &blob, &random);
    const double limit = std::sqrt(3.0 / c.fan);
    for (int i = 0; i < blob.count(); ++i) ASSERT_LE(std::fabs(blob.cpu_data()[i]), limit * (1 + 1e-6)) << c.norm;
    const Moments m = MomentsOf(blob);
    EXPECT_NEAR(m.mean, 0.0, 0.01 * std::sqrt(1.0 / c.fan)) << c.norm;
    EXPECT_NEAR(m.variance * c.fan, 1.0, 0.03) << c.norm;
  }
}

TEST(FillerTest, MsraVarianceIsTwoOverFan) {
  for (const FanCase& c : kFanCases) {
    Blob blob(kWeightShape);
    RandomStream random(6);
    Fill(ParseFiller(std::string("type: 'msra' variance_norm: ") + c.norm), &blob, &random);
    const Moments m = MomentsOf(blob);
    EXPECT_NEAR(m.mean, 0.0, 0.01 * std::sqrt(2.0 / c.fan)) << c.norm;
    EXPECT_NEAR(m.variance * c.fan / 2.0, 1.0, 0.03) << c.norm;
  }
}

TEST(FillerTest, PositiveUnitballRowsSumToOne) {
  Blob blob({10, 3, 4, 5});
  RandomStream random(7);
  Fill(ParseFiller("type: 'positive_unitball'"), &blob, &random);
  const int row = blob.count(1);
  for (int r = 0; r < blob.shape(0); ++r) {
    double sum = 0;
    for (int j = 0; j < row; ++j) {
      const float v = blob.cpu_data()[r * row + j];
      EXPECT_GE(v, 0.f);
      sum += v;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }
}

TEST(FillerTest, BilinearIsTheInterpolationKernel) {
  // Up-sampling by factor f = ceil(K / 2): tap x weighs 1 - |x - centre| / f, centre = (K - 1) / 2, and a 2-d
  // tap is the product of its row and column weights.
  for (int kernel : {4, 5}) {
    Blob blob({2, 1, kernel, kernel});
    RandomStream random(8);
    Fill(ParseFiller("type: 'bilinear'"), &blob, &random);
    const double factor = (kernel + 1) / 2;
    const double centre = (kernel - 1) / 2.0;
    auto weight = [&](int x) { return 1 - std::fabs(x - centre) / factor; };
    for (int c = 0; c < 2; ++c)
      for (int y = 0; y < kernel; ++y)
        for (int x = 0; x < kernel; ++x)
          EXPECT_NEAR(blob.data_at(c, 0, y, x), weight(y) * weight(x), 1e-6) << kernel << ": " << y << "," << x;
  }
  // The 4x4 kernel (factor 2) spelled out: rows and columns weigh 1/4, 3/4, 3/4, 1/4.
  Blob blob({1, 1, 4, 4});
  RandomStream random(9);
  Fill(ParseFiller("type: 'bilinear'"), &blob, &random);
  EXPECT_FLOAT_EQ(blob.data_at(0, 0, 0, 0), 0.0625f);
  EXPECT_FLOAT_EQ(blob.data_at(0, 0, 1, 2), 0.5625f);
  EXPECT_FLOAT_EQ(blob.data_at(0, 0, 3, 1), 0.1875f);
  Blob not_square({1, 1, 3, 4});
  EXPECT_THROW(Fill(ParseFiller("type: 'bilinear'"), &not_square, &random), Error);
}

TEST(FillerTest, UnknownTypeNamesTheKnownOnes) {
  Blob blob({3});
  RandomStream random(10);
  try {
    Fill(ParseFiller("type: 'gausian'"), &blob, &random);
    FAIL() << "no error for an unknown filler type";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("gausian"), std::string::npos) << message;
    for (const std::string& known : KnownFillerTypes()) EXPECT_NE(message.find(known), std::string::npos) << message;
  }
  EXPECT_EQ(KnownFillerTypes().size(), 7u);
}

}  // namespace
}  // namespace crema
