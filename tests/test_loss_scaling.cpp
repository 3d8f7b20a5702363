// Dynamic loss scaling (solver/loss_scaling.hpp, SolverParameter.loss_scaling): the scale's rules; a scaled run's
// weights are bit for bit an unscaled run's (the scale is a power of two); an iteration whose gradients overflowed
// (an infinity put into one gradient, as float16 would produce) updates nothing, halves the scale and training goes
// on; the scale and its count resume from a snapshot.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "io/proto_io.hpp"
#include "solver/loss_scaling.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

TEST(LossScalingTest, TheScaleHalvesAtAnOverflowAndDoublesAfterTheGrowthInterval) {
  EXPECT_EQ(LossScaling(65536, 10).scale(), 65536.f);
  EXPECT_EQ(LossScaling(100000, 10).scale(), 65536.f);  // rounded down to a power of two
  EXPECT_EQ(LossScaling(0.3f, 10).scale(), 1.f);        // at least 1
  EXPECT_EQ(LossScaling(1e30f, 10).scale(), static_cast<float>(1 << 24));

  LossScaling scaling(1024, 3);
  EXPECT_FALSE(scaling.AfterBackward(false, 0));
  EXPECT_EQ(scaling.scale(), 512.f);
  EXPECT_TRUE(scaling.AfterBackward(true, 1));
  EXPECT_TRUE(scaling.AfterBackward(true, 2));
  EXPECT_EQ(scaling.scale(), 512.f);
  EXPECT_EQ(scaling.steady_iterations(), 2);
  EXPECT_TRUE(scaling.AfterBackward(true, 3));  // the third in a row
  EXPECT_EQ(scaling.scale(), 1024.f);
  EXPECT_EQ(scaling.steady_iterations(), 0);
  EXPECT_TRUE(scaling.AfterBackward(true, 4));
  EXPECT_FALSE(scaling.AfterBackward(false, 5));  // an overflow restarts the count
  EXPECT_EQ(scaling.scale(), 512.f);
  EXPECT_EQ(scaling.steady_iterations(), 0);

  LossScaling smallest(1, 100);
  for (int i = 0; i < 40; ++i) smallest.AfterBackward(false, i);
  EXPECT_EQ(smallest.scale(), 1.f / (1 << 24));

  test::ExpectErrorContaining([] { LossScaling(0, 10); }, {"initial_loss_scale"});
  test::ExpectErrorContaining([] { LossScaling(8, 0); }, {"loss_scale_growth_interval"});
  test::ExpectErrorContaining([] { LossScaling(8, 5).Restore(3.f, 0, "state.solverstate"); },
                              {"state.solverstate", "power of two"});
}

SolverParameter ScaledSolver(const std::string& source, const std::string& prefix, int max_iter,
                             const std::string& scaling) {
  SolverParameter param = test::ResumeSolver(test::ResumeNet(source), prefix, max_iter, 10);
  SolverParameter settings;
  ReadProtoFromText(scaling, "loss scaling", &settings);
  param.MergeFrom(settings);
  return param;
}

// Puts an infinity into parameter 0's gradient in the backward of the iterations listed: an overflow as float16's
// arithmetic would make one.
class Overflow : public SolverCallback {
 public:
  explicit Overflow(std::vector<int> iterations, Solver* solver)
      : iterations_(std::move(iterations)), solver_(solver) {}
  void OnParameterGradientReady(int iteration, const Net::GradientReady& ready) override {
    if (ready.index() != 0) return;
    for (int at : iterations_)
      if (at == iteration)
        solver_->net()->learnable_params()[0]->mutable_cpu_diff()[3] = std::numeric_limits<float>::infinity();
  }

 private:
  std::vector<int> iterations_;
  Solver* solver_;
};

TEST(LossScalingTest, ScaledTrainingGivesTheUnscaledBitsAndAnOverflowSkipsOneUpdate) {
  test::TempDir dir;
  const std::string source = dir.file("train_lmdb");
  test::WriteRandomDatums(source, 70, 8, 8, 4, 11);

  auto plain = CreateSolver(ScaledSolver(source, dir.file("plain"), 20, ""));
  EXPECT_EQ(plain->loss_scaling(), nullptr);  // AUTOMATIC: no layer computes in float16 here
  plain->Solve();
  auto scaled = CreateSolver(ScaledSolver(source, dir.file("scaled"), 20, "loss_scaling: DYNAMIC"));
  ASSERT_NE(scaled->loss_scaling(), nullptr);
  EXPECT_EQ(scaled->loss_scaling()->scale(), 65536.f);
  scaled->Solve();
  EXPECT_TRUE(test::FileBytes(dir.file("scaled_iter_20.caffemodel")) ==
              test::FileBytes(dir.file("plain_iter_20.caffemodel")))
      << "scaling by a power of two and back changed the gradients' bits";

  // Overflows at iterations 4 and 5: neither updates anything (weights and momentum as after iteration 3), the scale
  // halves twice, and training goes on from there.
  auto overflowing = CreateSolver(
      ScaledSolver(source, dir.file("overflow"), 8, "loss_scaling: DYNAMIC loss_scale_growth_interval: 3"));
  Overflow overflow({4, 5}, overflowing.get());
  overflowing->AddCallback(&overflow);
  overflowing->Step(4);  // iterations 0-3: no overflow; the third doubled the scale
  EXPECT_EQ(overflowing->loss_scaling()->scale(), 131072.f);
  std::vector<std::vector<float>> weights, history;
  for (Blob* param : overflowing->net()->learnable_params()) weights.push_back(test::DataOf(*param));
  for (const auto& blob : overflowing->history()) history.push_back(test::DataOf(*blob));
  overflowing->Step(2);  // iterations 4 and 5 overflow
  EXPECT_EQ(overflowing->iter(), 6);
  EXPECT_EQ(overflowing->loss_scaling()->scale(), 32768.f);
  for (size_t p = 0; p < weights.size(); ++p)
    EXPECT_EQ(test::DataOf(*overflowing->net()->learnable_params()[p]), weights[p]) << "parameter " << p;
  for (size_t h = 0; h < history.size(); ++h)
    EXPECT_EQ(test::DataOf(*overflowing->history()[h]), history[h]) << "history " << h;
  overflowing->Step(1);  // iteration 6 updates again
  EXPECT_NE(test::DataOf(*overflowing->net()->learnable_params()[0]), weights[0]);
  for (Blob* param : overflowing->net()->learnable_params())
    for (float value : test::DataOf(*param)) ASSERT_TRUE(std::isfinite(value));
}

TEST(LossScalingTest, TheScaleResumesFromASnapshot) {
  test::TempDir dir;
  const std::string source = dir.file("train_lmdb");
  test::WriteRandomDatums(source, 70, 8, 8, 4, 11);
  const std::string settings = "loss_scaling: DYNAMIC initial_loss_scale: 1024 loss_scale_growth_interval: 7";
  auto straight = CreateSolver(ScaledSolver(source, dir.file("straight"), 20, settings));
  Overflow overflow({2, 13}, straight.get());
  straight->AddCallback(&overflow);
  straight->Solve();
  const float final_scale = straight->loss_scaling()->scale();
  // 1024, halved at 2, doubled at 9 (7 steady iterations), halved at 13, 6 steady iterations since.
  EXPECT_EQ(final_scale, 512.f);
  EXPECT_EQ(straight->loss_scaling()->steady_iterations(), 6);

  auto first = CreateSolver(ScaledSolver(source, dir.file("split"), 10, settings));
  Overflow first_overflow({2}, first.get());
  first->AddCallback(&first_overflow);
  first->Solve();
  auto resumed = CreateSolver(ScaledSolver(source, dir.file("split"), 20, settings));
  Overflow resumed_overflow({13}, resumed.get());
  resumed->AddCallback(&resumed_overflow);
  resumed->Solve(dir.file("split_iter_10.solverstate"));
  EXPECT_EQ(resumed->loss_scaling()->scale(), final_scale);
  EXPECT_EQ(resumed->loss_scaling()->steady_iterations(), straight->loss_scaling()->steady_iterations());
  EXPECT_TRUE(test::FileBytes(dir.file("split_iter_20.caffemodel")) ==
              test::FileBytes(dir.file("straight_iter_20.caffemodel")));
}

}  // namespace
}  // namespace crema
