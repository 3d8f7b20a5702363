// Bad solvers, as `crema train` meets them (issue 12): each is refused with status 1 and one
// "crema: error:" line naming the field, its value or the file, before any net is built; where a solver has
// several problems, the one a person fixes first (the net it trains) is named first. Also: the settings that
// Caffe accepts and that train sensibly are still accepted.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "io/proto_io.hpp"
#include "solver/lr_policy.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const std::string kCrema = test::ToolsDir() + "/crema";

// A net that needs no data on disk: DummyData into an InnerProduct and a loss.
const char kNet[] = R"(
name: 'Small'
layer { name: 'data' type: 'DummyData' top: 'data' top: 'label'
        dummy_data_param { shape { dim: 4 dim: 1 dim: 6 dim: 6 } shape { dim: 4 }
                           data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' value: 1 } } }
layer { name: 'ip1' type: 'InnerProduct' bottom: 'data' top: 'ip1'
        inner_product_param { num_output: 3 weight_filler { type: 'xavier' } } }
layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip1' bottom: 'label' top: 'loss' }
)";

class BadInputSolverTest : public ::testing::Test {
 protected:
  void SetUp() override { net_ = Write("net.prototxt", kNet); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.file(name);
    std::ofstream(path) << text;
    return path;
  }
  // A solver file of `text`; "NET" in it stands for the good net's path, "DIR" for the temporary folder.
  std::string Solver(const std::string& text) {
    std::string resolved = text;
    for (const auto& [word, value] : {std::pair<std::string, std::string>{"NET", net_}, {"DIR", dir_.path()}}) {
      for (size_t at = resolved.find(word); at != std::string::npos; at = resolved.find(word, at + value.size()))
        resolved.replace(at, word.size(), value);
    }
    return Write("solver" + std::to_string(++solvers_) + ".prototxt", resolved);
  }
  // A good solver's settings, one per line (net, base_lr, lr_policy, max_iter, display, snapshot_prefix), with
  // `extra` after them; a setting `extra` gives again, or one named in `drop`, is left out of the defaults.
  static std::string Good(const std::string& extra = "", const std::vector<std::string>& drop = {}) {
    std::string text;
    for (const char* line : {"net: 'NET'", "base_lr: 0.01", "lr_policy: 'fixed'", "max_iter: 2", "display: 1",
                             "snapshot_prefix: 'DIR/snap'"}) {
      const std::string key = std::string(line).substr(0, std::string(line).find(':'));
      const std::string padded = " " + extra;
      const bool given =
          padded.find(" " + key + ":") != std::string::npos || padded.find("\n" + key + ":") != std::string::npos;
      if (!given && std::find(drop.begin(), drop.end(), key) == drop.end()) text += std::string(line) + "\n";
    }
    return text + extra + (extra.empty() ? "" : "\n");
  }
  std::string Train(const std::string& solver_text, const std::string& flags = "") {
    return kCrema + " train --solver=" + Solver(solver_text) + flags;
  }
  // Expects the bad solver to be refused with every one of `parts`, and nothing written beside it.
  std::string ExpectRefused(const std::string& what, const std::string& solver_text,
                            const std::vector<std::string>& parts) {
    const std::string message = test::ExpectBadInput("solver", what, Train(solver_text), parts);
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path()))
      EXPECT_EQ(entry.path().filename().string().find("snap_iter"), std::string::npos)
          << "a refused solver wrote " << entry.path();
    return message;
  }

  test::TempDir dir_;
  std::string net_;
  int solvers_ = 0;
};

#define EXPECT_LACKS(haystack, needle) \
  EXPECT_EQ((haystack).find(needle), std::string::npos) << "unexpected \"" << (needle) << "\" in:\n" << (haystack)

// The good solver itself trains: every case below differs from it by one setting (or two, for the order).
TEST_F(BadInputSolverTest, TheGoodSolverTrains) {
  std::string output;
  ASSERT_EQ(test::RunCommand(Train(Good()), &output), 0) << output;
  EXPECT_TRUE(FileExists(dir_.file("snap_iter_2.caffemodel"))) << output;
}

TEST_F(BadInputSolverTest, MissingMaxIterIsNamed) {
  ExpectRefused("no max_iter", "net: 'NET'\nbase_lr: 0.01\nlr_policy: 'fixed'\nsnapshot_prefix: 'DIR/snap'\n",
                {"crema: error: the solver sets no max_iter", "set max_iter to the number of iterations"});
}

TEST_F(BadInputSolverTest, ZeroMaxIterIsNamed) {
  ExpectRefused("max_iter 0", Good("max_iter: 0"), {"max_iter: 0", "set max_iter"});
}

TEST_F(BadInputSolverTest, NegativeMaxIterIsNamed) {
  ExpectRefused("max_iter negative", Good("max_iter: -5"), {"max_iter", "-5"});
}

TEST_F(BadInputSolverTest, MissingBaseLrIsNamed) {
  ExpectRefused("no base_lr", "net: 'NET'\nlr_policy: 'fixed'\nmax_iter: 2\n", {"sets no base_lr"});
}

TEST_F(BadInputSolverTest, NegativeBaseLrIsNamed) {
  ExpectRefused("base_lr negative", Good("base_lr: -0.01"), {"base_lr must be positive", "-0.01"});
}

TEST_F(BadInputSolverTest, NonFiniteBaseLrIsNamed) {
  ExpectRefused("base_lr nan", Good("base_lr: nan"), {"base_lr must be positive", "nan"});
}

TEST_F(BadInputSolverTest, MissingLrPolicyIsNamed) {
  ExpectRefused("no lr_policy", "net: 'NET'\nbase_lr: 0.01\nmax_iter: 2\n", {"sets no lr_policy", "fixed"});
}

TEST_F(BadInputSolverTest, UnknownLrPolicyListsTheKnownOnes) {
  ExpectRefused("unknown lr_policy", Good("lr_policy: 'stepp'"),
                {"unknown lr_policy \"stepp\"", "fixed, step, exp, inv, multistep, poly, sigmoid"});
}

TEST_F(BadInputSolverTest, StepWithoutStepsizeIsNamed) {
  ExpectRefused("lr_policy step without stepsize", Good("lr_policy: 'step' gamma: 0.1"),
                {"lr_policy \"step\" needs a positive stepsize, got 0"});
}

TEST_F(BadInputSolverTest, StepWithoutGammaIsNamed) {
  ExpectRefused("lr_policy step without gamma", Good("lr_policy: 'step' stepsize: 10"),
                {"lr_policy \"step\" needs gamma above 0", "got 0"});
}

TEST_F(BadInputSolverTest, ExpWithNegativeGammaIsNamed) {
  ExpectRefused("lr_policy exp with gamma < 0", Good("lr_policy: 'exp' gamma: -0.5"),
                {"lr_policy \"exp\" needs gamma above 0", "-0.5"});
}

TEST_F(BadInputSolverTest, InvWithNegativeGammaIsNamed) {
  ExpectRefused("lr_policy inv with gamma < 0", Good("lr_policy: 'inv' gamma: -0.001 power: 0.75"),
                {"lr_policy \"inv\" needs gamma of 0 or more", "-0.001"});
}

TEST_F(BadInputSolverTest, PolyWithNegativePowerIsNamed) {
  ExpectRefused("lr_policy poly with power < 0", Good("lr_policy: 'poly' power: -1"),
                {"lr_policy \"poly\" needs power of 0 or more", "-1"});
}

TEST_F(BadInputSolverTest, UnknownSolverTypeListsTheKnownOnes) {
  ExpectRefused("unknown solver type", Good("type: 'SGDX'"),
                {"unknown solver type \"SGDX\"", "SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam"});
}

TEST_F(BadInputSolverTest, UnknownLegacySolverTypeNamesFileLineAndColumn) {
  const std::string solver = Solver(Good("solver_type: FOO"));
  test::ExpectBadInput("solver", "unknown solver_type enum value", kCrema + " train --solver=" + solver,
                       {solver + ":", "Unknown enumeration value of \"FOO\" for field \"solver_type\""});
}

TEST_F(BadInputSolverTest, ContradictingTypeAndSolverTypeAreNamed) {
  ExpectRefused("type and solver_type disagree", Good("type: 'Adam'\nsolver_type: SGD"),
                {"type: \"Adam\"", "solver_type: SGD", "disagree"});
}

TEST_F(BadInputSolverTest, IterSizeZeroIsNamed) {
  ExpectRefused("iter_size 0", Good("iter_size: 0"), {"iter_size must be at least 1, got 0"});
}

TEST_F(BadInputSolverTest, NonPositiveInitialLossScaleIsNamed) {
  ExpectRefused("initial_loss_scale 0", Good("initial_loss_scale: 0"),
                {"initial_loss_scale must be a positive number, got 0"});
}

TEST_F(BadInputSolverTest, LossScaleGrowthIntervalZeroIsNamed) {
  ExpectRefused("loss_scale_growth_interval 0", Good("loss_scaling: DYNAMIC\nloss_scale_growth_interval: 0"),
                {"loss_scale_growth_interval must be at least 1, got 0"});
}

TEST_F(BadInputSolverTest, UnknownPrecisionNamesFileLineAndColumn) {
  ExpectRefused("an unknown precision", Good("precision: HALF"),
                {"Unknown enumeration value of \"HALF\" for field \"precision\""});
}

TEST_F(BadInputSolverTest, AverageLossZeroIsNamed) {
  ExpectRefused("average_loss 0", Good("average_loss: 0"), {"average_loss must be at least 1, got 0"});
}

TEST_F(BadInputSolverTest, UnknownRegularizationIsNamed) {
  ExpectRefused("unknown regularization_type", Good("regularization_type: 'L3'\nweight_decay: 0.001"),
                {"unknown regularization_type \"L3\"", "L2 or L1"});
}

TEST_F(BadInputSolverTest, NegativeWeightDecayIsNamed) {
  ExpectRefused("weight_decay negative", Good("weight_decay: -0.0005"), {"weight_decay", "-0.0005"});
}

TEST_F(BadInputSolverTest, MomentumOutsideZeroToOneIsNamed) {
  ExpectRefused("momentum negative", Good("momentum: -0.5"), {"the SGD solver needs momentum in [0, 1), got -0.5"});
  ExpectRefused("momentum 1 (Nesterov)", Good("type: 'Nesterov'\nmomentum: 1"),
                {"the Nesterov solver needs momentum in [0, 1), got 1"});
}

TEST_F(BadInputSolverTest, NegativeDisplayIsNamed) {
  ExpectRefused("display negative", Good("display: -1"), {"display must not be negative, got -1"});
}

TEST_F(BadInputSolverTest, NegativeSnapshotIsNamed) {
  ExpectRefused("snapshot negative", Good("snapshot: -1"), {"snapshot must not be negative, got -1"});
}

TEST_F(BadInputSolverTest, AdaptiveRulesNameTheirSettings) {
  ExpectRefused("Adam momentum2 out of [0, 1)", Good("type: 'Adam'\nmomentum2: 1.5"),
                {"the Adam solver needs momentum2 in [0, 1), got 1.5"});
  ExpectRefused("AdaDelta delta 0", Good("type: 'AdaDelta'\nmomentum: 0.95\ndelta: 0"),
                {"the AdaDelta solver needs delta above 0, got 0"});
  ExpectRefused("AdaGrad with momentum", Good("type: 'AdaGrad'\nmomentum: 0.9"),
                {"the AdaGrad solver has no momentum term", "momentum: 0.9"});
  ExpectRefused("RMSProp rms_decay out of [0, 1)", Good("type: 'RMSProp'\nrms_decay: 1"),
                {"the RMSProp solver needs rms_decay in [0, 1), got 1"});
}

TEST_F(BadInputSolverTest, MissingNetIsNamed) {
  ExpectRefused("no net", "base_lr: 0.01\nlr_policy: 'fixed'\nmax_iter: 2\n",
                {"the solver names no net", "net_param, train_net or train_net_param"});
}

TEST_F(BadInputSolverTest, TwoNetsAreNamed) {
  ExpectRefused("net and train_net both set", Good("train_net: 'NET'"),
                {"names its training net 2 times", "exactly one of"});
}

TEST_F(BadInputSolverTest, MissingNetFileIsNamed) {
  ExpectRefused("net file missing", Good("net: 'DIR/nothere.prototxt'"),
                {"net file '" + dir_.file("nothere.prototxt") + "'", "(the solver's net) does not exist"});
}

TEST_F(BadInputSolverTest, MissingRelativeNetFileSaysWhereItWasLooked) {
  ExpectRefused("relative net file missing", Good("net: 'nothere.prototxt'"),
                {"net file 'nothere.prototxt'", "does not exist", "beside the solver file"});
}

TEST_F(BadInputSolverTest, NetThatIsAFolderIsNamed) {
  std::filesystem::create_directory(dir_.file("a_folder"));
  ExpectRefused("net is a folder", Good("net: 'DIR/a_folder'"),
                {"net file '" + dir_.file("a_folder") + "'", "is a folder, not a net prototxt"});
}

TEST_F(BadInputSolverTest, MissingTestNetFileIsNamed) {
  ExpectRefused("test_net file missing",
                Good("train_net: 'NET'\ntest_net: 'DIR/nothere.prototxt'\ntest_iter: 1\ntest_interval: 1", {"net"}),
                {"net file '" + dir_.file("nothere.prototxt") + "'", "(the solver's test_net) does not exist"});
}

TEST_F(BadInputSolverTest, BrokenNetInsideIsNamedByLayer) {
  const std::string broken = Write("broken.prototxt", std::string(kNet) +
                                                          "layer { name: 'bad' type: 'Poolng' "
                                                          "bottom: 'ip1' top: 'p' }\n");
  ExpectRefused("the net has an unknown layer type", Good("net: '" + broken + "'"),
                {"layer 'bad' has unknown type 'Poolng'"});
}

TEST_F(BadInputSolverTest, TrainNetWithoutLossIsNamed) {
  std::string without_loss = kNet;
  without_loss = without_loss.substr(0, without_loss.find("layer { name: 'loss'"));
  const std::string net = Write("no_loss.prototxt", without_loss +
                                                        "layer { name: 'prob' type: 'Softmax' bottom: "
                                                        "'ip1' top: 'prob' }\n");
  ExpectRefused("the train net has no loss", Good("net: '" + net + "'"),
                {"the train net 'Small' has no loss", "training would change nothing"});
}

TEST_F(BadInputSolverTest, NegativeTestIterIsNamed) {
  ExpectRefused("test_iter negative", Good("test_iter: -2\ntest_interval: 1"),
                {"test_iter -2 (test net #0) must not be negative"});
}

TEST_F(BadInputSolverTest, TestIterWithoutTestIntervalIsNamed) {
  ExpectRefused("test_iter without test_interval", Good("test_iter: 3"), {"has test nets but test_interval is 0"});
}

TEST_F(BadInputSolverTest, TestIterCountDifferentFromTestNetsIsNamed) {
  ExpectRefused("two test_iter for one test_net",
                Good("train_net: 'NET'\ntest_net: 'NET'\ntest_iter: 1\ntest_iter: 2\ntest_interval: 1", {"net"}),
                {"1 test net(s) but 2 test_iter value(s)"});
}

TEST_F(BadInputSolverTest, SnapshotFolderMissingIsNamed) {
  ExpectRefused("snapshot_prefix folder missing", Good("snapshot_prefix: 'DIR/nodir/sub/snap'"),
                {"snapshot_prefix '" + dir_.file("nodir/sub/snap") + "'",
                 "the folder '" + dir_.file("nodir/sub") + "' does not exist"});
}

TEST_F(BadInputSolverTest, SnapshotFolderThatIsAFileIsNamed) {
  ExpectRefused("snapshot_prefix folder is a file", Good("snapshot_prefix: 'NET/snap'"),
                {"the folder '" + net_ + "' is not a folder"});
}

TEST_F(BadInputSolverTest, SnapshotFolderNotWritableIsNamed) {
  // /proc refuses new files to everyone, root included (permissions alone would not stop root).
  ExpectRefused("snapshot_prefix folder not writable", Good("snapshot_prefix: '/proc/snap'"),
                {"snapshot_prefix '/proc/snap': cannot write in the folder '/proc'"});
}

TEST_F(BadInputSolverTest, SyntaxErrorNamesFileLineAndColumn) {
  const std::string solver = Solver("net: 'NET'\nbase_lr 0.01\n");
  test::ExpectBadInput("solver", "syntax error", kCrema + " train --solver=" + solver, {solver + ":2:"});
}

TEST_F(BadInputSolverTest, UnknownFieldNamesFileLineAndColumn) {
  const std::string solver = Solver(Good("learning_rate: 0.1"));
  test::ExpectBadInput("solver", "unknown field", kCrema + " train --solver=" + solver,
                       {solver + ":7:", "no field named \"learning_rate\""});
}

TEST_F(BadInputSolverTest, MissingSolverFileIsNamed) {
  test::ExpectBadInput("solver", "solver file missing", kCrema + " train --solver=" + dir_.file("nothere.prototxt"),
                       {"solver file '" + dir_.file("nothere.prototxt") + "' does not exist"});
}

TEST_F(BadInputSolverTest, NetGivenAsSolverNamesTheField) {
  test::ExpectBadInput("solver", "a net prototxt given as --solver", kCrema + " train --solver=" + net_,
                       {net_ + ":2:", "SolverParameter", "no field named \"name\""});
}

// The order of a person's fixes: the net first, then how long to train, then the rest.
TEST_F(BadInputSolverTest, NoNetIsNamedBeforeEverythingElse) {
  const std::vector<std::pair<std::string, std::string>> others = {
      {"lr_policy: 'bogus'", "lr_policy"},
      {"type: 'Foo'", "solver type"},
      {"iter_size: 0", "iter_size"},
      {"lr_policy: 'step' gamma: 0.1", "stepsize"},
      {"snapshot_prefix: 'DIR/nodir/snap'", "snapshot_prefix"},
      {"max_iter: 0", "max_iter"},
      {"base_lr: -1", "base_lr"},
      {"type: 'Adam' momentum2: 2", "momentum2"}};
  for (const auto& [setting, topic] : others) {
    const std::string message =
        ExpectRefused("no net and a bad " + topic, Good(setting, {"net"}), {"the solver names no net"});
    EXPECT_LACKS(message, topic);
  }
}

TEST_F(BadInputSolverTest, MissingNetFileIsNamedBeforeEverythingElse) {
  for (const auto& [setting, topic] :
       std::vector<std::pair<std::string, std::string>>{{"lr_policy: 'bogus'", "lr_policy"},
                                                        {"snapshot_prefix: 'DIR/nodir/snap'", "snapshot_prefix"},
                                                        {"type: 'Foo'", "solver type"},
                                                        {"max_iter: 0", "max_iter"}}) {
    const std::string message =
        ExpectRefused("net file missing and a bad " + topic, Good("net: 'DIR/nothere.prototxt'\n" + setting),
                      {"nothere.prototxt", "does not exist"});
    EXPECT_LACKS(message, topic);
  }
}

TEST_F(BadInputSolverTest, MaxIterIsNamedBeforeTheLearningRate) {
  const std::string message = ExpectRefused("no max_iter and a bad lr_policy",
                                            "net: 'NET'\nbase_lr: 0.01\nlr_policy: 'bogus'\n", {"no max_iter"});
  EXPECT_LACKS(message, "lr_policy");
}

TEST_F(BadInputSolverTest, LrPolicyIsNamedBeforeTheSnapshotFolder) {
  const std::string message =
      ExpectRefused("bad lr_policy and a missing snapshot folder",
                    Good("lr_policy: 'bogus'\nsnapshot_prefix: 'DIR/nodir/snap'"), {"unknown lr_policy"});
  EXPECT_LACKS(message, "snapshot_prefix");
}

// A solver state written by another update rule cannot continue this one.
TEST_F(BadInputSolverTest, SolverStateOfAnotherTypeIsNamed) {
  std::string output;
  ASSERT_EQ(test::RunCommand(Train(Good("type: 'Adam'\nsnapshot_prefix: 'DIR/adam'")), &output), 0) << output;
  const std::string state = dir_.file("adam_iter_2.solverstate");
  ASSERT_TRUE(FileExists(state)) << output;
  test::ExpectBadInput(
      "solver", "a solverstate of another solver type", Train(Good("max_iter: 4"), " --snapshot=" + state),
      {"solver state '" + state + "' was written by solver type Adam", "this solver's type is SGD", "type: \"Adam\""});
}

TEST_F(BadInputSolverTest, MissingSolverStateIsNamed) {
  test::ExpectBadInput("solver", "--snapshot file missing", Train(Good(), " --snapshot=" + dir_.file("no.solverstate")),
                       {"snapshot file '" + dir_.file("no.solverstate") + "' does not exist"});
}

// What Caffe accepts and trains sensibly with stays accepted; the degenerate schedules get a warning.
TEST_F(BadInputSolverTest, DegenerateButHarmlessSettingsAreAcceptedWithAWarning) {
  for (const auto& [setting, warning] : std::vector<std::pair<std::string, std::string>>{
           {"lr_policy: 'inv' power: 0.75", "lr_policy \"inv\" with gamma 0 keeps the rate at base_lr"},
           {"lr_policy: 'poly'", "lr_policy \"poly\" with power 0 keeps the rate at base_lr"},
           {"base_lr: 0", "base_lr is 0"},
           {"clip_gradients: -1", ""}}) {
    std::string output;
    EXPECT_EQ(test::RunCommand(Train(Good(setting)), &output), 0) << setting << "\n" << output;
    if (!warning.empty()) {
      EXPECT_NE(output.find(warning), std::string::npos) << setting << "\n" << output;
    }
  }
  // A solver with test_interval and no test net trains, untested, as Caffe's does: a train_net-only solver, and a
  // net-and-test_interval one without test_iter.
  for (const auto& [solver, warning] : std::vector<std::pair<std::string, std::string>>{
           {Good("train_net: 'NET'\ntest_interval: 5", {"net"}), "test_net or test_net_param"},
           {Good("test_interval: 1"), "no test_iter for the test phase of its net"}}) {
    std::string output;
    EXPECT_EQ(test::RunCommand(Train(solver), &output), 0) << output;
    EXPECT_NE(output.find("training will not be tested"), std::string::npos) << output;
    EXPECT_NE(output.find(warning), std::string::npos) << output;
    EXPECT_EQ(output.find("Testing net"), std::string::npos) << output;
  }
  // test_iter: 0 switches that test off: the net is built and never run. An unknown regularization_type is
  // unused without a weight decay. Both as in Caffe, with a warning.
  for (const auto& [setting, warning] : std::vector<std::pair<std::string, std::string>>{
           {"test_iter: 0\ntest_interval: 1", "test_iter 0 for test net #0: that net is never run"},
           {"regularization_type: 'l2'\nweight_decay: 0", "unknown regularization_type \"l2\" is not used"}}) {
    std::string output;
    EXPECT_EQ(test::RunCommand(Train(Good(setting)), &output), 0) << setting << "\n" << output;
    EXPECT_NE(output.find(warning), std::string::npos) << setting << "\n" << output;
    EXPECT_EQ(output.find("Testing net"), std::string::npos) << output;
  }
}

// The library keeps Caffe's use of a solver driven by Step: max_iter may be left out there; Solve needs it.
TEST_F(BadInputSolverTest, StepNeedsNoMaxIterButSolveDoes) {
  SolverParameter param;
  ReadProtoFromText("base_lr: 0.01 lr_policy: 'fixed' display: 0 snapshot_after_train: false", "solver", &param);
  param.set_net(net_);
  auto solver = CreateSolver(param);
  solver->Step(2);
  EXPECT_EQ(solver->iter(), 2);
  test::ExpectErrorContaining([&] { solver->Solve(); }, {"no max_iter"});
}

// Every example solver of the repository still passes the checks (their nets are not built here: some need data).
TEST_F(BadInputSolverTest, ExampleSolversPassTheSettingsChecks) {
  int checked = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(test::SourceDir() + "/examples")) {
    const std::string path = entry.path().string();
    if (path.find("solver") == std::string::npos || entry.path().extension() != ".prototxt") continue;
    SolverParameter param;
    ReadProtoFromTextFile(path, &param);
    try {
      Solver::CheckSettings(param);
      Solver::CheckMaxIter(param);
    } catch (const Error& error) {
      ADD_FAILURE() << path << ": " << error.what();
    }
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

}  // namespace
}  // namespace crema
