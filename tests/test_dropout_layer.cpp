#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "layers/neuron/dropout.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const char kTrainDropout[] = "name: 'drop' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.3 }";

// A dropout layer whose every forward pass draws the same mask, by rewinding its random stream first, so the
// numeric gradient checker sees one fixed function.
class FixedMaskDropoutLayer : public DropoutLayer {
 public:
  using DropoutLayer::DropoutLayer;

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override {
    if (!state_.has_random_stream()) {
      random();  // creates the random stream, so that its state can be saved
      SaveRuntimeState(&state_);
    }
    RestoreRuntimeState(state_);
    DropoutLayer::ForwardElements(bottom, top);
  }

 private:
  LayerRuntimeState state_;
};

// One forward and backward pass of a dropout layer on a Gaussian bottom of `shape`, in place or not, with a
// Gaussian top gradient: the input, the top, the top gradient, the bottom gradient and (TRAIN only) the mask.
struct DropoutRun {
  std::vector<float> x, y, dy, dx, mask;
};
DropoutRun RunDropout(const std::string& text, const std::vector<int>& shape, bool in_place = false) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add(shape));
  top.Add({});
  const std::vector<Blob*>& tops = in_place ? bottom.pointers : top.pointers;
  DropoutRun run;
  run.x = test::DataOf(*bottom.pointers[0]);
  DropoutLayer layer(test::ParseLayer(text));
  layer.SetUp(bottom.pointers, tops);
  if (!in_place) top.pointers[0]->set_data(123.f);  // so that a forward pass that wrote nothing would show
  layer.Forward(bottom.pointers, tops);
  run.y = test::DataOf(*tops[0]);
  if (layer.phase() == TRAIN) run.mask = test::DataOf(layer.mask());
  Blob dy(shape);
  test::FillGaussian(&dy, 0.f, 1.f, 5);
  run.dy = test::DataOf(dy);
  std::copy(run.dy.begin(), run.dy.end(), tops[0]->mutable_cpu_diff());
  layer.Backward(tops, {true}, bottom.pointers);
  run.dx = test::DiffOf(*bottom.pointers[0]);
  return run;
}

// Expects some units kept and some dropped.
void ExpectSomeKeptSomeDropped(const std::vector<float>& mask) {
  const auto kept = std::count(mask.begin(), mask.end(), 1.f);
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, static_cast<long>(mask.size()));
}

TEST(DropoutLayerTest, TrainForwardAndBackwardFollowTheMask) {
  const DropoutRun run = RunDropout(kTrainDropout, {4, 5, 6});
  ASSERT_EQ(run.mask.size(), run.x.size());
  const float scale = 1.f / 0.7f;
  for (size_t i = 0; i < run.x.size(); ++i) {
    ASSERT_TRUE(run.mask[i] == 0 || run.mask[i] == 1);
    EXPECT_FLOAT_EQ(run.y[i], run.x[i] * run.mask[i] * scale);
    EXPECT_FLOAT_EQ(run.dx[i], run.dy[i] * run.mask[i] * scale);
  }
  ExpectSomeKeptSomeDropped(run.mask);
}

TEST(DropoutLayerTest, GradientWithAFixedMask) {
  FixedMaskDropoutLayer layer(test::ParseLayer(kTrainDropout));
  test::CheckLayerGradient(&layer, test::Gaussian(), {}, {3, 4, 5});
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
  const DropoutRun run = RunDropout("name: 'drop' type: 'Dropout' phase: TEST", {4, 5});
  EXPECT_EQ(run.y, run.x);
  EXPECT_EQ(run.dx, run.dy);
}

// Layers with the same name (and seed) draw the same masks, so one may run in place and the other not.
TEST(DropoutLayerTest, InPlaceMatchesOutOfPlace) {
  DropoutLayer separate(test::ParseLayer(kTrainDropout)), in_place(test::ParseLayer(kTrainDropout));
  test::ExpectInPlaceMatchesOutOfPlace(&separate, &in_place, test::Gaussian(), {6, 7});
  EXPECT_EQ(test::DataOf(in_place.mask()), test::DataOf(separate.mask()));
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
  const DropoutRun run = RunDropout(
      "name: 'drop' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.3 scale_train: false }", {4, 5, 6});
  ASSERT_EQ(run.mask.size(), run.x.size());
  for (size_t i = 0; i < run.x.size(); ++i) {
    EXPECT_EQ(run.y[i], run.mask[i] != 0 ? run.x[i] : 0.f) << i;
    EXPECT_EQ(run.dx[i], run.mask[i] != 0 ? run.dy[i] : 0.f) << i;
  }
  ExpectSomeKeptSomeDropped(run.mask);
}

TEST(DropoutLayerTest, WithoutScaleTrainTestScalesByOneMinusRatio) {
  for (bool in_place : {false, true}) {
    const DropoutRun run =
        RunDropout("name: 'drop' type: 'Dropout' phase: TEST dropout_param { dropout_ratio: 0.3 scale_train: false }",
                   {4, 5}, in_place);
    for (size_t i = 0; i < run.x.size(); ++i) {
      EXPECT_FLOAT_EQ(run.y[i], run.x[i] * 0.7f) << "in place " << in_place << " at " << i;
      EXPECT_FLOAT_EQ(run.dx[i], run.dy[i] * 0.7f) << "in place " << in_place << " at " << i;
    }
  }
}

TEST(DropoutLayerTest, WithoutScaleTrainGradientWithAFixedMask) {
  FixedMaskDropoutLayer layer(test::ParseLayer(
      "name: 'drop' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.4 scale_train: false }"));
  test::CheckLayerGradient(&layer, test::Gaussian(), {}, {3, 4, 5});
}

TEST(DropoutLayerTest, ZeroRatioKeepsEverything) {
  test::ExpectForwardMatches("name: 'drop' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0 }",
                             [](double x) { return x; }, {}, test::Gaussian(), {10, 10});
}

// Outside training nothing is dropped: Caffe runs a deploy net with dropout_ratio 1, and so does crema (a copy,
// or zeros without scale_train, as Caffe computes them), with a warning. In training it stays an error (below).
TEST(DropoutLayerTest, RatioOneOutsideTrainingRunsAsCaffesWithAWarning) {
  for (bool scale_train : {true, false}) {
    test::LoggedWarnings warnings;
    const DropoutRun run = RunDropout(std::string("name: 'drop' type: 'Dropout' phase: TEST dropout_param { "
                                                  "dropout_ratio: 1 scale_train: ") +
                                          (scale_train ? "true" : "false") + " }",
                                      {3, 4});
    for (size_t i = 0; i < run.x.size(); ++i) EXPECT_EQ(run.y[i], scale_train ? run.x[i] : 0.f) << i;
    ASSERT_EQ(warnings.lines().size(), 1u);
    EXPECT_NE(warnings.lines()[0].find("dropout_ratio is 1, which drops everything in training; in TEST the layer " +
                                       std::string(scale_train ? "copies" : "zeroes") + " its input"),
              std::string::npos)
        << warnings.lines()[0];
  }
}

TEST(DropoutLayerTest, RejectsRatioOutsideZeroToOne) {
  for (const char* ratio : {"1", "1.5", "-0.1"}) {
    SCOPED_TRACE(ratio);
    test::ExpectSetUpError(std::string("name: 'drop' type: 'Dropout' dropout_param { dropout_ratio: ") + ratio + " }",
                           {"dropout_param.dropout_ratio", "'drop'"}, false, {2});
  }
}

}  // namespace
}  // namespace crema
