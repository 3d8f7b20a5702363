// End-to-end tests of the command-line tools: every bad input gets a clear message and a non-zero exit
// status (1, not a crash), and train/test/time print Caffe's log line shapes.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#ifdef CREMA_USE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include "core/context.hpp"
#include "io/proto_io.hpp"
#ifdef CREMA_USE_ONEDNN
#include "layers/onednn_util.hpp"
#endif
#include "test_util.hpp"

namespace crema {
namespace {

const std::string kCrema = test::ToolsDir() + "/crema";

class CliTest : public ::testing::Test {
 public:
  std::string WriteFile(const std::string& name, const std::string& text) { return Write(name, text); }

 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.file(name);
    std::ofstream(path) << text;
    return path;
  }
  // Runs crema with `args`; expects exit status `expected_status`; returns the output.
  std::string Crema(const std::string& args, int expected_status) {
    std::string output;
    const int status = test::RunCommand(kCrema + " " + args, &output);
    EXPECT_EQ(status, expected_status) << "crema " << args << "\n" << output;
    return output;
  }
  test::TempDir dir_;
};

const char kInput[] =
    "layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 1 dim: 4 dim: 4 } } }\n";

TEST_F(CliTest, SyntaxErrorReportsFileLineAndColumn) {
  const std::string model =
      Write("syntax.prototxt", std::string(kInput) + "layer {\n  name: 'relu'\n  type 'ReLU'\n}\n");
  const std::string output = Crema("test --model=" + model + " --iterations=1", 1);
  EXPECT_CONTAINS(output, model + ":4:8:");
  EXPECT_CONTAINS(output, "crema: error:");
}

TEST_F(CliTest, UnknownLayerTypeListsKnownTypes) {
  const std::string model =
      Write("unknown.prototxt", std::string(kInput) + "layer { name: 'act' type: 'Relu' bottom: 'data' top: 'a' }\n");
  const std::string output = Crema("test --model=" + model + " --iterations=1", 1);
  EXPECT_CONTAINS(output, "layer 'act' has unknown type 'Relu'");
  EXPECT_CONTAINS(output, "ReLU");
  EXPECT_CONTAINS(output, "Convolution");
}

TEST_F(CliTest, MissingBottomNamesLayerAndBlob) {
  const std::string model =
      Write("bottom.prototxt", std::string(kInput) + "layer { name: 'act' type: 'ReLU' bottom: 'dta' top: 'a' }\n");
  const std::string output = Crema("test --model=" + model + " --iterations=1", 1);
  EXPECT_CONTAINS(output, "'act'");
  EXPECT_CONTAINS(output, "'dta'");
}

TEST_F(CliTest, IncompatibleShapesNameLayerAndShapes) {
  const std::string model =
      Write("shapes.prototxt", std::string(kInput) +
                                   "layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'c' "
                                   "convolution_param { num_output: 3 kernel_size: 5 } }\n");
  const std::string output = Crema("test --model=" + model + " --iterations=1", 1);
  EXPECT_CONTAINS(output, "'conv'");
  EXPECT_CONTAINS(output, "2 1 4 4");
}

TEST_F(CliTest, MissingFilesAreNamed) {
  EXPECT_CONTAINS(Crema("test --model=/no/such/net.prototxt", 1), "/no/such/net.prototxt");
  EXPECT_CONTAINS(Crema("train --solver=/no/such/solver.prototxt", 1), "/no/such/solver.prototxt");
  const std::string model = Write("ok.prototxt", kInput);
  EXPECT_CONTAINS(Crema("test --model=" + model + " --weights=/no/such/w.caffemodel", 1), "/no/such/w.caffemodel");
  const std::string lmdb_net =
      Write("lmdb.prototxt",
            "layer { name: 'data' type: 'Data' top: 'data' data_param { source: '/no/such/lmdb' batch_size: 2 "
            "backend: LMDB } }\n");
  EXPECT_CONTAINS(Crema("test --model=" + lmdb_net + " --iterations=1", 1), "/no/such/lmdb");
  const std::string solver = Write("solver.prototxt", "net: '/no/such/train.prototxt' lr_policy: 'fixed'\n");
  EXPECT_CONTAINS(Crema("train --solver=" + solver, 1), "/no/such/train.prototxt");
  EXPECT_CONTAINS(Crema("train --solver=" + solver + " --snapshot=/no/such.solverstate", 1), "/no/such.solverstate");
}

TEST_F(CliTest, BadFlagsAreExplained) {
  EXPECT_CONTAINS(Crema("frobnicate", 1), "unknown command 'frobnicate'");
  EXPECT_CONTAINS(Crema("train", 1), "--solver");
  const std::string model = Write("ok.prototxt", kInput);
  EXPECT_CONTAINS(Crema("test --model=" + model + " --phase=VAL", 1), "--phase");
  EXPECT_CONTAINS(Crema("test --model=" + model + " --gpu=x", 1), "--gpu");
}

#ifdef CREMA_USE_ONEDNN
// --precision: bf16 names the layers that compute in it, or, where the CPU lacks bf16 instructions (here made so with
// oneDNN's DNNL_MAX_CPU_ISA), says once why they compute in float32; fp16 on the CPU says why too; a bad word is named.
TEST_F(CliTest, PrecisionIsReportedOrItsFallbackExplained) {
  const std::string model =
      Write("conv.prototxt", std::string(kInput) +
                                 "layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv' "
                                 "convolution_param { num_output: 8 kernel_size: 3 } }\n"
                                 "layer { name: 'ip' type: 'InnerProduct' bottom: 'conv' top: 'ip' "
                                 "inner_product_param { num_output: 3 } }\n");
  const std::string time = "time --model=" + model + " --iterations=1 --engine=onednn ";
  if (onednn::HasBfloat16Kernels()) {
    const std::string bf16 = Crema(time + "--precision=bf16", 0);
    EXPECT_CONTAINS(bf16, "2 layers compute their products in bfloat16 with float32 sums (conv, ip)");
    EXPECT_CONTAINS(bf16, "Convolution\tonednn (bfloat16)");
  }
  std::string without;
  EXPECT_EQ(test::RunCommand("DNNL_MAX_CPU_ISA=AVX2 " + kCrema + " " + time + "--precision=bf16", &without), 0)
      << without;
  EXPECT_CONTAINS(without, "computes in float32, though set to bfloat16: this CPU has no bf16 instructions");
  EXPECT_CONTAINS(without, "2 layers asked for half precision compute in float32 (conv [onednn], ip [onednn]");
  EXPECT_CONTAINS(Crema(time + "--precision=fp16", 0), "though set to float16: float16 computes on GPUs");
  EXPECT_CONTAINS(Crema(time + "--precision=half", 1), "--precision: 'half' is no precision; use fp32, bf16 or fp16");
}
#endif  // CREMA_USE_ONEDNN

// device_query lists each GPU's properties, or says clearly why there is none to list.
TEST_F(CliTest, DeviceQueryDescribesTheGpusOrSaysWhyThereAreNone) {
  if (Context::gpu_count() == 0) {
    const std::string output = Crema("device_query", 1);
    EXPECT_CONTAINS(output, "crema: error:");
    EXPECT_CONTAINS(output, Context::built_with_cuda() ? "no CUDA device is visible" : "built without CUDA");
    return;
  }
  const std::string output = Crema("device_query --gpu=0", 0);
  EXPECT_CONTAINS(output, "Name: ");
  EXPECT_CONTAINS(output, "Total global memory: ");
  EXPECT_CONTAINS(Crema("device_query --gpu=" + std::to_string(Context::gpu_count()), 1), "does not exist");
}

// A small net over two random LMDBs (written on first use), with a Dropout layer.
std::string SmallNet(CliTest* fixture, const test::TempDir& dir) {
  const std::string train_db = dir.file("train_lmdb"), test_db = dir.file("test_lmdb");
  if (!FileExists(train_db)) {
    test::WriteRandomDatums(train_db, 50, 8, 8, 3, 21);
    test::WriteRandomDatums(test_db, 20, 8, 8, 3, 22);
  }
  return fixture->WriteFile("net.prototxt", R"(
    name: 'cli'
    layer { name: 'data' type: 'Data' top: 'data' top: 'label' include { phase: TRAIN }
            data_param { source: ')" + train_db +
                                                R"(' batch_size: 8 backend: LMDB }
            transform_param { scale: 0.00390625 mirror: true } }
    layer { name: 'data' type: 'Data' top: 'data' top: 'label' include { phase: TEST }
            data_param { source: ')" + test_db + R"(' batch_size: 10 backend: LMDB }
            transform_param { scale: 0.00390625 } }
    layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
            convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: 'xavier' } } }
    layer { name: 'pool' type: 'Pooling' bottom: 'conv' top: 'pool' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
    layer { name: 'drop' type: 'Dropout' bottom: 'pool' top: 'pool' }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'pool' top: 'ip'
            inner_product_param { num_output: 3 weight_filler { type: 'xavier' } } }
    layer { name: 'accuracy' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: 'accuracy' include { phase: TEST } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
  )");
}

// crema quantize on a residual unit with a projection shortcut: the Eltwise SUM the inference rewrites fold into a
// convolution gets the range of the summand that convolution adds (the projection's output, signed: no ReLU), which
// crema test then keeps in 8 bits, to about the float net's loss.
TEST_F(CliTest, QuantizeMeasuresTheSummandOfAFoldedSum) {
  SmallNet(this, dir_);  // the databases
  const std::string net = Write("residual.prototxt", R"(
    name: 'residual'
    layer { name: 'data' type: 'Data' top: 'data' top: 'label' include { phase: TEST }
            data_param { source: ')" + dir_.file("test_lmdb") +
                                                         R"(' batch_size: 10 backend: LMDB }
            transform_param { scale: 0.00390625 } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
            convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }
    layer { name: 'proj' type: 'Convolution' bottom: 'conv1' top: 'proj'
            convolution_param { num_output: 16 kernel_size: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'branch' type: 'Convolution' bottom: 'conv1' top: 'branch'
            convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'sum' type: 'Eltwise' bottom: 'branch' bottom: 'proj' top: 'sum' }
    layer { name: 'relu2' type: 'ReLU' bottom: 'sum' top: 'sum' }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'sum' top: 'ip'
            inner_product_param { num_output: 3 weight_filler { type: 'xavier' } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
  )");
  const std::string quantized = dir_.file("residual_int8.prototxt");
  const std::string measured = Crema("quantize --model=" + net + " --iterations=2 --output=" + quantized, 0);
  EXPECT_CONTAINS(measured, "sum: the summand a convolution adds in [-");
  EXPECT_CONTAINS(measured, "with 4 layers set to 8 bits and 1 sums' summands measured");
  NetParameter written;
  ReadProtoFromTextFile(quantized, &written);
  for (const LayerParameter& layer : written.layer()) {
    if (layer.type() != "Eltwise") continue;
    ASSERT_TRUE(layer.has_quantization());
    EXPECT_FALSE(layer.quantization().input_unsigned());
    EXPECT_GT(layer.quantization().input_scale(), 0.f);
  }
  const auto loss_of = [](const std::string& log) {
    std::smatch match;
    EXPECT_TRUE(std::regex_search(log, match, std::regex("Loss: ([0-9.e+-]+)")));
    return match.empty() ? -1.0 : std::stod(match[1].str());
  };
  const double float_loss = loss_of(Crema("test --model=" + net + " --iterations=2", 0));
  const std::string tested = Crema("test --model=" + quantized + " --iterations=2", 0);
  EXPECT_NEAR(loss_of(tested), float_loss, 0.02 * float_loss);
#ifdef CREMA_USE_ONEDNN
  if (onednn::HasInt8DotProducts()) {  // where 8-bit layers compute in 8 bits
    EXPECT_CONTAINS(tested, "'proj' passes as signed 8-bit integers");
    EXPECT_CONTAINS(tested, "'sum' passes as unsigned 8-bit integers");
  }
#endif
}

// Trains the small net from the command line, straight and with a resume, and checks the log shapes, the
// snapshots, and crema test / crema time on the result.
TEST_F(CliTest, TrainResumeTestAndTime) {
  const std::string net = SmallNet(this, dir_);
  auto solver = [&](const std::string& prefix, int max_iter) {
    return Write(prefix + "_solver.prototxt",
                 "net: '" + net +
                     "' test_iter: 2 test_interval: 10 base_lr: 0.01 "
                     "momentum: 0.9 weight_decay: 0.0005 lr_policy: 'inv' gamma: 0.0001 power: 0.75 display: 5 "
                     "max_iter: " +
                     std::to_string(max_iter) + " snapshot: 15 snapshot_prefix: '" + dir_.file(prefix) +
                     "' solver_mode: CPU random_seed: 3\n");
  };
  const std::string log = Crema("train --solver=" + solver("straight", 30), 0);
  EXPECT_TRUE(std::regex_search(log, std::regex("Iteration 5, loss = [0-9.e+-]+\n")));
  EXPECT_TRUE(std::regex_search(log, std::regex("Iteration 5, lr = [0-9.e+-]+\n")));
  EXPECT_TRUE(
      std::regex_search(log, std::regex("Train net output #0: loss = [0-9.e+-]+ \\(\\* 1 = [0-9.e+-]+ loss\\)")));
  EXPECT_TRUE(std::regex_search(log, std::regex("Iteration 10, Testing net \\(#0\\)")));
  EXPECT_TRUE(std::regex_search(log, std::regex("Test net output #0: accuracy = [0-9.e+-]+\n")));
  EXPECT_TRUE(
      std::regex_search(log, std::regex("Test net output #1: loss = [0-9.e+-]+ \\(\\* 1 = [0-9.e+-]+ loss\\)")));
  EXPECT_CONTAINS(log, "Optimization Done.");

  Crema("train --solver=" + solver("split", 15), 0);
  Crema("train --solver=" + solver("split", 30) + " --snapshot=" + dir_.file("split_iter_15.solverstate"), 0);
  const std::string straight = test::FileBytes(dir_.file("straight_iter_30.caffemodel"));
  ASSERT_FALSE(straight.empty());
  EXPECT_TRUE(test::FileBytes(dir_.file("split_iter_30.caffemodel")) == straight)
      << "crema train --snapshot did not reproduce the uninterrupted run";

  const std::string tested =
      Crema("test --model=" + net + " --weights=" + dir_.file("straight_iter_30.caffemodel") + " --iterations=2", 0);
  EXPECT_TRUE(std::regex_search(tested, std::regex("\\] accuracy = [0-9.e+-]+\n")));
  EXPECT_TRUE(std::regex_search(tested, std::regex("\\] loss = [0-9.e+-]+ \\(\\* 1 = [0-9.e+-]+ loss\\)")));

  // crema quantize: the convolution's input range measured over TEST batches, written into a copy of the model
  // (pixels scaled to [0, 1]: unsigned); crema test runs the copy, in 8 bits where the CPU has the kernels, to about
  // the float net's loss.
  const std::string quantized = dir_.file("quantized.prototxt");
  const std::string measured =
      Crema("quantize --model=" + net + " --weights=" + dir_.file("straight_iter_30.caffemodel") +
                " --iterations=2 --output=" + quantized,
            0);
  EXPECT_CONTAINS(measured, "conv: input in [");
  NetParameter written;
  ReadProtoFromTextFile(quantized, &written);
  int set = 0;
  for (const LayerParameter& layer : written.layer()) {
    EXPECT_EQ(layer.has_quantization(), layer.type() == "Convolution" || layer.type() == "InnerProduct")
        << layer.name();
    if (!layer.has_quantization()) continue;
    ++set;
    if (layer.type() != "Convolution") continue;
    EXPECT_TRUE(layer.quantization().input_unsigned());
    EXPECT_GE(layer.quantization().input_scale(), 255.f);  // inputs at most 1
  }
  EXPECT_EQ(set, 2);
  const std::string quantized_test = Crema(
      "test --model=" + quantized + " --weights=" + dir_.file("straight_iter_30.caffemodel") + " --iterations=2", 0);
  const auto loss_of = [](const std::string& log) {
    std::smatch match;
    EXPECT_TRUE(std::regex_search(log, match, std::regex("Loss: ([0-9.e+-]+)")));
    return match.empty() ? -1.0 : std::stod(match[1].str());
  };
  EXPECT_NEAR(loss_of(quantized_test), loss_of(tested), 0.02 * loss_of(tested));
#ifdef CREMA_USE_ONEDNN
  if (onednn::HasInt8DotProducts()) {  // where 8-bit layers compute in 8 bits
    EXPECT_CONTAINS(Crema("time --model=" + quantized + " --forward_only --phase=TEST --iterations=1", 0),
                    "conv\tConvolution\tonednn (8-bit integers)");
  }
#endif
  EXPECT_CONTAINS(Crema("quantize --model=" + net + " --iterations=1", 1), "give --output=NET.prototxt");
  // A net fed by an Input layer has only zeros to measure: said, naming a layer.
  const std::string deploy =
      Write("deploy.prototxt", std::string(kInput) +
                                   "layer { name: 'c' type: 'Convolution' bottom: 'data' top: 'c' "
                                   "convolution_param { num_output: 2 kernel_size: 3 } }\n");
  EXPECT_CONTAINS(
      Crema("quantize --model=" + deploy + " --iterations=1 --output=" + dir_.file("deploy_int8.prototxt"), 0),
      "1 of the 1 layers saw only zeros as input (the first: 'c')");

  const std::string timed = Crema("time --model=" + net + " --iterations=2", 0);
  EXPECT_TRUE(std::regex_search(timed, std::regex("Average Forward pass: [0-9.e+-]+ ms")));
  EXPECT_TRUE(std::regex_search(timed, std::regex("Average Backward pass: [0-9.e+-]+ ms")));
  EXPECT_TRUE(std::regex_search(timed, std::regex("Average Forward-Backward: [0-9.e+-]+ ms")));
  EXPECT_CONTAINS(timed, "conv\tforward:");
  // --layer_times=false: whole passes only, as a training run goes; no per-layer times.
  const std::string whole = Crema("time --model=" + net + " --iterations=2 --layer_times=false", 0);
  EXPECT_TRUE(std::regex_search(whole, std::regex("Average Forward-Backward: [0-9.e+-]+ ms")));
  EXPECT_CONTAINS(whole, "Average time per layer: (not measured: --layer_times=false)");
  EXPECT_EQ(whole.find("conv\tforward:"), std::string::npos);
  EXPECT_CONTAINS(Crema("time --model=" + net + " --iterations=1 --cudnn_algorithms=fastest", 1),
                  "--cudnn_algorithms='fastest': use measured");
  // Each layer's engine, and the peak memory the run held.
  EXPECT_CONTAINS(timed, "Engines:");
#ifdef CREMA_USE_ONEDNN
  EXPECT_CONTAINS(timed, "conv\tConvolution\tonednn");
  EXPECT_CONTAINS(timed, "pool\tPooling\tonednn");
  std::string convolution_engines = "onednn, native, im2col_batched, reference";
#else
  EXPECT_CONTAINS(timed, "conv\tConvolution\tnative");
  EXPECT_CONTAINS(timed, "pool\tPooling\tnative");
  std::string convolution_engines = "native, im2col_batched, reference";
#endif
#ifdef CREMA_USE_CUDNN
  convolution_engines = "cudnn, " + convolution_engines;  // the GPU's, listed first
#endif
  EXPECT_TRUE(std::regex_search(timed, std::regex("Memory: peak [0-9.]+ MiB on the host")));
  // Beside the plan, what the layers hold for their whole life: here the batches the Data layer reads ahead.
  EXPECT_TRUE(
      std::regex_search(timed, std::regex("Held by layers beside the plan: [0-9.]+ MiB on the host \\([0-9]+ "
                                          "buffers; the largest: .*'data' batches read ahead \\(up to [0-9]+\\) "
                                          "[0-9.]+ MiB")));
  // What recompute costs (here nothing: storing takes no more memory in so small a net), and the plan's bytes.
  EXPECT_TRUE(std::regex_search(timed, std::regex("Recompute: 0 of [0-9]+ steps run forward again in backward")));
  const std::string recomputed = Crema("time --model=" + net + " --iterations=1 --memory_plan=recompute", 0);
  EXPECT_TRUE(std::regex_search(recomputed, std::regex("Recompute: [0-9]+ of [0-9]+ steps run forward again in "
                                                       "backward \\([0-9]+ segments\\), [0-9.e+-]+ ms per iteration")));
  EXPECT_TRUE(std::regex_search(recomputed, std::regex("Memory plan, forward and backward: activations, gradients and "
                                                       "workspaces take [0-9.e+-]+ MiB planned")));
  // The machine and its measured GEMM peak; each matrix-product layer's arithmetic against it. conv: 8 images,
  // 4 outputs of 3x3x1 taps at 6x6 positions: 8 x (2 x 4 x 9 x 36 + 4 x 36 for the bias) = 21,888 FLOP forward;
  // backward the weight and bias gradients only (the data gets none), as many.
  EXPECT_CONTAINS(timed, "CPU: ");
  EXPECT_CONTAINS(timed, "Threads: matrix products on ");
  EXPECT_CONTAINS(timed, "BLAS: ");
  EXPECT_TRUE(std::regex_search(timed, std::regex("GEMM peak: [0-9.]+ GFLOP/s")));
  EXPECT_TRUE(std::regex_search(
      timed, std::regex("conv\tforward: 0\\.02189 MFLOP, [0-9.]+ GFLOP/s \\([0-9]+% of the GEMM peak\\)")));
  EXPECT_TRUE(std::regex_search(timed, std::regex("conv\tbackward: 0\\.02189 MFLOP, [0-9.]+ GFLOP/s")));
  EXPECT_TRUE(std::regex_search(timed, std::regex("Arithmetic of the net, forward-backward: [0-9.]+ [MG]FLOP")));
  // --engine forces one; a bare name applies where a type has such an engine; bad items are explained.
  const std::string forced = Crema("time --model=" + net + " --iterations=1 --engine=Convolution:reference", 0);
  EXPECT_CONTAINS(forced, "conv\tConvolution\treference");
  EXPECT_CONTAINS(Crema("time --model=" + net + " --iterations=1 --engine=reference", 0),
                  "conv\tConvolution\treference");
  EXPECT_CONTAINS(Crema("time --model=" + net + " --iterations=1 --engine=Convolution:fast", 1),
                  "--engine='Convolution:fast': Convolution has no engine 'fast'; its engines: " + convolution_engines);
  EXPECT_CONTAINS(Crema("time --model=" + net + " --iterations=1 --engine=Pooling:", 1), "--engine='Pooling:'");
  // crema train takes --engine too; the net's build log names each layer's engine.
  const std::string reference_log = Crema("train --solver=" + solver("reference", 30) + " --engine=reference", 0);
  EXPECT_CONTAINS(reference_log, "conv [reference] -> conv");

  // Fine-tuning from the weights, and refusing --weights with --snapshot.
  EXPECT_CONTAINS(
      Crema("train --solver=" + solver("tune", 5) + " --weights=" + dir_.file("straight_iter_30.caffemodel"), 0),
      "Fine-tuning from");
  EXPECT_CONTAINS(Crema("train --solver=" + solver("tune", 5) + " --weights=a --snapshot=b", 1), "not both");
}

// Forms Caffe accepts that crema once refused: fractional labels from a filler (truncated toward zero, one
// warning per layer) and two layers of one name (one warning naming both), through crema test and crema time.
TEST_F(CliTest, FilesCaffeAcceptsRunWithWarnings) {
  const std::string net = Write("caffe_forms.prototxt", R"(
    name: 'forms'
    layer { name: 'data' type: 'DummyData' top: 'data' top: 'label' dummy_data_param {
            shape { dim: 8 dim: 5 } shape { dim: 8 } data_filler { type: 'gaussian' std: 1 }
            data_filler { type: 'uniform' min: 0 max: 4 } } }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'
            inner_product_param { num_output: 4 weight_filler { type: 'xavier' } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
    layer { name: 'loss' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: 'accuracy' }
  )");
  for (const std::string command : {"test --iterations=3", "time --iterations=2"}) {
    const std::string output = Crema(command + " --model=" + net, 0);
    EXPECT_CONTAINS(output, "two layers are named 'loss' (SoftmaxWithLoss, then Accuracy); accepted as Caffe does");
    for (const std::string layer : {"layer 'loss' (SoftmaxWithLoss): label ", "layer 'loss' (Accuracy): label "}) {
      const size_t first = output.find(layer);
      EXPECT_NE(first, std::string::npos) << layer << " in:\n" << output;
      EXPECT_EQ(output.find(layer, first + 1), std::string::npos) << "warned twice: " << layer << "\n" << output;
    }
    EXPECT_CONTAINS(output, "truncated toward zero as Caffe does");
  }
}

// A resumed run names every field of the solver and the net that changed since the snapshot; a .caffemodel
// carries its net's whole definition, so crema time and crema test need no --model beside it.
TEST_F(CliTest, ResumeNamesChangesAndACaffemodelDefinesItsNet) {
  const std::string net = SmallNet(this, dir_);
  auto solver = [&](const std::string& name, const std::string& net_file, const std::string& base_lr, int max_iter) {
    return Write(name + "_solver.prototxt",
                 "net: '" + net_file + "' test_iter: 2 test_interval: 10 base_lr: " + base_lr +
                     " momentum: 0.9 lr_policy: 'fixed' display: 5 max_iter: " + std::to_string(max_iter) +
                     " snapshot: 10 snapshot_prefix: '" + dir_.file("cfg") + "' solver_mode: CPU random_seed: 3\n");
  };
  Crema("train --solver=" + solver("first", net, "0.01", 10), 0);
  // Unchanged, a resume says nothing of changes.
  EXPECT_EQ(Crema("train --solver=" + solver("first", net, "0.01", 10) +
                      " --snapshot=" + dir_.file("cfg_iter_10.solverstate"),
                  0)
                .find("changed since the snapshot"),
            std::string::npos);
  // The same net file with a smaller training batch, and another learning rate.
  std::string text = test::FileBytes(net);
  const size_t batch = text.find("batch_size: 8");
  ASSERT_NE(batch, std::string::npos);
  text.replace(batch, 13, "batch_size: 4");
  Write("net.prototxt", text);
  const std::string resumed = Crema(
      "train --solver=" + solver("second", net, "0.002", 20) + " --snapshot=" + dir_.file("cfg_iter_10.solverstate"),
      0);
  EXPECT_CONTAINS(resumed, "with 3 change(s) to the solver or net it was trained with");
  EXPECT_CONTAINS(resumed, "changed since the snapshot: solver base_lr: 0.01 -> 0.002");
  EXPECT_CONTAINS(resumed, "changed since the snapshot: solver max_iter: 10 -> 20");
  EXPECT_CONTAINS(resumed, "changed since the snapshot: net layer 'data' data_param.batch_size: 8 -> 4");
  EXPECT_CONTAINS(resumed, "Iteration 20, loss = ");

  // The snapshot's definition: the layers as the prototxt gave them (fillers included), no Split layers.
  NetParameter stored;
  ReadProtoFromBinaryFile(dir_.file("cfg_iter_20.caffemodel"), &stored);
  ASSERT_EQ(stored.layer_size(), 6);  // the TRAIN net: data, conv, pool, drop, ip, loss
  EXPECT_EQ(stored.layer(1).convolution_param().weight_filler().type(), "xavier");
  EXPECT_EQ(stored.layer(0).data_param().batch_size(), 4);
  EXPECT_EQ(stored.layer(5).bottom(0), "ip");
  const std::string timed = Crema("time --weights=" + dir_.file("cfg_iter_20.caffemodel") + " --iterations=1", 0);
  EXPECT_CONTAINS(timed, "building the net defined in the weights file");
  EXPECT_CONTAINS(timed, "conv\tforward:");
  // The definition builds for TEST as well (include rules are the writing net's), and scores with its weights.
  const std::string tested = Crema("test --weights=" + dir_.file("cfg_iter_20.caffemodel") + " --iterations=2", 0);
  EXPECT_TRUE(std::regex_search(tested, std::regex("\\] loss = [0-9.e+-]+ \\(\\* 1 = [0-9.e+-]+ loss\\)")));
}

// snapshot_format: HDF5 end to end (snapshots, resume, test, fine-tuning from .h5 weights), the fine-tuning log
// of layers no weights file covers, debug_info's lines in Caffe's shapes, and the snapshot folder checked first.
TEST_F(CliTest, Hdf5SnapshotsFineTuningAndDebugInfo) {
  const std::string net = SmallNet(this, dir_);
  auto solver = [&](const std::string& prefix, int max_iter, const std::string& net_path, const std::string& extra) {
    return Write(prefix + "_solver.prototxt",
                 "net: '" + net_path +
                     "' base_lr: 0.01 momentum: 0.9 lr_policy: 'fixed' "
                     "display: 5 max_iter: " +
                     std::to_string(max_iter) + " snapshot: 5 snapshot_prefix: '" + dir_.file(prefix) +
                     "' solver_mode: CPU random_seed: 3 snapshot_format: HDF5 " + extra + "\n");
  };
  const std::string log = Crema("train --solver=" + solver("h5", 10, net, "debug_info: true"), 0);
  EXPECT_CONTAINS(log, "Snapshotting to HDF5 file " + dir_.file("h5_iter_5.caffemodel.h5"));
  EXPECT_CONTAINS(log, "Snapshotting solver state to HDF5 file " + dir_.file("h5_iter_5.solverstate.h5"));
  const std::string number = "[0-9.e+-]+(nan|inf)?\n";
  for (const std::string line :
       {"    \\[Forward\\] Layer conv, top blob conv data: ", "    \\[Forward\\] Layer conv, param blob 0 data: ",
        "    \\[Forward\\] Layer ip, param blob 1 data: ", "    \\[Backward\\] Layer ip, bottom blob pool diff: ",
        "    \\[Backward\\] Layer conv, param blob 1 diff: "})
    EXPECT_TRUE(std::regex_search(log, std::regex(line + number))) << "no line " << line << " in:\n" << log;
  EXPECT_TRUE(
      std::regex_search(log, std::regex("    \\[Update\\] Layer ip, param 0 data: [0-9.e+-]+; diff: " + number)));
  EXPECT_TRUE(std::regex_search(
      log, std::regex("    \\[Backward\\] All net params \\(data, diff\\): L1 norm = \\([0-9.e+-]+, [0-9.e+-]+\\); "
                      "L2 norm = \\([0-9.e+-]+, [0-9.e+-]+\\)\n")));
  // Only the iterations that display (0 and 5 of 10) log them, as in Caffe.
  const std::regex update_line("\\[Update\\] Layer ip, param 0");
  EXPECT_EQ(std::distance(std::sregex_iterator(log.begin(), log.end(), update_line), std::sregex_iterator()), 2);

  // Resume from the HDF5 state; test with the HDF5 weights.
  EXPECT_CONTAINS(
      Crema("train --solver=" + solver("h5", 15, net, "") + " --snapshot=" + dir_.file("h5_iter_10.solverstate.h5"), 0),
      "Snapshotting solver state to HDF5 file " + dir_.file("h5_iter_15.solverstate.h5"));
  const std::string tested =
      Crema("test --model=" + net + " --weights=" + dir_.file("h5_iter_15.caffemodel.h5") + " --iterations=2", 0);
  EXPECT_TRUE(std::regex_search(tested, std::regex("\\] accuracy = [0-9.e+-]+\n")));

  // Fine-tuning a net whose classifier was renamed: that layer, and only it, starts from its fillers.
  std::string renamed = test::FileBytes(net);
  renamed = std::regex_replace(renamed, std::regex("name: 'ip'"), "name: 'ip_new'");
  const std::string tuned_net = Write("tuned.prototxt", renamed);
  const std::string tuned =
      Crema("train --solver=" + solver("tuned", 5, tuned_net, "") +
                " --weights=" + dir_.file("h5_iter_15.caffemodel.h5") + "," + dir_.file("h5_iter_5.caffemodel.h5"),
            0);
  EXPECT_CONTAINS(tuned, "Layer ip_new: not in the weights files; starting from its fillers");
  EXPECT_EQ(tuned.find("Layer conv: not in the weights files"), std::string::npos) << tuned;
  EXPECT_CONTAINS(tuned, "Ignoring source layer ip");
  // The solver's own `weights` entries, all of them in order, when the command line names none.
  const std::string from_solver =
      Crema("train --solver=" + solver("listed", 5, tuned_net,
                                       "weights: '" + dir_.file("h5_iter_15.caffemodel.h5") + "' weights: '" +
                                           dir_.file("h5_iter_5.caffemodel.h5") + "'"),
            0);
  EXPECT_CONTAINS(from_solver, "Copying weights from " + dir_.file("h5_iter_15.caffemodel.h5"));
  EXPECT_CONTAINS(from_solver, "Copying weights from " + dir_.file("h5_iter_5.caffemodel.h5"));

  // A weights file whose shapes differ from the net's names the layer and both shapes.
  const std::string wider =
      Write("wider.prototxt", std::regex_replace(test::FileBytes(net), std::regex("num_output: 3"), "num_output: 5"));
  const std::string mismatch =
      Crema("test --model=" + wider + " --weights=" + dir_.file("h5_iter_5.caffemodel.h5") + " --iterations=1", 1);
  EXPECT_CONTAINS(mismatch, "layer 'ip'");
  EXPECT_CONTAINS(mismatch, "3 36 (108)");
  EXPECT_CONTAINS(mismatch, "5 36 (180)");

  // A snapshot folder that does not exist stops training before the first iteration.
  const std::string nowhere = Write("nowhere_solver.prototxt", "net: '" + net +
                                                                   "' base_lr: 0.01 lr_policy: 'fixed' "
                                                                   "max_iter: 5 snapshot: 5 snapshot_prefix: '" +
                                                                   dir_.file("absent/run") + "'\n");
  const std::string refused = Crema("train --solver=" + nowhere, 1);
  EXPECT_CONTAINS(refused, "the folder '" + dir_.file("absent") + "' does not exist");
  EXPECT_EQ(refused.find("Iteration 0"), std::string::npos) << refused;
}

TEST_F(CliTest, InterruptSnapshotsThenStops) {
  const std::string net = SmallNet(this, dir_);
  const std::string solver =
      Write("long_solver.prototxt", "net: '" + net +
                                        "' base_lr: 0.01 lr_policy: 'fixed' "
                                        "max_iter: 100000000 display: 0 snapshot_prefix: '" +
                                        dir_.file("stopped") + "' solver_mode: CPU random_seed: 3\n");
  // Wait until training runs (the first log line of the loop), then send Ctrl-C's signal.
  const std::string log = dir_.file("interrupted.log");
  std::string output;
  const int status = test::RunCommand("(" + kCrema + " train --solver=" + solver + " > " + log +
                                          " 2>&1 & pid=$!; "
                                          "for i in $(seq 100); do grep -q 'Solving' " +
                                          log +
                                          " && break; sleep 0.1; done; sleep 0.5; "
                                          "kill -INT $pid; wait $pid)",
                                      &output);
  EXPECT_EQ(status, 0) << test::FileBytes(log);
  const std::string text = test::FileBytes(log);
  EXPECT_CONTAINS(text, "Snapshotting solver state to binary proto file");
  EXPECT_CONTAINS(text, "Optimization stopped early at iteration");
  std::smatch iteration;
  ASSERT_TRUE(std::regex_search(text, iteration, std::regex("stopped_iter_([0-9]+)\\.solverstate")));
  EXPECT_TRUE(FileExists(dir_.file("stopped_iter_" + iteration[1].str() + ".caffemodel")));
  EXPECT_TRUE(FileExists(dir_.file("stopped_iter_" + iteration[1].str() + ".solverstate")));
}

}  // namespace
}  // namespace crema
