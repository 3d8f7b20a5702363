// Bad nets, as a user meets them through the tools (issue 12): nets with no layers (none written, or all left out
// by include rules), a train net without a loss, a layer listing a top twice, an Input layer without a shape,
// errors raised below a layer (an unknown filler, a blob too large to index, memory that cannot be had) that
// must still name the layer, and NaN or infinite values found by a net's debug_info. Each case runs the tool and
// checks what the user sees with test::ExpectBadInput, which also records the rows of docs/reliability.md.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const std::string kCrema = test::ToolsDir() + "/crema";

using test::SmallNet;
using test::WriteText;

// `crema time` (forward only unless `backward`) of the net `text`, written to dir/name.
std::string TimeCommand(const test::TempDir& dir, const std::string& name, const std::string& text,
                        bool backward = false) {
  WriteText(dir.file(name), text);
  return kCrema + " time --iterations=1 --model=" + dir.file(name) + (backward ? "" : " --forward_only");
}

std::string Solver(const std::string& net, const std::string& prefix) {
  return "net: '" + net + "'\nbase_lr: 0.01\nlr_policy: 'fixed'\nmax_iter: 2\nsnapshot_prefix: '" + prefix +
         "'\nsolver_mode: CPU\n";
}

// ---- nets without layers, or without a loss to train ----------------------------------------------------------

TEST(BadInputNetTest, NetsWithoutLayersAreRefused) {
  test::TempDir dir;
  test::ExpectBadInput("prototxt", "an empty net prototxt (0 bytes)", TimeCommand(dir, "empty.prototxt", ""),
                       {"the net", "empty.prototxt", "has no layers"});
  test::ExpectBadInput("prototxt", "a net prototxt with a name but no layers",
                       TimeCommand(dir, "named.prototxt", "name: 'Lonely'\n"),
                       {"net 'Lonely'", "named.prototxt", "has no layers"});
  // Every layer only in TRAIN: `crema test` builds the TEST phase, which keeps none of the 4.
  std::string train_only = SmallNet();
  for (size_t at = train_only.find("layer {"); at != std::string::npos; at = train_only.find("layer {", at + 1))
    train_only.insert(at + 7, " include { phase: TRAIN }");
  WriteText(dir.file("train_only.prototxt"), train_only);
  test::ExpectBadInput("prototxt", "a net whose include rules leave out every layer in the phase",
                       kCrema + " test --iterations=1 --model=" + dir.file("train_only.prototxt"),
                       {"net 'Small'", "train_only.prototxt", "has no layers in phase TEST", "all 4 of its layers"});
  // The same net builds in TRAIN.
  std::string output;
  EXPECT_EQ(test::RunCommand(kCrema + " time --iterations=1 --forward_only --model=" + dir.file("train_only.prototxt"),
                             &output),
            0)
      << output;
}

TEST(BadInputNetTest, ATrainNetWithoutALossIsRefusedBeforeTraining) {
  test::TempDir dir;
  std::string no_loss = SmallNet();
  no_loss.erase(no_loss.find("layer { name: 'loss'"));
  WriteText(dir.file("no_loss.prototxt"), no_loss);
  WriteText(dir.file("solver.prototxt"), Solver(dir.file("no_loss.prototxt"), dir.file("snap")));
  test::ExpectBadInput("prototxt", "a train net without a loss layer",
                       kCrema + " train --solver=" + dir.file("solver.prototxt"),
                       {"the train net 'Small' has no loss", "training would change nothing"});
  EXPECT_FALSE(FileExists(dir.file("snap_iter_2.caffemodel")));
  // A loss_weight on any top makes it trainable; a net for `crema time` needs no loss at all.
  std::string weighted = no_loss;
  weighted.insert(weighted.find("top: 'ip1'") + 10, " loss_weight: 1");
  WriteText(dir.file("weighted.prototxt"), weighted);
  WriteText(dir.file("weighted_solver.prototxt"), Solver(dir.file("weighted.prototxt"), dir.file("snap")));
  std::string output;
  EXPECT_EQ(test::RunCommand(kCrema + " train --solver=" + dir.file("weighted_solver.prototxt"), &output), 0) << output;
  EXPECT_TRUE(FileExists(dir.file("snap_iter_2.caffemodel")));
  EXPECT_EQ(test::RunCommand(kCrema + " time --iterations=1 --model=" + dir.file("no_loss.prototxt"), &output), 0)
      << output;
}

// ---- layers' tops --------------------------------------------------------------------------------------------

TEST(BadInputNetTest, TopsListedTwiceOrWithoutAShapeAreNamedAtTheirLayer) {
  test::TempDir dir;
  std::string twice = SmallNet();
  twice.insert(twice.find("top: 'conv1'") + 12, " top: 'conv1'");
  test::ExpectBadInput("prototxt", "a layer listing the same top twice", TimeCommand(dir, "twice.prototxt", twice),
                       {"layer 'conv1' (Convolution) lists top 'conv1' twice"});
  test::ExpectBadInput("prototxt", "an Input layer without input_param.shape",
                       TimeCommand(dir, "noshape.prototxt",
                                   "name: 'x'\nlayer { name: 'in' type: 'Input' top: 'data' }\n"
                                   "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'"
                                   " inner_product_param { num_output: 2 } }\n"),
                       {"layer 'in' (Input)", "no shape for top 'data'"});
  // Already right before issue 12, kept in the table: another layer's top written again, and a layer that cannot
  // run in place.
  std::string again = SmallNet();
  again.insert(again.find("layer { name: 'loss'"),
               "layer { name: 'ip1b' type: 'InnerProduct' bottom: 'conv1' top: 'ip1'"
               " inner_product_param { num_output: 10 } }\n");
  test::ExpectBadInput("prototxt", "two layers writing the same top", TimeCommand(dir, "again.prototxt", again),
                       {"layer 'ip1b' (InnerProduct) writes top blob 'ip1'", "an earlier layer already produced"});
  std::string in_place = SmallNet();
  in_place.replace(in_place.find("top: 'ip1'"), 10, "top: 'conv1'");
  in_place.replace(in_place.find("bottom: 'ip1'"), 13, "bottom: 'conv1'");
  test::ExpectBadInput("prototxt", "a layer that cannot run in place given its bottom as top",
                       TimeCommand(dir, "in_place.prototxt", in_place),
                       {"layer 'ip1' (InnerProduct) cannot run in place", "give top 'conv1' a name of its own"});
}

// ---- errors raised below a layer still name it -------------------------------------------------------------

TEST(BadInputNetTest, FillerAndBlobSizeErrorsNameTheLayer) {
  test::TempDir dir;
  std::string filler = SmallNet();
  filler.replace(filler.find("'xavier'"), 8, "'xaviar'");
  test::ExpectBadInput("prototxt", "an unknown filler type", TimeCommand(dir, "filler.prototxt", filler),
                       {"layer 'conv1' (Convolution)", "unknown filler type \"xaviar\"", "xavier, msra"});
  // 2e9 outputs x 64 inputs: the weights would hold 1.28e11 values.
  std::string wide = SmallNet();
  wide.replace(wide.find("num_output: 10"), 14, "num_output: 2000000000");
  test::ExpectBadInput("resources", "an InnerProduct whose weights exceed 2^31-1 values",
                       TimeCommand(dir, "wide.prototxt", wide),
                       {"layer 'ip1' (InnerProduct)", "2000000000 256 (512000000000)", "more than 2^31-1 values"});
  std::string giant = SmallNet();
  giant.replace(giant.find("dim: 4 dim: 1 dim: 12 dim: 12"), 29, "dim: 100000 dim: 100000 dim: 28 dim: 28");
  test::ExpectBadInput("resources", "a DummyData top of more than 2^31-1 values",
                       TimeCommand(dir, "giant.prototxt", giant),
                       {"layer 'data' (DummyData)", "100000 100000 28 28 (7840000000000)", "more than 2^31-1"});
  // Beyond even 64 bits, the count is still told right.
  std::string beyond = SmallNet();
  beyond.replace(beyond.find("dim: 4 dim: 1 dim: 12 dim: 12"), 29,
                 "dim: 2000000000 dim: 2000000000 dim: 2000000000 dim: 2000000000");
  test::ExpectBadInput("resources", "a DummyData shape whose count exceeds 64 bits",
                       TimeCommand(dir, "beyond.prototxt", beyond),
                       {"layer 'data' (DummyData)", "(more than 2^63 values)"});
}

// Memory is limited for the tool (RLIMIT_AS, inherited through the shell), as `ulimit -v` would, so that the
// case does not depend on the machine's memory or push it into the OOM killer.
class AddressSpaceLimit {
 public:
  explicit AddressSpaceLimit(rlim_t bytes) {
    getrlimit(RLIMIT_AS, &saved_);
    rlimit limited = saved_;
    limited.rlim_cur = bytes;
    ok_ = setrlimit(RLIMIT_AS, &limited) == 0;
  }
  ~AddressSpaceLimit() { setrlimit(RLIMIT_AS, &saved_); }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

TEST(BadInputNetTest, OutOfMemoryNamesTheLayerAndTheBytes) {
  if (test::kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer's shadow memory does not fit in a limited address space";
  test::TempDir dir;
  // 8,000,000 outputs x 256 inputs x 4 bytes = 8192000000 bytes of weights (a blob may hold that many values),
  // beyond a 6 GiB address space.
  std::string big = SmallNet();
  big.replace(big.find("num_output: 10"), 14, "num_output: 8000000");
  const std::string command = TimeCommand(dir, "big.prototxt", big);
  AddressSpaceLimit limit(6ull << 30);
  ASSERT_TRUE(limit.ok());
  test::ExpectBadInput("resources", "weights larger than the memory there is (address space limited to 6 GiB)", command,
                       {"layer 'ip1' (InnerProduct)", "out of host memory", "7.6 GiB (8192000000 bytes)"});
}

// The same refusal from crema's own cap, which holds under any allocator (and under AddressSanitizer): the few
// KiB of blobs before ip1 fit in 1 MiB, ip1's 4 MiB of weights (4096 x 256 floats) do not.
TEST(BadInputNetTest, HostMemoryLimitNamesTheLayerTheBytesAndTheLimit) {
  test::TempDir dir;
  std::string big = SmallNet();
  big.replace(big.find("num_output: 10"), 14, "num_output: 4096");
  const std::string command = TimeCommand(dir, "big.prototxt", big);
  test::ExpectBadInput("resources", "weights beyond the host memory limit (CREMA_HOST_MEMORY_LIMIT=1M)",
                       "CREMA_HOST_MEMORY_LIMIT=1M " + command,
                       {"layer 'ip1' (InnerProduct)", "out of host memory", "4.0 MiB (4194304 bytes)",
                        "limit 1.0 MiB (1048576 bytes) set by CREMA_HOST_MEMORY_LIMIT"});
  // Named before anything else is done, not as the first blob's problem.
  const std::string message =
      test::ExpectBadInput("resources", "a host memory limit that is not a size",
                           "CREMA_HOST_MEMORY_LIMIT=lots " + command, {"CREMA_HOST_MEMORY_LIMIT='lots' is not a size", "512M"});
  EXPECT_EQ(message.rfind("crema: error: CREMA_HOST_MEMORY_LIMIT='lots'", 0), 0u) << message;
  std::string output;
  EXPECT_EQ(test::RunCommand("CREMA_HOST_MEMORY_LIMIT=64m " + command, &output), 0) << output;
}

// ---- NaN and infinity: the net's debug_info checks every step -------------------------------------------------

TEST(BadInputNetTest, DebugInfoNamesTheFirstNonFiniteValueOfTheForwardPass) {
  test::TempDir dir;
  const std::string nan_net = SmallNet("type: 'constant' value: nan", "debug_info: true");
  WriteText(dir.file("nan.prototxt"), nan_net);
  test::ExpectBadInput("data", "a NaN input under the net's debug_info (crema test)",
                       kCrema + " test --iterations=1 --phase=TRAIN --model=" + dir.file("nan.prototxt"),
                       {"non-finite value in the forward pass of net 'Small'",
                        "layer 'data' (DummyData) produced nan in top 'data' 4 1 12 12 (576) at element 0"});
  // A huge input overflows in the convolution (25 products of 1e38 by weights of 1), the first layer to produce
  // an infinity.
  std::string huge = SmallNet("type: 'constant' value: 1e38", "debug_info: true");
  huge.replace(huge.find("type: 'xavier'"), 14, "type: 'constant' value: 1");
  test::ExpectBadInput("data", "an input that overflows under the net's debug_info (crema time)",
                       TimeCommand(dir, "huge.prototxt", huge),
                       {"non-finite value in the forward pass", "layer 'conv1' (Convolution) produced inf",
                        "in top 'conv1' 4 4 8 8 (1024) at element 0"});
  // Without debug_info the same nets run (a NaN loss is no error for `crema test`), as in Caffe.
  std::string output;
  WriteText(dir.file("nan_plain.prototxt"), SmallNet("type: 'constant' value: nan"));
  EXPECT_EQ(test::RunCommand(kCrema + " test --iterations=1 --phase=TRAIN --model=" + dir.file("nan_plain.prototxt"),
                             &output),
            0)
      << output;
  // Training says where a NaN came from whether or not debug_info is on (the solver's check, one implementation).
  WriteText(dir.file("solver.prototxt"), Solver(dir.file("nan_plain.prototxt"), dir.file("snap")));
  test::ExpectBadInput("data", "a NaN input while training", kCrema + " train --solver=" + dir.file("solver.prototxt"),
                       {"training diverged at iteration 0", "the loss is", "nan; first non-finite value",
                        "layer 'data' (DummyData) produced nan in top 'data' 4 1 12 12 (576) at element 0"});
}

// Power with power 0.5 at 0: the forward value is 0, the gradient 0.5 / sqrt(0) is infinite.
const char kSqrtAtZero[] = R"(name: 'Sqrt'
debug_info: true
layer { name: 'data' type: 'DummyData' top: 'data' top: 'target' dummy_data_param {
  shape { dim: 2 dim: 3 } shape { dim: 2 dim: 3 }
  data_filler { type: 'constant' value: 0 } data_filler { type: 'constant' value: 1 } } }
layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'
  inner_product_param { num_output: 3 weight_filler { type: 'constant' value: 0 } } }
layer { name: 'sqrt' type: 'Power' bottom: 'ip' top: 'sqrt' power_param { power: 0.5 } }
layer { name: 'loss' type: 'EuclideanLoss' bottom: 'sqrt' bottom: 'target' top: 'loss' }
)";

TEST(BadInputNetTest, DebugInfoNamesTheFirstNonFiniteGradientOfTheBackwardPass) {
  test::TempDir dir;
  test::ExpectBadInput("data", "a gradient that overflows under the net's debug_info (crema time, backward)",
                       TimeCommand(dir, "sqrt.prototxt", kSqrtAtZero, /*backward=*/true),
                       {"non-finite value in the backward pass of net 'Sqrt'",
                        "layer 'sqrt' (Power) produced -inf in the gradient of bottom 'ip' 2 3 (6) at element 0"});
}

// The same checks through the library: the first bad step, the element and the value, forward and backward.
TEST(NetDebugInfoTest, ChecksFollowNetParameterDebugInfoAndNameTheElement) {
  NetParameter param = test::ParseNet(kSqrtAtZero);
  {
    Net net(param);
    EXPECT_TRUE(net.check_finite());
    EXPECT_TRUE(net.debug_info());
    const float loss = net.Forward();
    // sqrt(0) = 0 against targets of 1: half the sum of squares over a batch of 2.
    EXPECT_FLOAT_EQ(loss, 0.5f * 6 / 2);
    test::ExpectErrorContaining([&] { net.Backward(); },
                                {"backward pass", "layer 'sqrt' (Power)", "bottom 'ip'", "at element 0"});
    // The solver's per-iteration debug_info switches the log lines only; the checks stay.
    net.set_debug_info(false);
    EXPECT_TRUE(net.check_finite());
  }
  param.set_debug_info(false);
  Net unchecked(param);
  EXPECT_FALSE(unchecked.check_finite());
  unchecked.Forward();
  EXPECT_NO_THROW(unchecked.Backward());
  const std::vector<float> gradient = test::DiffOf(*unchecked.blob_by_name("ip"));
  ASSERT_FALSE(gradient.empty());
  EXPECT_TRUE(std::isinf(gradient[0])) << gradient[0];
  // One element turned NaN is found where it is, by both the per-step check and the solver's description.
  Net forward(test::ParseNet(kSqrtAtZero));
  forward.set_check_finite(false);
  forward.Forward();
  forward.blob_by_name("sqrt")->mutable_cpu_data()[4] = std::nanf("");
  EXPECT_EQ(forward.DescribeNonFinite(2, /*gradients=*/false),
            "layer 'sqrt' (Power) produced nan in top 'sqrt' 2 3 (6) at element 4");
  EXPECT_EQ(forward.DescribeFirstNonFinite(), forward.DescribeNonFinite(2, false));
  EXPECT_EQ(forward.DescribeNonFinite(1, false), "");
}

}  // namespace
}  // namespace crema
