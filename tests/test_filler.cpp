#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/filler.hpp"
#include "core/philox.hpp"
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

// The random fillers' values are a pure function of the stream's next two draws and the value's index: with one
// thread and with several (each fill above 2^15 values runs on all of them) the same bits.
TEST(FillerTest, RandomFillsGiveTheSameValuesOnAnyThreadCount) {
  const char* fillers[] = {"type: 'gaussian' mean: 0.5 std: 3", "type: 'gaussian' sparse: 30", "type: 'uniform' min: -2",
                           "type: 'xavier'", "type: 'msra'", "type: 'positive_unitball'"};
  const int saved = omp_get_max_threads();
  for (const char* filler : fillers) {
    SCOPED_TRACE(filler);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      Blob blob({300, 7, 5, 5});  // 52,500 values
      RandomStream random(21);
      Fill(ParseFiller(filler), &blob, &random);
      results.push_back(test::DataOf(blob));
    }
    omp_set_num_threads(saved);
    for (size_t r = 1; r < results.size(); ++r)
      EXPECT_EQ(std::memcmp(results[r].data(), results[0].data(), results[0].size() * sizeof(float)), 0) << r;
  }
}

// A fill takes two 32-bit draws from the stream whatever the blob's size (a sparse Gaussian four): the next layer's
// fill does not depend on how big this one was. Different seeds give different values.
TEST(FillerTest, ARandomFillTakesTwoDrawsFromTheStream) {
  for (const char* filler : {"type: 'gaussian'", "type: 'uniform'", "type: 'xavier'", "type: 'msra'"}) {
    SCOPED_TRACE(filler);
    for (int n : {1, 5, 100000}) {
      Blob blob({n});
      RandomStream random(8), expected(8);
      Fill(ParseFiller(filler), &blob, &random);
      expected.NextUint32();
      expected.NextUint32();
      EXPECT_EQ(random.Save(), expected.Save()) << n;
    }
    Blob a({1000}), b({1000});
    RandomStream first(8), second(9);
    Fill(ParseFiller(filler), &a, &first);
    Fill(ParseFiller(filler), &b, &second);
    EXPECT_NE(test::DataOf(a), test::DataOf(b));
  }
}

// The values as documented, computed here from the tested Philox function (test_philox.cpp) in double precision:
// key = first draw << 32 | second draw; value 4j + k from block j's word k; uniform: low + (high - low) * (bits >> 8)
// / 2^24; Gaussian: Box-Muller on words (0, 1) and (2, 3), radius from ((bits >> 8) + 1) / 2^24, cosine then sine.
TEST(FillerTest, RandomFillsDrawTheDocumentedValues) {
  const int n = 70003;  // a last block of three
  RandomStream keys(15);
  const uint64_t high = keys.NextUint32();
  const uint64_t key = (high << 32) | keys.NextUint32();
  const auto word = [&](int i) {
    const uint32_t j = static_cast<uint32_t>(i / 4);
    return Philox4x32_10({{j, 0u, 0u, 0u}}, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)).v[i % 4];
  };
  Blob uniform({n}), gaussian({n});
  RandomStream for_uniform(15), for_gaussian(15);
  Fill(ParseFiller("type: 'uniform' min: -3 max: 5"), &uniform, &for_uniform);
  Fill(ParseFiller("type: 'gaussian' mean: 2 std: 0.5"), &gaussian, &for_gaussian);
  double worst_uniform = 0, worst_gaussian = 0;
  for (int i = 0; i < n; ++i) {
    const double u = -3.0 + 8.0 * ((word(i) >> 8) / 16777216.0);
    worst_uniform = std::max(worst_uniform, std::fabs(uniform.cpu_data()[i] - u));
    const int first = i - i % 2;  // the pair's radius word
    const double radius = std::sqrt(-2.0 * std::log(((word(first) >> 8) + 1) / 16777216.0));
    const double angle = 2.0 * M_PI * ((word(first + 1) >> 8) / 16777216.0);
    const double z = 2.0 + 0.5 * radius * (i % 2 == 0 ? std::cos(angle) : std::sin(angle));
    worst_gaussian = std::max(worst_gaussian, std::fabs(gaussian.cpu_data()[i] - z));
  }
  EXPECT_LT(worst_uniform, 1e-6);
  EXPECT_LT(worst_gaussian, 2e-5);  // float logarithm, square root, sine and cosine
}

// Kolmogorov-Smirnov distance between `values` and a distribution's CDF.
template <typename Cdf>
double KolmogorovSmirnov(std::vector<float> values, Cdf cdf) {
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  double distance = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double f = cdf(values[i]);
    distance = std::max({distance, std::fabs(f - i / n), std::fabs((i + 1) / n - f)});
  }
  return distance;
}

// Two million values of each follow their distribution (the Kolmogorov-Smirnov distance under its 0.1% critical
// value, 1.95 / sqrt(n)), and neighbours (the two of a Box-Muller pair, and successive pairs) are uncorrelated.
TEST(FillerTest, RandomFillsFollowTheirDistributions) {
  const int n = 1 << 21;
  Blob gaussian({n}), uniform({n});
  RandomStream random(33);
  Fill(ParseFiller("type: 'gaussian' mean: 0 std: 1"), &gaussian, &random);
  Fill(ParseFiller("type: 'uniform' min: 0 max: 1"), &uniform, &random);
  const double critical = 1.95 / std::sqrt(static_cast<double>(n));
  EXPECT_LT(KolmogorovSmirnov(test::DataOf(gaussian), [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }),
            critical);
  EXPECT_LT(KolmogorovSmirnov(test::DataOf(uniform), [](double x) { return std::clamp(x, 0.0, 1.0); }), critical);
  const float* z = gaussian.cpu_data();
  for (int lag : {1, 2, 4}) {
    double sum = 0;
    for (int i = 0; i + lag < n; ++i) sum += static_cast<double>(z[i]) * z[i + lag];
    EXPECT_LT(std::fabs(sum / (n - lag)), 4.0 / std::sqrt(static_cast<double>(n))) << "lag " << lag;
  }
}

}  // namespace
}  // namespace crema
