#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "layers/common/batch_reindex.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

struct Fixture {
  test::BlobList bottom, top;
  BatchReindexLayer layer{test::ParseLayer("name: 'r' type: 'BatchReindex'")};
  Fixture(const std::vector<int>& data_shape, const std::vector<float>& indices) {
    test::FillGaussian(bottom.Add(data_shape), 0.f, 1.f, 8);
    Blob* index = bottom.Add({static_cast<int>(indices.size())});
    std::copy(indices.begin(), indices.end(), index->mutable_cpu_data());
    top.Add({});
    layer.SetUp(bottom.pointers, top.pointers);
  }
};

TEST(BatchReindexLayerTest, PicksItemsByIndexAndAddsTheirGradientsBack) {
  Fixture fixture({4, 2, 3}, {3, 0, 3, 1, 3});
  fixture.layer.Forward(fixture.bottom.pointers, fixture.top.pointers);
  ASSERT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{5, 2, 3}));
  const float picks[] = {3, 0, 3, 1, 3};
  for (int m = 0; m < 5; ++m)
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(fixture.top.pointers[0]->cpu_data()[m * 6 + i],
                fixture.bottom.pointers[0]->cpu_data()[static_cast<int>(picks[m]) * 6 + i]);
  // Item 3 was picked three times, item 2 never: the gradient is 3 and 0 there for a top gradient of 1.
  fixture.top.pointers[0]->set_diff(1.f);
  fixture.layer.Backward(fixture.top.pointers, {true, false}, fixture.bottom.pointers);
  const std::vector<float> diff = test::DiffOf(*fixture.bottom.pointers[0]);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(diff[0 * 6 + i], 1.f);
    EXPECT_EQ(diff[1 * 6 + i], 1.f);
    EXPECT_EQ(diff[2 * 6 + i], 0.f);
    EXPECT_EQ(diff[3 * 6 + i], 3.f);
  }
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&fixture.layer, fixture.bottom.pointers, fixture.top.pointers, 0);
}

// A fractional index is truncated toward zero, as Caffe does (2.5 picks item 2, -0.5 item 0), by the CPU code and
// the GPU code rehearsed on the host alike, forward and backward, with one warning for the layer naming the first.
TEST(BatchReindexLayerTest, FractionalIndicesAreTruncatedWithOneWarning) {
  const std::vector<float> indices = {2.5f, -0.5f, 2.f, 0.9f};
  for (int gpu_code = 0; gpu_code < 2; ++gpu_code) {
    SCOPED_TRACE(gpu_code);
    auto context = std::make_shared<Context>(Device::kCPU);
    context->set_gpu_code_on_host(gpu_code == 1);
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({3, 2}), 0.f, 1.f, 8);
    Blob* index = bottom.Add({4});
    std::copy(indices.begin(), indices.end(), index->mutable_cpu_data());
    top.Add({});
    BatchReindexLayer layer(test::ParseLayer("name: 'r' type: 'BatchReindex'"), context);
    layer.SetUp(bottom.pointers, top.pointers);
    // The GPU code's backward builds its list (3 + 1 offsets, 4 positions) in a workspace the plan sees.
    EXPECT_EQ(layer.workspace_floats(), gpu_code == 1 ? 8u : 0u);
    test::LoggedWarnings warnings;
    layer.Forward(bottom.pointers, top.pointers);
    const int picks[] = {2, 0, 2, 0};
    for (int m = 0; m < 4; ++m)
      for (int i = 0; i < 2; ++i)
        EXPECT_EQ(top.pointers[0]->cpu_data()[m * 2 + i], bottom.pointers[0]->cpu_data()[picks[m] * 2 + i]);
    top.pointers[0]->set_diff(1.f);
    layer.Backward(top.pointers, {true, false}, bottom.pointers);
    const std::vector<float> diff = test::DiffOf(*bottom.pointers[0]);
    EXPECT_EQ(diff, (std::vector<float>{2, 2, 0, 0, 2, 2}));
    ASSERT_EQ(warnings.lines().size(), 1u);
    for (const char* part : {"layer 'r' (BatchReindex)", "index 2.5", "position 0", "read as 2", "as Caffe does"})
      EXPECT_NE(warnings.lines()[0].find(part), std::string::npos) << warnings.lines()[0];
  }
}

TEST(BatchReindexLayerTest, BadIndicesAndShapesAreNamed) {
  for (float bad : {4.f, -1.f, 4.5f, std::nanf("")}) {
    Fixture fixture({4, 2}, {0, bad});
    test::ExpectErrorContaining([&] { fixture.layer.Forward(fixture.bottom.pointers, fixture.top.pointers); },
                                {"layer 'r' (BatchReindex)", "at position 1", "[0, 4)"});
  }
  test::BlobList bottom, top;
  bottom.Add({4, 2});
  bottom.Add({2, 1});
  top.Add({});
  BatchReindexLayer layer(test::ParseLayer("name: 'r' type: 'BatchReindex'"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, {"must be a vector", "2 1 (2)"});
}

}  // namespace
}  // namespace crema
