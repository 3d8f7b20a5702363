#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "test_util.hpp"

namespace crema {
namespace {

double ReferenceSwish(double x, double beta) { return x / (1 + std::exp(-beta * x)); }

TEST(SwishLayerTest, ForwardMatchesReference) {
  for (double beta : {1.0, 0.6, -1.3}) {
    SCOPED_TRACE("beta " + std::to_string(beta));
    std::string text = "name: 'swish' type: 'Swish'";
    if (beta != 1.0) text += " swish_param { beta: " + std::to_string(beta) + " }";
    const double stored = static_cast<float>(beta);  // the layer's beta is a float
    test::ExpectForwardMatches(
        text, [stored](double x) { return ReferenceSwish(x, stored); },
        test::Tolerance{2e-6, 0, /*relative_to_input=*/2e-6}, test::Gaussian(2.f));
  }
}

TEST(SwishLayerTest, Gradient) {
  for (const char* text : {"name: 'swish' type: 'Swish'", "name: 'swish' type: 'Swish' swish_param { beta: 1.7 }",
                           "name: 'swish' type: 'Swish' swish_param { beta: -0.4 }"}) {
    test::CheckLayerGradient(text, test::Gaussian(2.f));
  }
}

TEST(SwishLayerTest, InPlaceMatchesOutOfPlace) {
  test::ExpectInPlaceMatchesOutOfPlace("name: 'swish' type: 'Swish' swish_param { beta: 0.8 }");
}

TEST(SwishLayerTest, KeepsTheSigmoidInAnInternalBlob) {
  test::BlobList bottom, top;
  bottom.Add({2, 3});
  top.Add({});
  auto layer = test::MakeLayer("name: 'swish' type: 'Swish'");
  layer->SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(layer->internal_blob_names().size(), 1u);
  EXPECT_EQ(layer->internal_blob_names()[0], "swish.sigmoid");
  EXPECT_EQ(layer->internal_blobs()[0]->shape(), bottom.pointers[0]->shape());
}

TEST(SwishLayerTest, RejectsNonFiniteBeta) {
  test::ExpectSetUpError("name: 'odd' type: 'Swish' swish_param { beta: nan }", {"'odd'", "swish_param.beta"});
}

}  // namespace
}  // namespace crema
