#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "layers/dropout.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const char kTrainDropout[] = "name: 'drop' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.3 }";

// A dropout layer whose every forward pass draws the same mask, by rewinding its random stream first, so the
// numeric gradient checker sees one fixed function.
class FixedMaskDropoutLayer : public DropoutLayer {
 public:
  using DropoutLayer::DropoutLayer;
  void FixMask(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
    Forward(bottom, top);  // creates the random stream, so that its state can be saved
    SaveRuntimeState(&state_);
  }

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override {
    if (state_.has_random_stream()) RestoreRuntimeState(state_);
    DropoutLayer::ForwardElements(bottom, top);
  }

 private:
  LayerRuntimeState state_;
};

TEST(DropoutLayerTest, TrainForwardAndBackwardFollowTheMask) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({4, 5, 6}));
  top.Add({});
  DropoutLayer layer(test::ParseLayer(kTrainDropout));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const std::vector<float> mask = test::DataOf(layer.mask());
  ASSERT_EQ(static_cast<int>(mask.size()), bottom.pointers[0]->count());
  const float scale = 1.f / 0.7f;
  Blob dy({4, 5, 6});
  test::FillGaussian(&dy, 0.f, 1.f, 5);
  std::copy(dy.cpu_data(), dy.cpu_data() + dy.count(), top.pointers[0]->mutable_cpu_diff());
  layer.Backward(top.pointers, {true}, bottom.pointers);
  float kept = 0;
  for (int i = 0; i < dy.count(); ++i) {
    ASSERT_TRUE(mask[i] == 0 || mask[i] == 1);
    kept += mask[i];
    EXPECT_FLOAT_EQ(top.pointers[0]->cpu_data()[i], bottom.pointers[0]->cpu_data()[i] * mask[i] * scale);
    EXPECT_FLOAT_EQ(bottom.pointers[0]->cpu_diff()[i], dy.cpu_data()[i] * mask[i] * scale);
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, static_cast<float>(dy.count()));
}

TEST(DropoutLayerTest, GradientWithAFixedMask) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({3, 4, 5}));
  top.Add({});
  FixedMaskDropoutLayer layer(test::ParseLayer(kTrainDropout));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.FixMask(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(DropoutLayerTest, KeepsAboutOneMinusRatioOfTheUnits) {
  test::BlobList bottom, top;
  bottom.Add({1000, 100})->set_data(1.f);
  top.Add({});
  DropoutLayer layer(test::ParseLayer(kTrainDropout));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  // With ones in, the mean output is the kept fraction times the scale: about 1. The standard deviation of the
  // kept fraction over 1e5 units is about 0.0015.
  const std::vector<float> mask = test::DataOf(layer.mask());
  const double kept = std::count(mask.begin(), mask.end(), 1.f) / 1e5;
  EXPECT_NEAR(kept, 0.7, 0.01);
  EXPECT_NEAR(test::AbsSum(test::DataOf(*top.pointers[0])) / 1e5, 1.0, 0.015);
}

TEST(DropoutLayerTest, TestPhaseIsIdentity) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({4, 5}));
  top.Add({});
  DropoutLayer layer(test::ParseLayer("name: 'drop' type: 'Dropout' phase: TEST"));
  layer.SetUp(bottom.pointers, top.pointers);
  top.pointers[0]->set_data(123.f);  // so that a forward pass that wrote nothing would show
  layer.Forward(bottom.pointers, top.pointers);
  Blob dy({4, 5});
  test::FillGaussian(&dy, 0.f, 1.f, 9);
  std::copy(dy.cpu_data(), dy.cpu_data() + dy.count(), top.pointers[0]->mutable_cpu_diff());
  layer.Backward(top.pointers, {true}, bottom.pointers);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(top.pointers[0]->cpu_data()[i], bottom.pointers[0]->cpu_data()[i]);
    EXPECT_EQ(bottom.pointers[0]->cpu_diff()[i], dy.cpu_data()[i]);
  }
}

// Layers with the same name (and seed) draw the same masks, so one may run in place and the other not.
TEST(DropoutLayerTest, InPlaceMatchesOutOfPlace) {
  const std::vector<int> shape{6, 7};
  Blob dy(shape);
  test::FillGaussian(&dy, 0.f, 1.f, 11);

  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add(shape));
  top.Add({});
  DropoutLayer separate(test::ParseLayer(kTrainDropout));
  separate.SetUp(bottom.pointers, top.pointers);
  separate.Forward(bottom.pointers, top.pointers);
  std::copy(dy.cpu_data(), dy.cpu_data() + dy.count(), top.pointers[0]->mutable_cpu_diff());
  separate.Backward(top.pointers, {true}, bottom.pointers);

  Blob shared(shape);
  test::FillGaussian(&shared);
  std::vector<Blob*> both{&shared};
  DropoutLayer in_place(test::ParseLayer(kTrainDropout));
  in_place.SetUp(both, both);
  in_place.Forward(both, both);
  EXPECT_EQ(test::DataOf(in_place.mask()), test::DataOf(separate.mask()));
  std::copy(dy.cpu_data(), dy.cpu_data() + dy.count(), shared.mutable_cpu_diff());
  in_place.Backward(both, {true}, both);
  for (int i = 0; i < shared.count(); ++i) {
    EXPECT_EQ(shared.cpu_data()[i], top.pointers[0]->cpu_data()[i]);
    EXPECT_EQ(shared.cpu_diff()[i], bottom.pointers[0]->cpu_diff()[i]);
  }
}

TEST(DropoutLayerTest, MasksAreReproducibleFromTheRandomStream) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({50, 20}));
  top.Add({});
  DropoutLayer first(test::ParseLayer(kTrainDropout));
  first.SetUp(bottom.pointers, top.pointers);
  first.Forward(bottom.pointers, top.pointers);
  const std::vector<float> mask1 = test::DataOf(first.mask());
  LayerRuntimeState saved;
  first.SaveRuntimeState(&saved);
  ASSERT_TRUE(saved.has_random_stream());
  EXPECT_EQ(saved.layer(), "drop");
  first.Forward(bottom.pointers, top.pointers);
  const std::vector<float> mask2 = test::DataOf(first.mask());
  EXPECT_NE(mask1, mask2);  // a fresh mask every pass

  // Same name, same seed: the same sequence of masks.
  DropoutLayer twin(test::ParseLayer(kTrainDropout));
  twin.SetUp(bottom.pointers, top.pointers);
  twin.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(test::DataOf(twin.mask()), mask1);

  // A different name draws from a different stream.
  DropoutLayer other(
      test::ParseLayer("name: 'drop2' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.3 }"));
  other.SetUp(bottom.pointers, top.pointers);
  other.Forward(bottom.pointers, top.pointers);
  EXPECT_NE(test::DataOf(other.mask()), mask1);

  // Restoring the saved stream (as a resumed run does) repeats the second mask, in the same layer and in a
  // fresh one.
  first.RestoreRuntimeState(saved);
  first.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(test::DataOf(first.mask()), mask2);
  DropoutLayer resumed(test::ParseLayer(kTrainDropout));
  resumed.SetUp(bottom.pointers, top.pointers);
  resumed.RestoreRuntimeState(saved);
  resumed.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(test::DataOf(resumed.mask()), mask2);
}

// scale_train: false moves the scaling to the TEST phase: TRAIN keeps the mask's units unscaled, TEST multiplies
// every unit (and its gradient) by 1 - ratio.
TEST(DropoutLayerTest, WithoutScaleTrainTrainAppliesTheMaskOnly) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({4, 5, 6}));
  top.Add({});
  DropoutLayer layer(test::ParseLayer(
      "name: 'drop' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.3 scale_train: false }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const std::vector<float> mask = test::DataOf(layer.mask());
  Blob dy({4, 5, 6});
  test::FillGaussian(&dy, 0.f, 1.f, 5);
  std::copy(dy.cpu_data(), dy.cpu_data() + dy.count(), top.pointers[0]->mutable_cpu_diff());
  layer.Backward(top.pointers, {true}, bottom.pointers);
  float kept = 0;
  for (int i = 0; i < dy.count(); ++i) {
    kept += mask[i];
    EXPECT_EQ(top.pointers[0]->cpu_data()[i], mask[i] != 0 ? bottom.pointers[0]->cpu_data()[i] : 0.f) << i;
    EXPECT_EQ(bottom.pointers[0]->cpu_diff()[i], mask[i] != 0 ? dy.cpu_data()[i] : 0.f) << i;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, static_cast<float>(dy.count()));
}

TEST(DropoutLayerTest, WithoutScaleTrainTestScalesByOneMinusRatio) {
  for (bool in_place : {false, true}) {
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({4, 5}));
    const std::vector<float> x = test::DataOf(*bottom.pointers[0]);
    top.Add({});
    std::vector<Blob*> tops = in_place ? bottom.pointers : top.pointers;
    DropoutLayer layer(test::ParseLayer(
        "name: 'drop' type: 'Dropout' phase: TEST dropout_param { dropout_ratio: 0.3 scale_train: false }"));
    layer.SetUp(bottom.pointers, tops);
    layer.Forward(bottom.pointers, tops);
    Blob dy({4, 5});
    test::FillGaussian(&dy, 0.f, 1.f, 9);
    std::copy(dy.cpu_data(), dy.cpu_data() + dy.count(), tops[0]->mutable_cpu_diff());
    layer.Backward(tops, {true}, bottom.pointers);
    for (int i = 0; i < 20; ++i) {
      EXPECT_FLOAT_EQ(tops[0]->cpu_data()[i], x[i] * 0.7f) << i;
      EXPECT_FLOAT_EQ(bottom.pointers[0]->cpu_diff()[i], dy.cpu_data()[i] * 0.7f) << i;
    }
  }
}

TEST(DropoutLayerTest, WithoutScaleTrainGradientWithAFixedMask) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({3, 4, 5}));
  top.Add({});
  FixedMaskDropoutLayer layer(test::ParseLayer(
      "name: 'drop' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.4 scale_train: false }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.FixMask(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(DropoutLayerTest, ZeroRatioKeepsEverything) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({10, 10}));
  top.Add({});
  DropoutLayer layer(test::ParseLayer("name: 'drop' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(top.pointers[0]->cpu_data()[i], bottom.pointers[0]->cpu_data()[i]);
}

TEST(DropoutLayerTest, RejectsRatioOutsideZeroToOne) {
  for (const char* ratio : {"1", "1.5", "-0.1"}) {
    test::BlobList bottom, top;
    bottom.Add({2});
    top.Add({});
    const std::string text = "name: 'drop' type: 'Dropout' dropout_param { dropout_ratio: ";
    DropoutLayer layer(test::ParseLayer(text + ratio + " }"));
    const std::string message = test::ErrorMessage([&] { layer.SetUp(bottom.pointers, top.pointers); });
    EXPECT_NE(message.find("dropout_param.dropout_ratio"), std::string::npos) << ratio << ": " << message;
    EXPECT_NE(message.find("'drop'"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace crema
