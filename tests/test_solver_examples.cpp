// Caffe's published solver examples, with their own hyperparameters, converge on Fashion-MNIST: each runs a few
// hundred iterations on a slice of the data set and must clearly improve on where it started. (The full runs'
// figures are in docs/solvers.md.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "core/context.hpp"
#include "core/threads.hpp"
#include "io/proto_io.hpp"
#include "onnx/import.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// The mean of output `blob` of test net `net` in a TestAll result.
float Output(const std::vector<std::vector<OutputScores::Mean>>& results, size_t net, const std::string& blob) {
  for (const auto& output : results.at(net))
    if (output.blob == blob) return output.value;
  ADD_FAILURE() << "test net " << net << " has no output " << blob;
  return 0.f;
}

class SolverExamplesTest : public ::testing::Test {
 protected:
  // Without the data set every test skips (SetUp), and no slices are made.
  static void SetUpTestSuite() {
    if (test::FashionMnistAvailable()) slices_ = new test::FashionMnistSlices(4000, 500);
  }
  static void TearDownTestSuite() {
    delete slices_;
    slices_ = nullptr;
  }
  void SetUp() override { CREMA_SKIP_WITHOUT_FASHION_MNIST(); }

  static test::FashionMnistSlices* slices_;
};

test::FashionMnistSlices* SolverExamplesTest::slices_ = nullptr;

// The MNIST autoencoder solvers: after `iterations` the test set's reconstruction cross-entropy must have fallen
// to below `fraction` of the untrained net's.
void ExpectAutoencoderConverges(const test::FashionMnistSlices& slices, const std::string& solver_file,
                                const char* expected_type, int iterations, float fraction) {
  SolverParameter param = slices.ExampleSolver("mnist/" + solver_file);
  EXPECT_EQ(param.type(), expected_type);
  param.set_max_iter(iterations);
  param.set_test_iter(0, 5);  // test-on-train: 500 training images
  param.set_test_iter(1, 5);  // test-on-test: the whole test slice
  param.set_test_interval(iterations);
  param.set_display(0);
  auto solver = CreateSolver(param);
  ASSERT_STREQ(solver->type(), expected_type);
  const auto before = solver->TestAll();
  solver->Step(iterations);
  const auto after = solver->TestAll();
  for (size_t net : {0u, 1u}) {
    const float start = Output(before, net, "cross_entropy_loss"), end = Output(after, net, "cross_entropy_loss");
    EXPECT_LT(end, fraction * start) << solver_file << ", test net " << net << ": cross-entropy " << start
                                     << " before, " << end << " after " << iterations << " iterations";
  }
}

TEST_F(SolverExamplesTest, AutoencoderSgd) {
  ExpectAutoencoderConverges(*slices_, "mnist_autoencoder_solver.prototxt", "SGD", 150, 0.5f);
}
TEST_F(SolverExamplesTest, AutoencoderNesterov) {
  ExpectAutoencoderConverges(*slices_, "mnist_autoencoder_solver_nesterov.prototxt", "Nesterov", 150, 0.5f);
}
TEST_F(SolverExamplesTest, AutoencoderAdaGrad) {
  ExpectAutoencoderConverges(*slices_, "mnist_autoencoder_solver_adagrad.prototxt", "AdaGrad", 150, 0.5f);
}
TEST_F(SolverExamplesTest, AutoencoderAdaDelta) {
  ExpectAutoencoderConverges(*slices_, "mnist_autoencoder_solver_adadelta.prototxt", "AdaDelta", 150, 0.5f);
}

// The LeNet solvers: test accuracy far above chance (0.1) after `iterations`; with `seeds` above 1, the median of
// runs from the example's random_seed and the seeds after it (for a solver whose published rate is unstable on
// Fashion-MNIST, docs/solvers.md: some initial weights send it back to chance for a while).
void ExpectLenetLearns(const test::FashionMnistSlices& slices, const std::string& solver_file,
                       const char* expected_type, int iterations, float accuracy, int seeds = 1) {
  SolverParameter param = slices.ExampleSolver("fashion_mnist/" + solver_file);
  EXPECT_EQ(param.type(), expected_type);
  param.set_max_iter(iterations);
  param.set_test_iter(0, 5);  // the whole test slice, 5 batches of 100
  param.set_test_interval(iterations);
  param.set_display(0);
  std::vector<float> reached;
  for (int run = 0; run < seeds; ++run) {
    SolverParameter seeded = param;
    seeded.set_random_seed(param.random_seed() + run);
    auto solver = CreateSolver(seeded);
    ASSERT_STREQ(solver->type(), expected_type);
    solver->Step(iterations);
    reached.push_back(Output(solver->TestAll(), 0, "accuracy"));
  }
  std::vector<float> sorted = reached;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_GT(sorted[sorted.size() / 2], accuracy)
      << solver_file << " after " << iterations << " iterations (accuracy from each seed: "
      << ::testing::PrintToString(reached) << ")";
}

TEST_F(SolverExamplesTest, LenetAdam) { ExpectLenetLearns(*slices_, "lenet_solver_adam.prototxt", "Adam", 200, 0.65f); }
TEST_F(SolverExamplesTest, LenetRmsProp) {
  ExpectLenetLearns(*slices_, "lenet_solver_rmsprop.prototxt", "RMSProp", 200, 0.5f, /*seeds=*/3);
}

// The Expression autoencoder (examples/expression): its formulas' gradients train it, the reconstruction's error
// on the test slice falling to under half its start in 200 iterations.
TEST_F(SolverExamplesTest, ExpressionAutoencoderLearns) {
  SolverParameter param = slices_->ExampleSolver("expression/autoencoder_solver.prototxt");
  param.set_max_iter(200);
  param.set_test_iter(0, 5);
  param.set_test_interval(200);
  param.set_display(0);
  auto solver = CreateSolver(param);
  const auto before = solver->TestAll();
  solver->Step(200);
  const auto after = solver->TestAll();
  for (const char* output : {"loss", "l2_error"}) {
    const float start = Output(before, 0, output), end = Output(after, 0, output);
    EXPECT_LT(end, 0.5f * start) << output << ": " << start << " before, " << end << " after 200 iterations";
  }
}

// The ResNet made in PyTorch (examples/onnx): its net as run.sh writes it from crema import's output, started from the
// weights imported from resnet_fashion.onnx (every layer with parameters receives them), learns Fashion-MNIST: its
// training loss falls from about log(10) to under 0.6 of it in 300 iterations (the whole example, 3000 iterations
// on all 60,000 images, reaches a test accuracy of 0.88: examples/onnx/README.md).
TEST_F(SolverExamplesTest, OnnxImportedResNetFineTunes) {
  const ImportedNet imported = ImportOnnxFile(test::SourceDir() + "/examples/onnx/resnet_fashion.onnx");
  SolverParameter param = slices_->ExampleSolver("onnx/resnet_solver.prototxt");
  param.set_max_iter(300);
  param.clear_test_iter();
  param.clear_test_interval();
  param.set_display(0);
  auto solver = CreateSolver(param);
  const std::vector<std::string> copied = solver->net()->CopyTrainedLayersFrom(imported.weights);
  EXPECT_GE(copied.size(), 20u);
  // The training loss over ten batches (BatchNorm on each batch's statistics: the test net's moving averages lag
  // for the first thousand iterations), before and after.
  const auto training_loss = [&] {
    double sum = 0;
    for (int k = 0; k < 10; ++k) sum += solver->net()->Forward();
    return sum / 10;
  };
  const double before = training_loss();
  solver->Step(300);
  const double after = training_loss();
  EXPECT_GT(before, 2.0);  // about log(10): the imported initialisation knows nothing of the classes
  EXPECT_LT(after, 0.6 * before) << "training loss " << before << " before, " << after << " after 300 iterations";
  std::cout << "  training loss " << before << " before, " << after << " after 300 iterations" << std::endl;
}

// Every example solver on the Fashion-MNIST slices, with solver_mode: GPU, ends where the CPU run ends: the
// same data in the same order, the same initial weights and dropout masks (drawn on the host), so the runs differ
// only by float rounding (another summation order in cuDNN and cuBLAS). Rounding alone moves a training run's end,
// and more the longer it runs and the less stable its solver is, so how far is measured on the CPU itself, in two
// other orders: the convolutions and inner products on the native engines instead of oneDNN's, and everything on
// one thread. The GPU's result must be within 0.03 absolute (accuracy) or 3% (losses) of the CPU's, or within 4
// times the larger of those measured spreads where that is larger. Measured: on an H200's CPU, RMSProp's LeNet
// ended at an accuracy of 0.218 after 200 iterations and its GPU at 0.482 (an earlier commit: 0.664 and 0.648), and
// the ResNet (BatchNorm's moving averages after 100 iterations) at 0.542 and 0.63 (before: 0.748 and 0.748); the
// autoencoders' losses after 150 iterations moved by up to 25% between the two CPU products (Nesterov), so they are
// compared after 50, AdaGrad after 20 (its first step moves each weight by the learning rate times the sign of its
// gradient: rounding on either side of zero takes a full step either way).
TEST_F(SolverExamplesTest, EveryExampleSolverTrainsOnTheGpuToTheCpusResult) {
  CREMA_SKIP_WITHOUT_GPU();
  struct Run {
    const char* solver;
    int iterations;
    const char* output;
  };
  const Run runs[] = {
      {"fashion_mnist/lenet_solver.prototxt", 200, "accuracy"},
      {"fashion_mnist/lenet_solver_adam.prototxt", 200, "accuracy"},
      {"fashion_mnist/lenet_solver_rmsprop.prototxt", 200, "accuracy"},
      {"fashion_mnist/resnet_solver.prototxt", 100, "accuracy"},
      {"mnist/mnist_autoencoder_solver.prototxt", 50, "cross_entropy_loss"},
      {"mnist/mnist_autoencoder_solver_nesterov.prototxt", 50, "cross_entropy_loss"},
      {"mnist/mnist_autoencoder_solver_adagrad.prototxt", 20, "cross_entropy_loss"},
      {"mnist/mnist_autoencoder_solver_adadelta.prototxt", 50, "cross_entropy_loss"},
  };
  for (const Run& run : runs) {
    SCOPED_TRACE(run.solver);
    // The CPU, the CPU in the two other orders, the GPU.
    float reached[4] = {};
    for (int variant = 0; variant < 4; ++variant) {
      const bool gpu = variant == 3;
      SolverParameter param = slices_->ExampleSolver(run.solver);
      param.set_solver_mode(gpu ? SolverParameter::GPU : SolverParameter::CPU);
      param.set_max_iter(run.iterations);
      for (int t = 0; t < param.test_iter_size(); ++t) param.set_test_iter(t, 5);
      param.set_test_interval(run.iterations);
      param.set_display(0);
      std::shared_ptr<Context> context = Solver::ContextFor(param);
      if (variant == 1)
        for (const char* type : {"Convolution", "InnerProduct", "Deconvolution"}) context->force_engine(type, "native");
      OneThreadWhile one(variant == 2);
      auto solver = CreateSolver(param, "", context);
      solver->Step(run.iterations);
      reached[variant] = Output(solver->TestAll(), 0, run.output);
    }
    const bool accuracy = std::string(run.output) == "accuracy";
    const float spread = std::max(std::fabs(reached[1] - reached[0]), std::fabs(reached[2] - reached[0]));
    const float allowed = std::max(accuracy ? 0.03f : 0.03f * std::fabs(reached[0]), 4.f * spread);
    std::printf("  %-50s %s after %d iterations: CPU %.6g (native products %.6g, one thread %.6g), GPU %.6g\n",
                run.solver, run.output, run.iterations, reached[0], reached[1], reached[2], reached[3]);
    EXPECT_NEAR(reached[3], reached[0], allowed)
        << run.output << " after " << run.iterations << " iterations: CPU " << reached[0] << ", GPU " << reached[3]
        << " (the CPU's orders " << reached[1] << " and " << reached[2] << ")";
  }
}

}  // namespace
}  // namespace crema
