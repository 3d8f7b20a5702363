#include <gtest/gtest.h>

#include <cmath>

#include "io/proto_io.hpp"
#include "solver/lr_policy.hpp"

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
               Error);
  EXPECT_THROW(CheckLearningRatePolicy(Solver("base_lr: 1")), Error);
}

}  // namespace
}  // namespace crema
