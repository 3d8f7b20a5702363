// The counter-based generator Dropout draws its masks from (core/philox.hpp): the published known-answer values
// of Philox4x32-10, and the uniform floats it makes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/philox.hpp"

namespace crema {
namespace {

void ExpectBits(const Philox4x32& counter, uint32_t key0, uint32_t key1, const Philox4x32& expected) {
  const Philox4x32 result = Philox4x32_10(counter, key0, key1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(result.v[i], expected.v[i]) << "word " << i;
}

// The known-answer vectors published with the Random123 library (kat_vectors, philox4x32_10).
TEST(PhiloxTest, MatchesThePublishedKnownAnswers) {
  ExpectBits({{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
  ExpectBits({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
             {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
  ExpectBits({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
             {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
}

// Uniform in [0, 1): the mean, the variance and the share below a threshold of 100000 values are those of the
// uniform distribution to within a few standard errors; another key gives other values.
TEST(PhiloxTest, UniformFloatsAreUniform) {
  const int n = 100000;
  double total = 0, squares = 0;
  int below = 0, same = 0;
  for (int i = 0; i < n; ++i) {
    const float u = PhiloxUniform(0x1234567890abcdefull, static_cast<uint32_t>(i));
    ASSERT_GE(u, 0.f);
    ASSERT_LT(u, 1.f);
    total += u;
    squares += static_cast<double>(u) * u;
    below += u < 0.3f;
    same += u == PhiloxUniform(0x1234567890abcdeeull, static_cast<uint32_t>(i));
  }
  const double mean = total / n, variance = squares / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 4 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(variance, 1.0 / 12, 0.002);
  EXPECT_NEAR(below / static_cast<double>(n), 0.3, 4 * std::sqrt(0.3 * 0.7 / n));
  EXPECT_LT(same, 10);
}

}  // namespace
}  // namespace crema
