// End to end on real data: the example LeNet trained for a few hundred iterations on a slice of Debian's
// Fashion-MNIST must score far above chance; and OpenCV's Caffe importer must read the deploy prototxt and the
// weights crema wrote and compute the same class probabilities as crema.
#include <gtest/gtest.h>

#include <opencv2/dnn.hpp>

#include <cmath>
#include <regex>

#include "io/mnist.hpp"
#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const std::string kExampleDir = std::string(CREMA_SOURCE_DIR) + "/examples/fashion_mnist";

class FashionMnistTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string data = test::kFashionMnistDir;
    ASSERT_TRUE(FileExists(data + "/train-images-idx3-ubyte.gz"))
        << "Fashion-MNIST is missing: install Debian's dataset-fashion-mnist package (scripts/install_deps.sh)";
    dir_ = new test::TempDir;
    ConvertMnistToLmdb(data + "/train-images-idx3-ubyte.gz", data + "/train-labels-idx1-ubyte.gz",
                          dir_->file("train_lmdb"), 0, 6000);
    ConvertMnistToLmdb(data + "/t10k-images-idx3-ubyte.gz", data + "/t10k-labels-idx1-ubyte.gz",
                          dir_->file("test_lmdb"), 0, 1000);
    // The example's own net, pointed at the slices.
    std::string net = ReadFileToString(kExampleDir + "/lenet_train_test.prototxt");
    net = std::regex_replace(net, std::regex("data/fashion_mnist/fashion_mnist_train_lmdb"), dir_->file("train_lmdb"));
    net = std::regex_replace(net, std::regex("data/fashion_mnist/fashion_mnist_test_lmdb"), dir_->file("test_lmdb"));
    SolverParameter solver;
    ReadProtoFromTextFile(kExampleDir + "/lenet_solver.prototxt", &solver);
    solver.clear_net();
    ReadProtoFromText(net, "lenet_train_test.prototxt", solver.mutable_net_param());
    solver.set_max_iter(400);
    solver.clear_test_iter();
    solver.add_test_iter(10);  // 10 batches of 100: the whole test slice
    solver.set_test_interval(400);
    solver.set_test_initialization(false);
    solver.set_snapshot(0);
    solver.set_snapshot_prefix(dir_->file("lenet"));
    solver.set_solver_mode(SolverParameter::CPU);
    auto trainer = CreateSolver(solver);
    trainer->Solve();
    const auto results = trainer->TestAll();
    for (const auto& output : results[0])
      if (output.blob == "accuracy") accuracy_ = output.value;
    weights_ = dir_->file("lenet_iter_400.caffemodel");
  }
  static void TearDownTestSuite() { delete dir_; }

  static test::TempDir* dir_;
  static float accuracy_;
  static std::string weights_;
};

test::TempDir* FashionMnistTest::dir_ = nullptr;
float FashionMnistTest::accuracy_ = 0.f;
std::string FashionMnistTest::weights_;

TEST_F(FashionMnistTest, FewHundredIterationsLiftAccuracyFarAboveChance) {
  // Chance is 0.1; LeNet reaches about 0.75 after 400 iterations.
  EXPECT_GT(accuracy_, 0.65f);
  EXPECT_TRUE(FileExists(weights_));
}

TEST_F(FashionMnistTest, OpenCvReadsOurDeployNetAndWeightsAndAgrees) {
  const std::string deploy = kExampleDir + "/lenet_deploy.prototxt";
  Net net(deploy, TEST);
  net.CopyTrainedLayersFrom(weights_);
  const MnistImages images = ReadMnistImages(std::string(test::kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz");
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
}

}  // namespace
}  // namespace crema
