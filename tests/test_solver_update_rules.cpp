// Every update rule (SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam) against a computation of the test's own
// in double precision over several iterations; how the type is chosen; the settings each rule refuses; and, for
// every rule and snapshot format, that a run split by a snapshot and a resume ends exactly where an unbroken
// run does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/context.hpp"
#include "core/random.hpp"
#include "io/proto_io.hpp"
#include "solver/solver.hpp"
#include "solver/update_rules.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// A linear regression small enough to differentiate by hand: ip = W data + b (W 2 x 3; b with lr_mult 2 and
// decay_mult 0), loss = 1/(2N) * sum (ip - target)^2 over a batch of N = 2.
const char kRegressionNet[] = R"(
  layer { name: 'input' type: 'Input' top: 'data' top: 'target'
          input_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 2 } } }
  layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'
          param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
          inner_product_param { num_output: 2 weight_filler { type: 'gaussian' } } }
  layer { name: 'loss' type: 'EuclideanLoss' bottom: 'ip' bottom: 'target' top: 'loss' }
)";
constexpr int kBatch = 2, kInputs = 3, kOutputs = 2;
const double kData[kBatch][kInputs] = {{0.5, -1.0, 2.0}, {1.5, 0.25, -0.75}};
const double kTarget[kBatch][kOutputs] = {{1.0, -0.5}, {-2.0, 0.75}};
const std::vector<std::vector<double>> kInitialParams = {{0.2, -0.3, 0.1, -0.4, 0.25, 0.35}, {0.05, -0.1}};
const double kLrMult[] = {1, 2}, kDecayMult[] = {1, 0};

// Every rule runs under a rate that changes (step policy), with L2 weight decay, on the CPU.
const char kCommonSettings[] =
    "lr_policy: 'step' gamma: 0.5 stepsize: 2 weight_decay: 0.01 display: 0 solver_mode: CPU ";

struct RuleCase {
  const char* type;
  const char* settings;  // the rule's own; each leaves at least one default in place
  int history_sets;
};
const RuleCase kRules[] = {
    {"SGD", "base_lr: 0.05 momentum: 0.9", 1},
    {"Nesterov", "base_lr: 0.05 momentum: 0.9", 1},
    {"AdaGrad", "base_lr: 0.05", 1},
    {"RMSProp", "base_lr: 0.02 rms_decay: 0.9 delta: 1e-6", 1},
    {"AdaDelta", "base_lr: 1 momentum: 0.95 delta: 1e-4", 2},
    {"Adam", "base_lr: 0.01 momentum: 0.9 momentum2: 0.99", 2},
};

// Test names and failure messages show the rule by its type.
void PrintTo(const RuleCase& rule, std::ostream* out) { *out << rule.type; }

SolverParameter RegressionSolver(const RuleCase& rule, const std::string& extra = "") {
  SolverParameter param;
  ReadProtoFromText(std::string(kCommonSettings) + rule.settings + " type: '" + rule.type + "' " + extra, "solver",
                    &param);
  ReadProtoFromText(kRegressionNet, "net", param.mutable_net_param());
  return param;
}

void SetInputs(Net* net) {
  for (int n = 0; n < kBatch; ++n) {
    for (int k = 0; k < kInputs; ++k)
      net->blob_by_name("data")->mutable_cpu_data()[n * kInputs + k] = static_cast<float>(kData[n][k]);
    for (int o = 0; o < kOutputs; ++o)
      net->blob_by_name("target")->mutable_cpu_data()[n * kOutputs + o] = static_cast<float>(kTarget[n][o]);
  }
}

void SetInitialParams(Net* net) {
  for (size_t p = 0; p < kInitialParams.size(); ++p)
    for (size_t i = 0; i < kInitialParams[p].size(); ++i)
      net->learnable_params()[p]->mutable_cpu_data()[i] = static_cast<float>(kInitialParams[p][i]);
}

std::unique_ptr<Solver> MakeRegression(const SolverParameter& param) {
  auto solver = CreateSolver(param);
  SetInputs(solver->net());
  SetInitialParams(solver->net());
  return solver;
}

std::unique_ptr<Solver> MakeRegression(const RuleCase& rule, const std::string& extra = "") {
  return MakeRegression(RegressionSolver(rule, extra));
}

// The rule's solver with one setting changed.
std::unique_ptr<Solver> MakeChanged(const RuleCase& rule, const std::function<void(SolverParameter*)>& change) {
  SolverParameter param = RegressionSolver(rule);
  change(&param);
  return MakeRegression(param);
}

// The same training, written out independently in double precision from Caffe's published update formulas.
class ReferenceTraining {
 public:
  ReferenceTraining(const RuleCase& rule, const SolverParameter& param)
      : type_(rule.type), param_(param), params_(kInitialParams), history_(2 * params_.size()) {
    for (size_t p = 0; p < params_.size(); ++p) {
      history_[p].assign(params_[p].size(), 0.0);
      history_[params_.size() + p].assign(params_[p].size(), 0.0);
    }
  }

  // One iteration at iteration number `iter`.
  void Step(int iter) {
    const double rate = param_.base_lr() * std::pow(double{param_.gamma()}, iter / param_.stepsize());
    const std::vector<std::vector<double>> gradients = Gradients();
    for (size_t p = 0; p < params_.size(); ++p) {
      for (size_t i = 0; i < params_[p].size(); ++i) {
        const double g = gradients[p][i] + double{param_.weight_decay()} * kDecayMult[p] * params_[p][i];
        // Near zero, the adaptive rules' g / (|g| + delta) depends on float rounding: keep the data away from it.
        ASSERT_GT(std::fabs(g), 1e-3) << "iteration " << iter << ", parameter " << p << ", element " << i;
        params_[p][i] -= RuleStep(g, rate * kLrMult[p], iter, &history_[p][i], &history_[params_.size() + p][i]);
      }
    }
  }

  const std::vector<std::vector<double>>& params() const { return params_; }
  // Caffe's history layout: first set for every parameter, then the second set.
  const std::vector<std::vector<double>>& history() const { return history_; }

 private:
  // d loss / d W[o][k] = 1/N sum_n (y[n][o] - t[n][o]) x[n][k];  d loss / d b[o] = 1/N sum_n (y[n][o] - t[n][o]).
  std::vector<std::vector<double>> Gradients() const {
    std::vector<std::vector<double>> gradients = {std::vector<double>(kOutputs * kInputs, 0.0),
                                                  std::vector<double>(kOutputs, 0.0)};
    for (int n = 0; n < kBatch; ++n) {
      for (int o = 0; o < kOutputs; ++o) {
        double y = params_[1][o];
        for (int k = 0; k < kInputs; ++k) y += params_[0][o * kInputs + k] * kData[n][k];
        const double residual = (y - kTarget[n][o]) / kBatch;
        for (int k = 0; k < kInputs; ++k) gradients[0][o * kInputs + k] += residual * kData[n][k];
        gradients[1][o] += residual;
      }
    }
    return gradients;
  }

  double RuleStep(double g, double rate, int iter, double* h, double* u) const {
    const double momentum = param_.momentum(), delta = param_.delta();
    if (type_ == "SGD") {
      *h = momentum * *h + rate * g;
      return *h;
    }
    if (type_ == "Nesterov") {
      const double previous = *h;
      *h = momentum * *h + rate * g;
      return (1 + momentum) * *h - momentum * previous;
    }
    if (type_ == "AdaGrad") {
      *h += g * g;
      return rate * g / (std::sqrt(*h) + delta);
    }
    if (type_ == "RMSProp") {
      const double decay = param_.rms_decay();
      *h = decay * *h + (1 - decay) * g * g;
      return rate * g / (std::sqrt(*h) + delta);
    }
    if (type_ == "AdaDelta") {
      *h = momentum * *h + (1 - momentum) * g * g;
      const double update = g * std::sqrt((*u + delta) / (*h + delta));
      *u = momentum * *u + (1 - momentum) * update * update;
      return rate * update;
    }
    // Adam: h is the mean gradient, u the mean squared gradient.
    const double beta1 = momentum, beta2 = param_.momentum2();
    *h = beta1 * *h + (1 - beta1) * g;
    *u = beta2 * *u + (1 - beta2) * g * g;
    const int t = iter + 1;
    return rate * std::sqrt(1 - std::pow(beta2, t)) / (1 - std::pow(beta1, t)) * *h / (std::sqrt(*u) + delta);
  }

  std::string type_;
  SolverParameter param_;
  std::vector<std::vector<double>> params_;
  std::vector<std::vector<double>> history_;
};

class UpdateRuleTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(UpdateRuleTest, FiveIterationsMatchTheFormulaInDoublePrecision) {
  const RuleCase& rule = GetParam();
  auto solver = MakeRegression(rule);
  ASSERT_STREQ(solver->type(), rule.type);
  const size_t params = solver->net()->learnable_params().size();
  ASSERT_EQ(params, 2u);
  ASSERT_EQ(solver->history().size(), static_cast<size_t>(rule.history_sets) * params);
  ReferenceTraining reference(rule, solver->param());
  for (int iter = 0; iter < 5; ++iter) {
    solver->Step(1);
    reference.Step(iter);
    if (HasFatalFailure()) return;
    for (size_t p = 0; p < params; ++p) {
      const Blob& blob = *solver->net()->learnable_params()[p];
      for (int i = 0; i < blob.count(); ++i) {
        const double expected = reference.params()[p][i];
        EXPECT_NEAR(blob.cpu_data()[i], expected, 1e-6 * (1 + std::fabs(expected)))
            << "iteration " << iter << ", parameter " << p << ", element " << i;
      }
    }
    for (size_t b = 0; b < solver->history().size(); ++b) {
      const Blob& blob = *solver->history()[b];
      for (int i = 0; i < blob.count(); ++i) {
        const double expected = reference.history()[b][i];
        EXPECT_NEAR(blob.cpu_data()[i], expected, 1e-6 * (1 + std::fabs(expected)))
            << "iteration " << iter << ", history blob " << b << ", element " << i;
      }
    }
  }
  // The weights moved well beyond the tolerance, so the comparison says something.
  double moved = 0;
  for (size_t p = 0; p < params; ++p)
    for (size_t i = 0; i < kInitialParams[p].size(); ++i)
      moved = std::max(moved, std::fabs(reference.params()[p][i] - kInitialParams[p][i]));
  EXPECT_GT(moved, 1e-2);
}

std::string RuleName(const ::testing::TestParamInfo<RuleCase>& info) { return info.param.type; }

// lr_mult: 0 freezes a parameter under every rule (fine-tuning keeps copied layers so), weight decay or not;
// the other parameter still learns.
TEST_P(UpdateRuleTest, LrMultZeroFreezesTheParameter) {
  SolverParameter param = RegressionSolver(GetParam());
  param.mutable_net_param()->mutable_layer(1)->mutable_param(0)->set_lr_mult(0.f);
  auto solver = MakeRegression(param);
  solver->Step(4);
  const std::vector<float> weights = test::DataOf(*solver->net()->learnable_params()[0]);
  const std::vector<float> bias = test::DataOf(*solver->net()->learnable_params()[1]);
  for (size_t i = 0; i < weights.size(); ++i)
    EXPECT_EQ(weights[i], static_cast<float>(kInitialParams[0][i])) << "frozen weight " << i << " moved";
  double moved = 0;
  for (size_t i = 0; i < bias.size(); ++i) moved += std::fabs(bias[i] - kInitialParams[1][i]);
  EXPECT_GT(moved, 1e-4) << "the bias (lr_mult 2) did not learn";
}

// A net whose weights span several of the fused update's stretches (2^16 values each) and whose bias is one short
// stretch: 40 x 4000 inputs to 5 outputs (200,000 weights), random data.
const char kWideNet[] = R"(
  layer { name: 'data' type: 'DummyData' top: 'data' top: 'target'
          dummy_data_param { shape { dim: 40 dim: 4000 } shape { dim: 40 dim: 50 }
                             data_filler { type: 'gaussian' } data_filler { type: 'gaussian' } } }
  layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'
          param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0.5 }
          inner_product_param { num_output: 50 weight_filler { type: 'gaussian' std: 0.01 }
                                bias_filler { type: 'gaussian' std: 0.1 } } }
  layer { name: 'loss' type: 'EuclideanLoss' bottom: 'ip' bottom: 'target' top: 'loss' }
)";

// The host's update runs each parameter's update (the gradient averaged over iter_size, the decay, the rule: UpdateOf)
// and the step in one pass over stretches of it (Solver::ApplyUpdate); the GPU and debug_info take two passes over the
// whole parameter. Value by value the operations are the same, so the weights and histories are the two passes' bits,
// for every rule with L2 and L1 decay, averaging over two passes and clipping (and the prologue's are the separate
// passes', UpdateRulePrologueTest below).
TEST_P(UpdateRuleTest, TheFusedUpdateGivesThePassesBits) {
  for (const char* extra : {"regularization_type: 'L2' iter_size: 2 clip_gradients: 5",
                            "regularization_type: 'L1'"}) {
    SCOPED_TRACE(extra);
    std::vector<std::vector<float>> results[2];
    for (int passes = 0; passes < 2; ++passes) {
      SolverParameter param;
      ReadProtoFromText(std::string(kCommonSettings) + GetParam().settings + " type: '" + GetParam().type +
                            "' random_seed: 7 max_iter: 3 snapshot_after_train: false " + extra,
                        "solver", &param);
      // debug_info reports each parameter between the rule and the step on the iterations it displays: all here.
      if (passes) {
        param.set_debug_info(true);
        param.set_display(1);
      }
      ReadProtoFromText(kWideNet, "net", param.mutable_net_param());
      auto solver = CreateSolver(param);
      solver->Solve();
      for (const auto& blob : solver->net()->learnable_params()) results[passes].push_back(test::DataOf(*blob));
      for (const auto& blob : solver->history()) results[passes].push_back(test::DataOf(*blob));
    }
    ASSERT_EQ(results[0].size(), results[1].size());
    for (size_t b = 0; b < results[0].size(); ++b) {
      ASSERT_EQ(results[0][b].size(), results[1][b].size());
      for (size_t i = 0; i < results[0][b].size(); ++i)
        ASSERT_EQ(results[0][b][i], results[1][b][i]) << "blob " << b << " (parameters, then histories), value " << i;
    }
    // The update did something: the weights moved from their fillers' values (and the runs did not both stall).
    EXPECT_GT(test::AbsSum(results[0][0]), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryRule, UpdateRuleTest, ::testing::ValuesIn(kRules), RuleName);

// A rule after its prologue (AfterPrologue: the averaging over iter_size, then the L2 or L1 decay, value by value
// before the rule), run as one pass or over ranges, gives the bits of separate passes over the whole blob in that order
// (ScaleBy, the decay, the rule), for every rule and every prologue. `make` gives the rule over a gradient and two
// histories.
template <typename Rule>
void CheckPrologueGivesThePassesBits(const std::function<Rule(float* diff, float* h1, float* h2)>& make) {
  constexpr int kCount = 1000;
  std::vector<float> data(kCount), gradient(kCount), history1(kCount), history2(kCount);
  RandomStream random(3);
  for (int i = 0; i < kCount; ++i) {
    data[i] = i % 50 == 0 ? 0.f : random.Gaussian(0.f, 1.f);  // some zeros: L1's sign
    gradient[i] = random.Gaussian(0.f, 0.1f);
    history1[i] = std::fabs(random.Gaussian(0.f, 0.01f));  // squares' means, where a rule keeps those
    history2[i] = std::fabs(random.Gaussian(0.f, 0.01f));
  }
  Context context;
  for (const bool averages : {false, true}) {
    for (const auto decays : {GradientPrologue::kNoDecay, GradientPrologue::kL2, GradientPrologue::kL1}) {
      SCOPED_TRACE(std::string(averages ? "averaged, " : "") + "decay " + std::to_string(decays));
      // 0: the passes; 1: one pass (Run); 2: ranges (RunRange), in two uneven pieces.
      std::vector<float> diff[3], h1[3], h2[3];
      for (int way = 0; way < 3; ++way) {
        diff[way] = gradient;
        h1[way] = history1;
        h2[way] = history2;
        GradientPrologue prologue;
        prologue.averages = averages;
        prologue.average = ScaleBy{diff[way].data(), 0.25f};
        prologue.decays = decays;
        prologue.l2 = L2Decay{data.data(), diff[way].data(), 5e-4f};
        prologue.l1 = L1Decay{data.data(), diff[way].data(), 1e-3f};
        const Rule rule = make(diff[way].data(), h1[way].data(), h2[way].data());
        if (way == 0) {
          const auto pass = [](const auto& rule) {
            for (int i = 0; i < kCount; ++i) rule(i);
          };
          if (averages) pass(prologue.average);
          if (decays == GradientPrologue::kL2) pass(prologue.l2);
          if (decays == GradientPrologue::kL1) pass(prologue.l1);
          pass(rule);
          continue;
        }
        const std::unique_ptr<UpdateRule> update = MakeUpdateRule(rule);
        update->set_prologue(prologue);
        if (way == 1) {
          update->Run(context, kCount);
        } else {
          update->RunRange(0, 333);
          update->RunRange(333, kCount);
        }
      }
      for (int way = 1; way < 3; ++way) {
        EXPECT_EQ(diff[way], diff[0]) << "way " << way;
        EXPECT_EQ(h1[way], h1[0]) << "way " << way;
        EXPECT_EQ(h2[way], h2[0]) << "way " << way;
      }
      EXPECT_NE(diff[0], gradient);  // the rule did run
    }
  }
}

TEST(UpdateRulePrologueTest, EveryRuleAfterItsPrologueGivesThePassesBits) {
  CheckPrologueGivesThePassesBits<SgdMomentum>([](float* d, float* h, float*) {
    return SgdMomentum{h, d, 0.9f, 0.1f};
  });
  CheckPrologueGivesThePassesBits<NesterovUpdate>([](float* d, float* h, float*) {
    return NesterovUpdate{h, d, 0.9f, 0.1f};
  });
  CheckPrologueGivesThePassesBits<AdaGradUpdate>([](float* d, float* h, float*) {
    return AdaGradUpdate{h, d, 1e-8f, 0.1f};
  });
  CheckPrologueGivesThePassesBits<RMSPropUpdate>([](float* d, float* h, float*) {
    return RMSPropUpdate{h, d, 0.9f, 1e-6f, 0.01f};
  });
  CheckPrologueGivesThePassesBits<AdaDeltaUpdate>(
      [](float* d, float* h1, float* h2) { return AdaDeltaUpdate{h1, h2, d, 0.95f, 1e-4f, 1.f}; });
  CheckPrologueGivesThePassesBits<AdamUpdate>(
      [](float* d, float* h1, float* h2) { return AdamUpdate{h1, h2, d, 0.9f, 0.999f, 1e-8f, 0.001f}; });
}

TEST(SolverTypeTest, TheDeprecatedEnumPicksEachRule) {
  const std::pair<SolverParameter::SolverType, const char*> kLegacy[] = {
      {SolverParameter::SGD, "SGD"},           {SolverParameter::NESTEROV, "Nesterov"},
      {SolverParameter::ADAGRAD, "AdaGrad"},   {SolverParameter::RMSPROP, "RMSProp"},
      {SolverParameter::ADADELTA, "AdaDelta"}, {SolverParameter::ADAM, "Adam"}};
  for (const auto& [value, name] : kLegacy) {
    SolverParameter param = RegressionSolver(kRules[0]);
    param.clear_type();
    param.set_momentum(0);
    param.set_solver_type(value);
    EXPECT_STREQ(CreateSolver(param)->type(), name);
    // Both fields naming the same rule is harmless.
    param.set_type(name);
    EXPECT_STREQ(CreateSolver(param)->type(), name);
  }
  SolverParameter contradiction = RegressionSolver(kRules[0]);
  contradiction.set_solver_type(SolverParameter::ADAM);
  test::ExpectErrorContaining([&] { CreateSolver(contradiction); },
                              {"type: \"SGD\"", "solver_type: ADAM", "keep only type"});
}

TEST(SolverTypeTest, AnUnknownTypeListsTheKnownOnes) {
  // Caffe's spellings exactly: "adam" is not "Adam".
  for (const char* unknown : {"Adamax", "adam", "SGD "}) {
    SolverParameter param = RegressionSolver(kRules[0]);
    param.set_type(unknown);
    test::ExpectErrorContaining([&] { CreateSolver(param); },
                                {"unknown solver type \"" + std::string(unknown) + "\"",
                                 "known types: SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam"});
  }
}

TEST(SolverTypeTest, SettingsARuleCannotUseAreRefused) {
  const RuleCase adagrad = kRules[2], rmsprop = kRules[3], adadelta = kRules[4], adam = kRules[5];
  // Caffe refuses momentum for AdaGrad and RMSProp, and an rms_decay outside [0, 1).
  test::ExpectErrorContaining([&] { MakeChanged(adagrad, [](SolverParameter* p) { p->set_momentum(0.9f); }); },
                              {"AdaGrad solver has no momentum", "momentum: 0.9"});
  test::ExpectErrorContaining([&] { MakeChanged(rmsprop, [](SolverParameter* p) { p->set_momentum(0.5f); }); },
                              {"RMSProp solver has no momentum", "momentum: 0.5"});
  test::ExpectErrorContaining([&] { MakeChanged(rmsprop, [](SolverParameter* p) { p->set_rms_decay(1.f); }); },
                              {"RMSProp solver needs rms_decay in [0, 1), got 1"});
  // Beyond Caffe: settings that would divide by zero or take the square root of a negative mean.
  test::ExpectErrorContaining([&] { MakeChanged(adam, [](SolverParameter* p) { p->set_momentum2(1.f); }); },
                              {"Adam solver needs momentum2 in [0, 1)"});
  test::ExpectErrorContaining([&] { MakeChanged(adam, [](SolverParameter* p) { p->set_momentum(1.f); }); },
                              {"Adam solver needs momentum in [0, 1)"});
  test::ExpectErrorContaining([&] { MakeChanged(adadelta, [](SolverParameter* p) { p->set_momentum(-0.5f); }); },
                              {"AdaDelta solver needs momentum in [0, 1), got -0.5"});
  test::ExpectErrorContaining([&] { MakeChanged(adagrad, [](SolverParameter* p) { p->set_delta(0.f); }); },
                              {"AdaGrad solver needs delta above 0"});
}

// Resuming with another rule would read one rule's history as another's.
TEST(SolverTypeTest, ResumingAStateOfAnotherTypeIsRefused) {
  test::TempDir dir;
  const std::string prefix = "snapshot_prefix: '" + dir.file("adam") + "'";
  auto adam = MakeRegression(kRules[5], prefix);
  adam->Step(2);
  const std::string adam_state = adam->Snapshot();
  SolverState state;
  ReadProtoFromBinaryFile(adam_state, &state);
  EXPECT_EQ(state.type(), "Adam");

  // AdaDelta keeps as many history blobs as Adam: only the recorded type tells them apart.
  auto adadelta = MakeRegression(kRules[4]);
  test::ExpectErrorContaining(
      [&] { adadelta->Restore(adam_state); },
      {adam_state, "written by solver type Adam", "this solver's type is AdaDelta", "type: \"Adam\""});
  auto sgd = MakeRegression(kRules[0], "snapshot_prefix: '" + dir.file("sgd") + "'");
  test::ExpectErrorContaining([&] { sgd->Restore(adam_state); }, {adam_state, "Adam", "SGD"});

  // A state that does not record its type (Caffe writes none) is accepted when its history fits...
  sgd->Step(1);
  const std::string sgd_state = sgd->Snapshot();
  ReadProtoFromBinaryFile(sgd_state, &state);
  state.clear_type();
  WriteProtoToBinaryFile(state, sgd_state);
  auto nesterov = MakeRegression(kRules[1]);
  nesterov->Restore(sgd_state);
  EXPECT_EQ(nesterov->iter(), 1);
  // ... and refused naming the counts when it does not: Adam keeps two history blobs per parameter.
  auto another_adam = MakeRegression(kRules[5]);
  test::ExpectErrorContaining([&] { another_adam->Restore(sgd_state); },
                              {sgd_state, "holds 2 history blob(s)", "Adam solver keeps 4", "2 per learnable"});
}

// Every rule and snapshot format: 6 iterations straight, or 3 + snapshot + restore into a fresh solver + 3, give the
// same bytes in weights and history. The format is a parameter so that each format added joins the list.
class UpdateRuleResumeTest : public ::testing::TestWithParam<std::tuple<RuleCase, SolverParameter::SnapshotFormat>> {};

std::string Bytes(Solver& solver) {
  NetParameter weights;
  solver.net()->ToProto(&weights);
  std::string bytes = weights.SerializeAsString();
  for (const auto& blob : solver.history()) {
    BlobProto proto;
    blob->ToProto(&proto);
    bytes += proto.SerializeAsString();
  }
  return bytes;
}

TEST_P(UpdateRuleResumeTest, SplitRunIsByteIdenticalToStraightRun) {
  const auto& [rule, format] = GetParam();
  test::TempDir dir;
  const std::string settings = "snapshot_format: " + SolverParameter::SnapshotFormat_Name(format) +
                               " snapshot_prefix: '" + dir.file("split") + "'";
  auto straight = MakeRegression(rule, settings);
  straight->Step(6);

  auto first_half = MakeRegression(rule, settings);
  first_half->Step(3);
  const std::string state_file = first_half->Snapshot();
  const std::string halfway = Bytes(*first_half);
  first_half.reset();

  // The fresh solver starts from other weights (its filler's), so they too must come from the snapshot.
  auto resumed = CreateSolver(RegressionSolver(rule, settings));
  SetInputs(resumed->net());
  resumed->Restore(state_file);
  EXPECT_EQ(resumed->iter(), 3);
  EXPECT_TRUE(Bytes(*resumed) == halfway) << "the restored weights or history differ from the snapshot's";
  resumed->Step(3);
  EXPECT_EQ(resumed->iter(), 6);
  EXPECT_TRUE(Bytes(*resumed) == Bytes(*straight)) << "the resumed run differs from the straight run";
  EXPECT_FALSE(halfway == Bytes(*straight));  // so the comparison above is not trivially true
}

std::string RuleAndFormatName(
    const ::testing::TestParamInfo<std::tuple<RuleCase, SolverParameter::SnapshotFormat>>& info) {
  return std::string(std::get<0>(info.param).type) + "_" +
         SolverParameter::SnapshotFormat_Name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(EveryRuleAndFormat, UpdateRuleResumeTest,
                         ::testing::Combine(::testing::ValuesIn(kRules),
                                            ::testing::Values(SolverParameter::BINARYPROTO, SolverParameter::HDF5)),
                         RuleAndFormatName);

// Each rule's GPU kernel (update_rules.cu) gives the CPU's result.
TEST(UpdateRuleGpuTest, EveryRuleOnTheGpuMatchesTheCpu) {
  if (Context::gpu_count() == 0)
    GTEST_SKIP() << (Context::built_with_cuda() ? "no CUDA device is visible on this machine"
                                                : "this build has no CUDA (CPU_ONLY)");
  for (const RuleCase& rule : kRules) {
    auto cpu = MakeRegression(rule);
    auto gpu = MakeChanged(rule, [](SolverParameter* p) { p->set_solver_mode(SolverParameter::GPU); });
    cpu->Step(5);
    gpu->Step(5);
    for (size_t b = 0; b < cpu->history().size(); ++b) {
      const std::vector<float> expected = test::DataOf(*cpu->history()[b]), actual = test::DataOf(*gpu->history()[b]);
      for (size_t i = 0; i < expected.size(); ++i)
        EXPECT_NEAR(actual[i], expected[i], 1e-5f * (1.f + std::fabs(expected[i]))) << rule.type << " history " << b;
    }
    for (size_t p = 0; p < cpu->net()->learnable_params().size(); ++p) {
      const std::vector<float> expected = test::DataOf(*cpu->net()->learnable_params()[p]),
                               actual = test::DataOf(*gpu->net()->learnable_params()[p]);
      for (size_t i = 0; i < expected.size(); ++i)
        EXPECT_NEAR(actual[i], expected[i], 1e-5f * (1.f + std::fabs(expected[i]))) << rule.type << " param " << p;
    }
  }
}

}  // namespace
}  // namespace crema
