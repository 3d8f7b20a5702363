#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace crema {
namespace {

// y = log_base(shift + scale x), in double; base -1 is e.
double ReferenceLog(double x, double base, double scale, double shift) {
  const double ln = std::log(shift + scale * x);
  return base == -1 ? ln : ln / std::log(base);
}

struct LogCase {
  const char* text;
  double base, scale, shift;
};
// Inputs are drawn from [0.5, 2], where every case's shift + scale x stays above 0.4.
const LogCase kCases[] = {
    {"name: 'log' type: 'Log'", -1, 1, 0},
    {"name: 'log' type: 'Log' log_param { scale: 0.5 shift: 0.3 }", -1, 0.5, 0.3},
    {"name: 'log' type: 'Log' log_param { base: 2 scale: -0.5 shift: 1.5 }", 2, -0.5, 1.5},
    {"name: 'log' type: 'Log' log_param { base: 0.3 scale: 1.3 }", 0.3, 1.3, 0},
};

const test::BlobFiller kPositive = test::Uniform(0.5f, 2.f);

TEST(LogLayerTest, ForwardMatchesReference) {
  for (const LogCase& c : kCases) {
    SCOPED_TRACE(c.text);
    test::ExpectForwardMatches(
        c.text, [&c](double x) { return ReferenceLog(x, c.base, c.scale, c.shift); }, test::Tolerance{2e-6}, kPositive);
  }
}

TEST(LogLayerTest, Gradient) {
  for (const LogCase& c : kCases) {
    SCOPED_TRACE(c.text);
    test::CheckLayerGradient(c.text, kPositive);
  }
}

// The backward pass needs the input, which in place is kept in an internal blob.
TEST(LogLayerTest, InPlaceMatchesOutOfPlace) {
  for (const LogCase& c : kCases) {
    SCOPED_TRACE(c.text);
    test::ExpectInPlaceMatchesOutOfPlace(c.text, kPositive);
  }
  Blob shared({2});
  std::vector<Blob*> both{&shared};
  auto layer = test::MakeLayer("name: 'log' type: 'Log'");
  layer->SetUp(both, both);
  ASSERT_EQ(layer->internal_blob_names().size(), 1u);
  EXPECT_EQ(layer->internal_blob_names()[0], "log.input");
}

TEST(LogLayerTest, RejectsBadBase) {
  for (const char* base : {"0", "-2", "1"}) {
    test::ExpectSetUpError(std::string("name: 'odd' type: 'Log' log_param { base: ") + base + " }",
                           {"'odd'", "log_param.base"});
  }
}

}  // namespace
}  // namespace crema
