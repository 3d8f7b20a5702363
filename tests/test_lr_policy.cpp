#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "io/proto_io.hpp"
#include "solver/lr_policy.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

SolverParameter Solver(const std::string& text) {
  SolverParameter param;
  ReadProtoFromText(text, "test", &param);
  return param;
}

float Rate(const SolverParameter& param, int iter) {
  int step = 0;
  return LearningRate(param, iter, &step);
}

TEST(LearningRatePolicy, Fixed) {
  auto param = Solver("base_lr: 0.1 lr_policy: 'fixed'");
  EXPECT_FLOAT_EQ(Rate(param, 0), 0.1f);
  EXPECT_FLOAT_EQ(Rate(param, 12345), 0.1f);
}

TEST(LearningRatePolicy, Step) {
  auto param = Solver("base_lr: 0.1 lr_policy: 'step' gamma: 0.5 stepsize: 100");
  EXPECT_FLOAT_EQ(Rate(param, 99), 0.1f);
  EXPECT_FLOAT_EQ(Rate(param, 100), 0.05f);
  EXPECT_FLOAT_EQ(Rate(param, 250), 0.025f);
}

TEST(LearningRatePolicy, Exp) {
  auto param = Solver("base_lr: 0.2 lr_policy: 'exp' gamma: 0.99");
  EXPECT_NEAR(Rate(param, 10), 0.2 * 0.9043820750088044, 1e-7);
}

TEST(LearningRatePolicy, InvMatchesLeNetSchedule) {
  // LeNet's schedule: 0.01 * (1 + 1e-4 * iter)^-0.75; at 10000: 0.01 * 2^-0.75.
  auto param = Solver("base_lr: 0.01 lr_policy: 'inv' gamma: 0.0001 power: 0.75");
  EXPECT_FLOAT_EQ(Rate(param, 0), 0.01f);
  EXPECT_NEAR(Rate(param, 10000), 0.01 * 0.5946035575013605, 1e-8);
  EXPECT_NEAR(Rate(param, 5000), 0.01 * std::pow(1.5, -0.75), 1e-8);
}

TEST(LearningRatePolicy, MultistepAdvancesItsStep) {
  auto param = Solver("base_lr: 1 lr_policy: 'multistep' gamma: 0.1 stepvalue: 10 stepvalue: 30");
  int step = 0;
  EXPECT_FLOAT_EQ(LearningRate(param, 9, &step), 1.f);
  EXPECT_EQ(step, 0);
  EXPECT_FLOAT_EQ(LearningRate(param, 10, &step), 0.1f);
  EXPECT_EQ(step, 1);
  EXPECT_NEAR(LearningRate(param, 45, &step), 0.01f, 1e-9);
  EXPECT_EQ(step, 2);
}

TEST(LearningRatePolicy, Poly) {
  auto param = Solver("base_lr: 0.5 lr_policy: 'poly' power: 2 max_iter: 100");
  EXPECT_FLOAT_EQ(Rate(param, 50), 0.5f * 0.25f);
  EXPECT_FLOAT_EQ(Rate(param, 100), 0.f);
}

TEST(LearningRatePolicy, Sigmoid) {
  auto param = Solver("base_lr: 1 lr_policy: 'sigmoid' gamma: -0.1 stepsize: 50");
  EXPECT_FLOAT_EQ(Rate(param, 50), 0.5f);
  EXPECT_NEAR(Rate(param, 60), 1.0 / (1.0 + std::exp(1.0)), 1e-6);
}

TEST(LearningRatePolicy, BadSettingsAreNamed) {
  try {
    CheckLearningRatePolicy(Solver("base_lr: 1 lr_policy: 'cosine'"));
    FAIL() << "unknown policy accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("cosine"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("multistep"), std::string::npos);
  }
  EXPECT_THROW(CheckLearningRatePolicy(Solver("base_lr: 1 lr_policy: 'step'")), Error);
  EXPECT_THROW(CheckLearningRatePolicy(Solver("base_lr: 1 lr_policy: 'multistep' stepvalue: 5 stepvalue: 3")),
               Error);  // gamma 0 where a step uses it
  EXPECT_THROW(CheckLearningRatePolicy(Solver("base_lr: 1 lr_policy: 'sigmoid' stepsize: -1")), Error);
  EXPECT_THROW(CheckLearningRatePolicy(Solver("base_lr: 1")), Error);
}

// Settings Caffe takes though they look like mistakes: followed as Caffe does, each with one warning from the
// check (which a solver runs once), none from the rates.
TEST(LearningRatePolicy, CaffesLooseSettingsAreFollowedWithAWarning) {
  const auto warnings_of_check = [](const SolverParameter& param) {
    test::LoggedWarnings warnings;
    CheckLearningRatePolicy(param);
    return warnings.lines();
  };
  // sigmoid with stepsize 0: centred at iteration 0.
  auto sigmoid = Solver("base_lr: 1 lr_policy: 'sigmoid' gamma: -0.1");
  std::vector<std::string> warned = warnings_of_check(sigmoid);
  ASSERT_EQ(warned.size(), 1u);
  for (const char* part : {"\"sigmoid\"", "stepsize 0", "as Caffe does"})
    EXPECT_NE(warned[0].find(part), std::string::npos) << warned[0];
  EXPECT_FLOAT_EQ(Rate(sigmoid, 0), 0.5f);
  EXPECT_NEAR(Rate(sigmoid, 10), 1.0 / (1.0 + std::exp(1.0)), 1e-6);

  // multistep without stepvalue: fixed, whatever gamma.
  auto no_steps = Solver("base_lr: 0.3 lr_policy: 'multistep'");
  warned = warnings_of_check(no_steps);
  ASSERT_EQ(warned.size(), 1u);
  for (const char* part : {"\"multistep\" without stepvalue", "base_lr", "as Caffe does"})
    EXPECT_NE(warned[0].find(part), std::string::npos) << warned[0];
  int step = 0;
  for (int iter = 0; iter < 50; ++iter) EXPECT_FLOAT_EQ(LearningRate(no_steps, iter, &step), 0.3f);

  // Step values not increasing: once one is passed, the next is taken an iteration later, as Caffe's one step per
  // iteration does.
  auto unordered = Solver("base_lr: 1 lr_policy: 'multistep' gamma: 0.5 stepvalue: 10 stepvalue: 5 stepvalue: 10 "
                          "stepvalue: 20");
  test::LoggedWarnings rate_warnings;
  warned = warnings_of_check(unordered);
  ASSERT_EQ(warned.size(), 1u);
  for (const char* part : {"stepvalue 5 (number 2)", "does not come after 10", "as Caffe does"})
    EXPECT_NE(warned[0].find(part), std::string::npos) << warned[0];
  step = 0;
  std::vector<int> steps;
  for (int iter = 0; iter <= 21; ++iter) {
    const float rate = LearningRate(unordered, iter, &step);
    EXPECT_FLOAT_EQ(rate, std::pow(0.5f, static_cast<float>(step)));
    steps.push_back(step);
  }
  const std::vector<int> expected = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4};
  EXPECT_EQ(steps, expected);
  EXPECT_EQ(rate_warnings.lines().size(), 1u);  // the check's only
  // Increasing step values are all passed at a jump, as before.
  auto ordered = Solver("base_lr: 1 lr_policy: 'multistep' gamma: 0.1 stepvalue: 10 stepvalue: 30");
  EXPECT_TRUE(warnings_of_check(ordered).empty());
  step = 0;
  EXPECT_NEAR(LearningRate(ordered, 45, &step), 0.01f, 1e-9);
  EXPECT_EQ(step, 2);
}

}  // namespace
}  // namespace crema
