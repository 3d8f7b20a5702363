// End to end on real data: the example LeNet trained for a few hundred iterations on a slice of Debian's
// Fashion-MNIST must score far above chance; and OpenCV's Caffe importer must read the deploy prototxt and the
// weights crema wrote and compute the same class probabilities as crema.
#include <gtest/gtest.h>

#include <cmath>

#ifdef CREMA_USE_OPENCV
#include <opencv2/dnn.hpp>
#endif

#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"
#include "tools/lib/mnist.hpp"

namespace crema {
namespace {

const std::string kExampleDir = test::SourceDir() + "/examples/fashion_mnist";

class FashionMnistTest : public ::testing::Test {
 protected:
  // Without the data set every test skips (SetUp), and nothing is trained.
  static void SetUpTestSuite() {
    if (!test::FashionMnistAvailable()) return;
    slices_ = new test::FashionMnistSlices(6000, 1000);
    SolverParameter solver = slices_->ExampleSolver("fashion_mnist/lenet_solver.prototxt");
    solver.set_max_iter(400);
    solver.clear_test_iter();
    solver.add_test_iter(10);  // 10 batches of 100: the whole test slice
    solver.set_test_interval(400);
    solver.set_test_initialization(false);
    solver.set_snapshot_after_train(true);
    auto trainer = CreateSolver(solver);
    trainer->Solve();
    const auto results = trainer->TestAll();
    for (const auto& output : results[0])
      if (output.blob == "accuracy") accuracy_ = output.value;
    weights_ = solver.snapshot_prefix() + "_iter_400.caffemodel";
  }
  static void TearDownTestSuite() {
    delete slices_;
    slices_ = nullptr;
  }
  void SetUp() override { CREMA_SKIP_WITHOUT_FASHION_MNIST(); }

  static test::FashionMnistSlices* slices_;
  static float accuracy_;
  static std::string weights_;
};

test::FashionMnistSlices* FashionMnistTest::slices_ = nullptr;
float FashionMnistTest::accuracy_ = 0.f;
std::string FashionMnistTest::weights_;

TEST_F(FashionMnistTest, FewHundredIterationsLiftAccuracyFarAboveChance) {
  // Chance is 0.1; LeNet reaches about 0.75 after 400 iterations.
  EXPECT_GT(accuracy_, 0.65f);
  EXPECT_TRUE(FileExists(weights_));
}

// The same training with solver_mode: GPU reaches the CPU's accuracy (the same data in the same order, the same
// initial weights and dropout masks; only the rounding differs).
TEST_F(FashionMnistTest, TheGpuTrainsToTheCpusAccuracy) {
  CREMA_SKIP_WITHOUT_GPU();
  SolverParameter solver = slices_->ExampleSolver("fashion_mnist/lenet_solver.prototxt");
  solver.set_max_iter(400);
  solver.clear_test_iter();
  solver.add_test_iter(10);
  solver.set_test_interval(400);
  solver.set_test_initialization(false);
  solver.set_solver_mode(SolverParameter::GPU);
  auto trainer = CreateSolver(solver);
  trainer->Solve();
  float accuracy = 0.f;
  // Kept: a range-for over TestAll()[0] would read an element of a temporary already destroyed.
  const auto scores = trainer->TestAll();
  for (const auto& output : scores[0])
    if (output.blob == "accuracy") accuracy = output.value;
  EXPECT_NEAR(accuracy, accuracy_, 0.02f);
}

TEST_F(FashionMnistTest, OpenCvReadsOurDeployNetAndWeightsAndAgrees) {
#ifndef CREMA_USE_OPENCV
  GTEST_SKIP() << "built without OpenCV (CREMA_USE_OPENCV=OFF): its Caffe importer cannot be compared";
#else
  const std::string deploy = kExampleDir + "/lenet_deploy.prototxt";
  Net net(deploy, TEST);
  net.CopyTrainedLayersFrom(weights_);
  const MnistImages images = ReadMnistImages(test::FashionMnistDir() + "/t10k-images-idx3-ubyte.gz");
  Blob* input = net.input_blobs()[0];
  const int batch = input->shape(0);
  float* data = input->mutable_cpu_data();
  for (int i = 0; i < input->count(); ++i) data[i] = static_cast<unsigned char>(images.pixels[i]) / 256.f;
  net.Forward();
  const Blob* prob = net.blob_by_name("prob");
  ASSERT_EQ(prob->shape(), (std::vector<int>{batch, 10}));

  cv::dnn::Net opencv = cv::dnn::readNetFromCaffe(deploy, weights_);
  ASSERT_FALSE(opencv.empty());
  const int sizes[] = {batch, 1, 28, 28};
  cv::Mat blob(4, sizes, CV_32F, const_cast<float*>(input->cpu_data()));
  opencv.setInput(blob);
  cv::Mat out = opencv.forward("prob");
  ASSERT_EQ(out.total(), static_cast<size_t>(prob->count()));
  float max_diff = 0.f;
  int agreeing = 0;
  for (int n = 0; n < batch; ++n) {
    int ours = 0, theirs = 0;
    for (int c = 0; c < 10; ++c) {
      const float a = prob->cpu_data()[n * 10 + c], b = out.ptr<float>()[n * 10 + c];
      max_diff = std::max(max_diff, std::fabs(a - b));
      if (a > prob->cpu_data()[n * 10 + ours]) ours = c;
      if (b > out.ptr<float>()[n * 10 + theirs]) theirs = c;
    }
    agreeing += ours == theirs;
  }
  EXPECT_LT(max_diff, 1e-4f);
  EXPECT_EQ(agreeing, batch);
#endif
}

}  // namespace
}  // namespace crema
