// Bad command lines (issue 12), in crema and in every other tool: an unknown flag (with the nearest known one),
// a flag value of the wrong type, an unknown, missing or second command, a wrong number of arguments, an unknown
// engine. Each gets status 1 and, as the last line of stderr, "<tool>: error: " naming the flag, value or
// argument; where the shape of the whole command line is wrong, the usage comes first, on stderr.
#include <gtest/gtest.h>

#include <fstream>

#include "core/context.hpp"
#include "io/proto_io.hpp"
#include "parallel/communicator.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

std::string Tool(const std::string& name) { return test::ToolsDir() + "/" + name; }
const std::string kCrema = Tool("crema");

class BadInputCommandLineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = Write("net.prototxt", R"(
name: 'Small'
layer { name: 'data' type: 'DummyData' top: 'data' top: 'label'
        dummy_data_param { shape { dim: 4 dim: 1 dim: 6 dim: 6 } shape { dim: 4 }
                           data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' value: 1 } } }
layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
        convolution_param { num_output: 2 kernel_size: 3 weight_filler { type: 'xavier' } } }
layer { name: 'ip1' type: 'InnerProduct' bottom: 'conv1' top: 'ip1'
        inner_product_param { num_output: 3 weight_filler { type: 'xavier' } } }
layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip1' bottom: 'label' top: 'loss' }
)");
    solver_ = Write("solver.prototxt", "net: '" + model_ +
                                           "'\nbase_lr: 0.01\nlr_policy: 'fixed'\nmax_iter: 2\n"
                                           "snapshot_prefix: '" +
                                           dir_.file("snap") + "'\n");
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.file(name);
    std::ofstream(path) << text;
    return path;
  }
  // Runs `command`, expecting status 1; returns stderr alone.
  std::string Stderr(const std::string& command) {
    const std::string err = dir_.file("stderr");
    std::string stdout_text;
    EXPECT_EQ(test::RunCommand("((" + command + ") 2>" + err + ")", &stdout_text), 1) << command;
    EXPECT_EQ(stdout_text, "") << command << ": the usage and the error belong on stderr";
    return test::FileBytes(err);
  }
  std::string Test(const std::string& flags) { return kCrema + " test --model=" + model_ + " --iterations=1 " + flags; }

  test::TempDir dir_;
  std::string model_, solver_;
};

// The good command lines the cases below break, to show that what they break is the only difference.
TEST_F(BadInputCommandLineTest, TheGoodCommandsRun) {
  std::string output;
  EXPECT_EQ(test::RunCommand(Test(""), &output), 0) << output;
  EXPECT_EQ(test::RunCommand(Test("--engine=reference --level=0 --forward_only=false --noforward_only"), &output), 0)
      << output;
  EXPECT_EQ(test::RunCommand(kCrema + " time --model " + model_ + " --iterations 1 --forward_only", &output), 0)
      << output;
  EXPECT_EQ(test::RunCommand(kCrema + " train --solver=" + solver_, &output), 0) << output;
}

// --- crema's flags -----------------------------------------------------------------------------------------

TEST_F(BadInputCommandLineTest, UnknownFlagSuggestsTheNearest) {
  test::ExpectBadInput("command line", "unknown flag (misspelt)", kCrema + " train --solvr=" + solver_,
                       {"crema: error: unknown flag --solvr (did you mean --solver?)"});
  test::ExpectBadInput("command line", "unknown flag (shortened)", Test("--iter=5"),
                       {"unknown flag --iter (did you mean --iterations?)"});
}

TEST_F(BadInputCommandLineTest, UnknownPrecisionListsTheKnownOnes) {
  test::ExpectBadInput("command line", "--precision with an unknown word", Test("--precision=half"),
                       {"crema: error: --precision: 'half' is no precision; use fp32, bf16 or fp16"});
}

TEST_F(BadInputCommandLineTest, UnknownFlagWithNothingNearPointsToHelp) {
  test::ExpectBadInput("command line", "unknown flag (nothing near)", Test("--frobnicate=3"),
                       {"unknown flag --frobnicate (crema --help lists the flags)"});
}

TEST_F(BadInputCommandLineTest, UnknownFlagIsNamedBeforeTheCommandRuns) {
  // Nothing is trained: the flag is refused before the solver is read.
  test::ExpectBadInput("command line", "unknown flag with an otherwise good train",
                       kCrema + " train --solver=" + solver_ + " --wieghts=x.caffemodel",
                       {"unknown flag --wieghts (did you mean --weights?)"});
  EXPECT_FALSE(FileExists(dir_.file("snap_iter_2.caffemodel")));
}

TEST_F(BadInputCommandLineTest, NonIntegerValueIsNamed) {
  test::ExpectBadInput("command line", "--iterations not an integer", Test("--iterations=abc"),
                       {"crema: error: --iterations='abc' is not an integer"});
  test::ExpectBadInput("command line", "--level not an integer", Test("--level=1.5"),
                       {"--level='1.5' is not an integer"});
}

TEST_F(BadInputCommandLineTest, OutOfRangeIntegerIsNamed) {
  test::ExpectBadInput("command line", "--iterations beyond 32 bits", Test("--iterations=99999999999"),
                       {"--iterations='99999999999' is out of the range of a 32-bit integer"});
}

TEST_F(BadInputCommandLineTest, NonNumberValueIsNamed) {
  test::ExpectBadInput("command line", "--scale not a number",
                       kCrema + " classify --model=" + model_ + " --weights=w --input=x --scale=half",
                       {"--scale='half' is not a number"});
}

TEST_F(BadInputCommandLineTest, NonBooleanValueIsNamed) {
  test::ExpectBadInput("command line", "--forward_only not true or false",
                       kCrema + " time --model=" + model_ + " --forward_only=maybe",
                       {"--forward_only='maybe' is not true or false"});
  test::ExpectBadInput("command line", "--noforward_only with a value",
                       kCrema + " time --model=" + model_ + " --noforward_only=true",
                       {"--noforward_only takes no value; write --forward_only=true"});
}

TEST_F(BadInputCommandLineTest, MemoryPlanFlagsNameWhatIsWrong) {
  std::string output;
  EXPECT_EQ(test::RunCommand(Test("--memory_plan=none --keep_blobs=conv1,ip1"), &output), 0) << output;
  test::ExpectBadInput("command line", "--memory_plan not share, recompute or none", Test("--memory_plan=off"),
                       {"crema: error: --memory_plan='off': use share, recompute or none"});
  test::ExpectBadInput("command line", "--keep_blobs names a blob the net lacks", Test("--keep_blobs=conv1,conv9"),
                       {"has no blob named 'conv9'"});
}

TEST_F(BadInputCommandLineTest, FoldFlagsNameWhatIsWrong) {
  std::string output;
  EXPECT_EQ(test::RunCommand(Test("--fold=none"), &output), 0) << output;
  test::ExpectBadInput("command line", "--fold not all or none", Test("--fold=some"),
                       {"crema: error: --fold='some': use all or none"});
  const std::string fold = kCrema + " fold --model=" + model_;
  const std::string folded = " --output_model=" + dir_.file("f.prototxt") + " --output_weights=" + dir_.file("f.w");
  EXPECT_EQ(test::RunCommand(fold + folded, &output), 0) << output;
  EXPECT_TRUE(test::FileBytes(dir_.file("f.w")).size() > 0);
  test::ExpectBadInput("command line", "crema fold without its outputs", fold,
                       {"crema: error: fold writes the folded net's definition and weights: give "
                        "--output_model=F.prototxt and --output_weights=F.caffemodel"});
  test::ExpectBadInput("command line", "crema fold writing over its model",
                       fold + " --output_model=" + model_ + " --output_weights=" + dir_.file("g.w"),
                       {"is read and would be overwritten: write the folded net elsewhere"});
  test::ExpectBadInput("command line", "crema fold with --fold=none", fold + folded + " --fold=none",
                       {"crema: error: fold with --fold=none would write the net unchanged"});
}

TEST_F(BadInputCommandLineTest, QuantizeNamesWhatIsWrong) {
  const std::string quantize = kCrema + " quantize --model=" + model_;
  test::ExpectBadInput("command line", "crema quantize without its output", quantize + " --iterations=1",
                       {"crema: error: quantize writes the model with its 8-bit settings: give --output=NET.prototxt"});
  test::ExpectBadInput("command line", "crema quantize writing over its model", quantize + " --output=" + model_,
                       {"is read and would be overwritten: write the quantized model elsewhere"});
  const std::string bad = dir_.file("bad_scale.prototxt");
  test::WriteText(
      bad,
      "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 16 dim: 6 dim: 6 } } }\n"
      "layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'\n"
      "        convolution_param { num_output: 16 kernel_size: 3 } quantization { input_scale: 0 } }\n");
  const std::string log_net = dir_.file("log_net.prototxt");
  test::WriteText(
      log_net,
      "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 1 dim: 4 dim: 4 } } }\n"
      "layer { name: 'log' type: 'Log' bottom: 'data' top: 'log' }\n"
      "layer { name: 'c' type: 'Convolution' bottom: 'log' top: 'c' "
      "convolution_param { num_output: 2 kernel_size: 3 } }\n");
  test::ExpectBadInput("command line", "crema quantize on a net whose layer's input is not finite (log of 0)",
                       kCrema + " quantize --model=" + log_net + " --iterations=1 --output=" + dir_.file("q.prototxt"),
                       {"crema: error: layer 'c': its input reached -inf during calibration; an input that is not "
                        "finite cannot be quantized"});
  test::ExpectBadInput("command line", "a convolution's quantization.input_scale of 0, below 0 or infinite",
                       kCrema + " time --model=" + bad + " --forward_only --phase=TEST --iterations=1",
                       {"layer 'conv' (Convolution): quantization.input_scale must be a positive number (it is 0)"});
}

TEST_F(BadInputCommandLineTest, MonitorAddressesAndLogsThatAreNoneAreNamed) {
  test::ExpectBadInput("command line", "--monitor not a port",
                       kCrema + " train --solver=" + solver_ + " --monitor=http",
                       {"crema: error: --monitor='http': give PORT (on 127.0.0.1) or HOST:PORT"});
  test::ExpectBadInput("command line", "--monitor on an address of no interface",
                       kCrema + " train --solver=" + solver_ + " --monitor=192.0.2.7:0",
                       {"--monitor='192.0.2.7:0': cannot listen on 192.0.2.7"});
  test::ExpectBadInput("command line", "crema monitor without logs", kCrema + " monitor",
                       {"monitor needs the logs to show: crema monitor LOG_OR_FOLDER..."});
  test::ExpectBadInput("command line", "crema monitor on a log that is not there",
                       kCrema + " monitor " + dir_.file("no_such.log") + " --export=" + dir_.file("report.html"),
                       {"crema: error: log '", "no_such.log' does not exist"});
  test::ExpectBadInput("command line", "crema monitor on a file without training lines",
                       kCrema + " monitor " + model_ + " --export=" + dir_.file("report.html"),
                       {"net.prototxt' holds no training log lines"});
}

TEST_F(BadInputCommandLineTest, FlagWithoutItsValueIsNamed) {
  test::ExpectBadInput("command line", "flag without its value (at the end)", kCrema + " test --model",
                       {"--model needs a value: --model=VALUE"});
  test::ExpectBadInput("command line", "flag without its value (another flag follows)",
                       kCrema + " test --model --iterations=1", {"--model needs a value"});
}

// --- crema's commands ---------------------------------------------------------------------------------------

TEST_F(BadInputCommandLineTest, UnknownCommandListsTheCommands) {
  test::ExpectBadInput("command line", "unknown command", kCrema + " trian --solver=" + solver_,
                       {"crema: error: unknown command 'trian' (did you mean train? commands: train, test, time, "
                        "classify, fold, export, import, quantize, device_query, monitor)"});
  test::ExpectBadInput(
      "command line", "unknown command (nothing near)", kCrema + " frobnicate",
      {"unknown command 'frobnicate' (commands: train, test, time, classify, fold, export, import, quantize, "
       "device_query, monitor)"});
}

TEST_F(BadInputCommandLineTest, NoCommandShowsTheUsageOnStderr) {
  const std::string err = Stderr(kCrema);
  EXPECT_CONTAINS(err, "usage: crema <command> <flags>");
  EXPECT_CONTAINS(err, "-solver");
  test::ExpectBadInput("command line", "no command", kCrema,
                       {"crema: error: no command given; commands: train, test, time, classify, fold, export, import, "
                        "quantize, device_query"});
  test::ExpectBadInput("command line", "flags but no command", kCrema + " --solver=" + solver_, {"no command given"});
}

TEST_F(BadInputCommandLineTest, TwoCommandsAreNamed) {
  EXPECT_CONTAINS(Stderr(kCrema + " train test --solver=" + solver_), "usage: crema");
  test::ExpectBadInput("command line", "two commands", kCrema + " train test --solver=" + solver_,
                       {"one command at a time: got 'train' and 'test'"});
}

TEST_F(BadInputCommandLineTest, PositionalArgumentAfterTheCommandIsNamed) {
  test::ExpectBadInput("command line", "a file given without its flag", kCrema + " train " + solver_,
                       {"unexpected argument '" + solver_ + "' after the command 'train'", "--solver=FILE"});
}

TEST_F(BadInputCommandLineTest, MissingRequiredFlagsAreNamed) {
  test::ExpectBadInput("command line", "train without --solver", kCrema + " train",
                       {"train needs --solver=SOLVER.prototxt"});
  test::ExpectBadInput("command line", "test without --model", kCrema + " test --iterations=1",
                       {"this command needs --model=NET.prototxt"});
  test::ExpectBadInput("command line", "classify without --weights", kCrema + " classify --model=" + model_,
                       {"classify needs --weights=TRAINED.caffemodel"});
  test::ExpectBadInput("command line", "classify without --input",
                       kCrema + " classify --model=" + model_ + " --weights=w.caffemodel",
                       {"classify needs --input=PATH"});
}

TEST_F(BadInputCommandLineTest, BadFlagValuesOfTheCommandsAreNamed) {
  test::ExpectBadInput("command line", "--iterations 0", Test("--iterations=0"),
                       {"--iterations must be positive, got 0"});
  test::ExpectBadInput("command line", "--phase unknown", Test("--phase=VAL"), {"--phase='VAL': use TRAIN or TEST"});
  test::ExpectBadInput("command line", "--gpu not an id", Test("--gpu=x"),
                       {"--gpu='x': 'x' is not a GPU id", "--gpu=all"});
  test::ExpectBadInput("command line", "--sigint_effect unknown",
                       kCrema + " train --solver=" + solver_ + " --sigint_effect=explode",
                       {"--sigint_effect='explode': use stop, snapshot or none"});
  test::ExpectBadInput("command line", "--collective_timeout not above 0",
                       kCrema + " train --solver=" + solver_ + " --collective_timeout=0",
                       {"--collective_timeout=0: give the seconds a rank may wait for the others (above 0)"});
  test::ExpectBadInput("command line", "--snapshot and --weights together",
                       kCrema + " train --solver=" + solver_ + " --snapshot=a.solverstate --weights=b.caffemodel",
                       {"give --snapshot (resume) or --weights (fine-tune), not both"});
  test::ExpectBadInput("command line", "--top_k 0",
                       kCrema + " classify --model=" + model_ + " --weights=w --input=x --top_k=0",
                       {"--top_k must be positive, got 0"});
  test::ExpectBadInput("command line", "--mean_file and --mean_value together",
                       kCrema + " classify --model=" + model_ + " --weights=w --input=x --mean_file=m --mean_value=1",
                       {"give --mean_file or --mean_value, not both"});
}

TEST_F(BadInputCommandLineTest, MissingFilesOfFlagsAreNamed) {
  test::ExpectBadInput("command line", "--solver file missing", kCrema + " train --solver=" + dir_.file("no.prototxt"),
                       {"solver file '" + dir_.file("no.prototxt") + "' does not exist"});
  test::ExpectBadInput("command line", "--model file missing",
                       kCrema + " test --model=" + dir_.file("no.prototxt") + " --iterations=1",
                       {"model file '" + dir_.file("no.prototxt") + "' does not exist"});
  test::ExpectBadInput("command line", "one of the --weights files missing",
                       Test("--weights=" + dir_.file("no.caffemodel")),
                       {"weights file '" + dir_.file("no.caffemodel") + "' does not exist"});
  test::ExpectBadInput("command line", "a solver given as --model", kCrema + " test --model=" + solver_,
                       {solver_ + ":1:", "NetParameter", "no field named \"net\""});
}

TEST_F(BadInputCommandLineTest, GpusThatAreNotThereAreNamed) {
  if (Context::gpu_count() > 0) GTEST_SKIP() << "this machine has a GPU; the cases are about machines without";
  test::ExpectBadInput("command line", "--gpu without a GPU", Test("--gpu=0"),
                       {"a GPU was asked for", Context::built_with_cuda() ? "no CUDA device is visible" : "CPU_ONLY"});
  test::ExpectBadInput("command line", "--gpu=all without a GPU", kCrema + " train --solver=" + solver_ + " --gpu=all",
                       {"--gpu=all was given, but no CUDA device is visible"});
  test::ExpectBadInput("command line", "--gpu=0,1 without GPUs", kCrema + " train --solver=" + solver_ + " --gpu=0,1",
                       {BuiltWithNccl() ? "--gpu=0,1: GPU 0 does not exist (0 CUDA device(s) visible)"
                                        : "--gpu=0,1 trains on 2 GPUs, which needs NCCL"});
  test::ExpectBadInput("command line", "device_query without a GPU", kCrema + " device_query",
                       {Context::built_with_cuda() ? "no CUDA device is visible" : "built without CUDA"});
}

TEST_F(BadInputCommandLineTest, UnknownEngineListsTheEngines) {
  test::ExpectBadInput("command line", "--engine names no engine", Test("--engine=bogus"),
                       {"--engine='bogus': no layer type has an engine 'bogus'", "engines: ", "reference"});
  test::ExpectBadInput("command line", "--engine misspelt", Test("--engine=refrence"),
                       {"no layer type has an engine 'refrence' (did you mean reference?)"});
  test::ExpectBadInput("command line", "--engine names an unknown layer type", Test("--engine=Convolutin:reference"),
                       {"--engine='Convolutin:reference': there is no layer type 'Convolutin' (did you mean "
                        "Convolution?)"});
  test::ExpectBadInput("command line", "--engine names an engine the type lacks", Test("--engine=Convolution:foo"),
                       {"--engine='Convolution:foo': Convolution has no engine 'foo'; its engines: ", "reference"});
  test::ExpectBadInput("command line", "--engine malformed", Test("--engine=Convolution:"),
                       {"'Convolution:' is neither an engine name", "TYPE:ENGINE"});
  test::ExpectBadInput("command line", "--engine unknown in train",
                       kCrema + " train --solver=" + solver_ + " --engine=bogus",
                       {"no layer type has an engine 'bogus'"});
}

// --debug_info: each layer's values are logged (Caffe's [Forward] lines) for test and time, and for train's
// displayed iterations.
TEST_F(BadInputCommandLineTest, DebugInfoLogsEachLayer) {
  std::string output;
  ASSERT_EQ(test::RunCommand(Test("--debug_info"), &output), 0) << output;
  EXPECT_CONTAINS(output, "[Forward] Layer conv1");
  ASSERT_EQ(test::RunCommand(Test(""), &output), 0) << output;
  EXPECT_EQ(output.find("[Forward]"), std::string::npos) << output;
  const std::string solver = Write("debug_solver.prototxt", "net: '" + model_ +
                                                                "'\nbase_lr: 0.01\nlr_policy: 'fixed'\nmax_iter: 2\n"
                                                                "display: 1\nsnapshot_after_train: false\n");
  ASSERT_EQ(test::RunCommand(kCrema + " train --debug_info --solver=" + solver, &output), 0) << output;
  EXPECT_CONTAINS(output, "[Forward] Layer ip1");
  EXPECT_CONTAINS(output, "[Backward] Layer ip1");
}

// --- the other tools ----------------------------------------------------------------------------------------

struct ToolCase {
  const char* tool;
  const char* expected;  // the start of the argument-count message
};

const ToolCase kTools[] = {
    {"compute_image_mean", "expected 1 or 2 arguments (INPUT_DB [OUTPUT_FILE]), got 0"},
    {"convert_imageset", "expected 3 arguments (ROOTFOLDER/ LISTFILE DB_NAME), got 0"},
    {"convert_mnist", "expected 3 arguments (IMAGES LABELS DB), got 0"},
    {"draw_net", "expected 2 arguments (NET.prototxt OUT.{svg,png,pdf,dot}), got 0"},
    {"extract_features", "expected 5 to 8 arguments (PRETRAINED_WEIGHTS NET_PROTOTXT"},
    {"parse_log", "expected 2 arguments (LOG OUTDIR), got 0"},
    {"plot_training_log", "expected at least 2 arguments (LOG [LOG ...] OUT.{svg,png,csv}), got 0"},
    {"upgrade_net_proto_text", "expected 2 arguments (NET_IN NET_OUT), got 0"},
    {"upgrade_net_proto_binary", "expected 2 arguments (NET_IN NET_OUT), got 0"},
    {"upgrade_solver_proto_text", "expected 2 arguments (SOLVER_IN SOLVER_OUT), got 0"},
};

TEST_F(BadInputCommandLineTest, EveryToolNamesAWrongArgumentCountAfterItsUsage) {
  for (const auto& tool : kTools) {
    const std::string err = Stderr(Tool(tool.tool));
    EXPECT_CONTAINS(err, std::string("usage: ") + tool.tool);
    test::ExpectBadInput(
        "command line", std::string(tool.tool) + " without arguments", Tool(tool.tool),
        {std::string(tool.tool) + ": error: " + tool.expected, std::string("see ") + tool.tool + " --help"});
  }
  test::ExpectBadInput("command line", "convert_mnist with one argument too many", Tool("convert_mnist") + " a b c d",
                       {"expected 3 arguments (IMAGES LABELS DB), got 4"});
  test::ExpectBadInput("command line", "plot_training_log with one argument", Tool("plot_training_log") + " a.log",
                       {"expected at least 2 arguments", "got 1"});
}

TEST_F(BadInputCommandLineTest, EveryToolNamesAnUnknownFlag) {
  for (const auto& tool : kTools) {
    test::ExpectBadInput(
        "command line", std::string(tool.tool) + " with an unknown flag", Tool(tool.tool) + " --frobnicate=1 a b c",
        {std::string(tool.tool) + ": error: unknown flag --frobnicate (" + tool.tool + " --help lists the flags)"});
  }
  test::ExpectBadInput("command line", "convert_mnist with a misspelt flag",
                       Tool("convert_mnist") + " --backnd=lmdb a b c",
                       {"convert_mnist: error: unknown flag --backnd (did you mean --backend?)"});
  test::ExpectBadInput("command line", "draw_net with a misspelt flag", Tool("draw_net") + " --rank_dir=TB a b",
                       {"draw_net: error: unknown flag --rank_dir (did you mean --rankdir?)"});
}

TEST_F(BadInputCommandLineTest, ToolsNameFlagValuesOfTheWrongType) {
  test::ExpectBadInput("command line", "convert_mnist --limit not an integer",
                       Tool("convert_mnist") + " --limit=ten a b c",
                       {"convert_mnist: error: --limit='ten' is not an integer"});
  test::ExpectBadInput("command line", "convert_imageset --resize_height not an integer",
                       Tool("convert_imageset") + " --resize_height=1e3 a b c",
                       {"convert_imageset: error: --resize_height='1e3' is not an integer"});
  test::ExpectBadInput("command line", "convert_imageset --shuffle_seed negative",
                       Tool("convert_imageset") + " --shuffle_seed=-3 a b c",
                       {"--shuffle_seed='-3' is not a non-negative integer"});
  test::ExpectBadInput("command line", "convert_imageset --gray not true or false",
                       Tool("convert_imageset") + " --gray=grey a b c", {"--gray='grey' is not true or false"});
}

// A flag of another command changes nothing: the command runs, and a warning says the flag was ignored.
TEST_F(BadInputCommandLineTest, FlagsOfAnotherCommandAreNamedAsIgnored) {
  std::string warnings;
  ASSERT_EQ(test::RunCommand(Test("--solver=" + solver_ + " --top_k=3"), &warnings), 0) << warnings;
  EXPECT_CONTAINS(warnings, "crema: warning: --solver is a flag of train, not of test; it is ignored");
  EXPECT_CONTAINS(warnings, "crema: warning: --top_k is a flag of classify, not of test; it is ignored");
  // The flags test reads give no warning.
  EXPECT_EQ(warnings.find("--model is"), std::string::npos) << warnings;
  EXPECT_EQ(warnings.find("--iterations is"), std::string::npos) << warnings;
}

}  // namespace
}  // namespace crema
