#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "layers/vision/spp.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

struct Fixture {
  test::BlobList bottom, top;
  std::unique_ptr<SPPLayer> layer;
  Fixture(const std::string& param, const std::vector<int>& shape) {
    test::FillGaussian(bottom.Add(shape), 0.f, 1.f, 31);
    top.Add({});
    layer = std::make_unique<SPPLayer>(test::ParseLayer("name: 'spp' type: 'SPP' spp_param { " + param + " }"));
    layer->SetUp(bottom.pointers, top.pointers);
  }
};

// Level l of an H x W plane: 2^l x 2^l bins, bin (i, j) the maximum of rows [i * kh - ph, + kh) and columns
// [j * kw - pw, + kw) within the plane, kh = ceil(H / 2^l), ph = (kh * 2^l - H + 1) / 2 (likewise for W).
std::vector<float> PyramidOfMaxima(const Blob& input, int levels) {
  const int num = input.shape(0), channels = input.shape(1), height = input.shape(2), width = input.shape(3);
  std::vector<float> result;
  for (int n = 0; n < num; ++n) {
    for (int l = 0; l < levels; ++l) {
      const int bins = 1 << l;
      const int kh = (height + bins - 1) / bins, kw = (width + bins - 1) / bins;
      const int ph = (kh * bins - height + 1) / 2, pw = (kw * bins - width + 1) / 2;
      for (int c = 0; c < channels; ++c)
        for (int i = 0; i < bins; ++i)
          for (int j = 0; j < bins; ++j) {
            float best = -1e30f;
            for (int h = std::max(i * kh - ph, 0); h < std::min(i * kh - ph + kh, height); ++h)
              for (int w = std::max(j * kw - pw, 0); w < std::min(j * kw - pw + kw, width); ++w)
                best = std::max(best, input.cpu_data()[((n * channels + c) * height + h) * width + w]);
            result.push_back(best);
          }
    }
  }
  return result;
}

TEST(SPPLayerTest, EachItemIsItsLevelsBinsInOrder) {
  Fixture fixture("pyramid_height: 3 pool: MAX", {2, 3, 8, 6});
  ASSERT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{2, 3 * (1 + 4 + 16)}));
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  EXPECT_EQ(test::DataOf(*fixture.top.pointers[0]), PyramidOfMaxima(*fixture.bottom.pointers[0], 3));
  // Another input size: the same number of outputs, the levels set up anew.
  fixture.bottom.pointers[0]->Reshape({1, 3, 12, 9});
  test::FillGaussian(fixture.bottom.pointers[0], 0.f, 1.f, 32);
  fixture.layer->Reshape(fixture.bottom.pointers, fixture.top.pointers);
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  ASSERT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{1, 63}));
  EXPECT_EQ(test::DataOf(*fixture.top.pointers[0]), PyramidOfMaxima(*fixture.bottom.pointers[0], 3));
  // The argmax each level's Pooling keeps for backward is an internal blob of the SPP layer (the net plans it), and
  // stays that one blob when the levels are set up anew: level 2's, 3 channels of 4 x 4 bins of the one item.
  const auto& names = fixture.layer->internal_blob_names();
  const auto found = std::find(names.begin(), names.end(), "spp.level2.argmax");
  ASSERT_NE(found, names.end());
  const int index = static_cast<int>(found - names.begin());
  EXPECT_EQ(fixture.layer->internal_blobs()[index]->shape(), (std::vector<int>{1, 3, 4, 4}));
  EXPECT_EQ(fixture.layer->internal_blob_lifetime(index), Layer::InternalLifetime::kUntilBackward);
}

TEST(SPPLayerTest, OneLevelIsGlobalPooling) {
  Fixture fixture("pyramid_height: 1", {2, 4, 5, 7});
  ASSERT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{2, 4, 1, 1}));
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  EXPECT_EQ(test::DataOf(*fixture.top.pointers[0]), PyramidOfMaxima(*fixture.bottom.pointers[0], 1));
}

TEST(SPPLayerTest, Gradients) {
  for (const char* param : {"pyramid_height: 2 pool: AVE", "pyramid_height: 3 pool: MAX"}) {
    SCOPED_TRACE(param);
    Fixture fixture(param, {1, 2, 4, 6});
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers);
  }
}

TEST(SPPLayerTest, BadParametersAndInputsAreNamed) {
  test::BlobList bottom, top;
  bottom.Add({1, 2, 6, 6});
  top.Add({});
  SPPLayer no_height(test::ParseLayer("name: 'spp' type: 'SPP'"));
  test::ExpectErrorContaining([&] { no_height.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'spp' (SPP)", "spp_param.pyramid_height"});
  test::BlobList flat, flat_top;
  flat.Add({2, 6});
  flat_top.Add({});
  SPPLayer two_d(test::ParseLayer("name: 'spp' type: 'SPP' spp_param { pyramid_height: 2 }"));
  test::ExpectErrorContaining([&] { two_d.SetUp(flat.pointers, flat_top.pointers); }, {"4-d", "2 6 (12)"});
}

}  // namespace
}  // namespace crema
