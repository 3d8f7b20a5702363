// The GPU foundation: contexts on a device, SyncedMemory's device head, the device math, the rules written
// once (ReLU, Dropout, the SGD update) against their CPU runs, and engine choice by device. Tests that need a
// CUDA device skip with a message where none is visible (CI and the developers' machines).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "core/blob.hpp"
#include "core/channel_sums.hpp"
#include "core/context.hpp"
#include "core/cublas_library.hpp"
#include "core/gpu_math.hpp"
#include "core/math_functions.hpp"
#include "io/proto_io.hpp"
#include "layers/layer_registry.hpp"
#include "layers/normalization/batch_norm.hpp"
#include "layers/normalization/lrn.hpp"
#include "net/net.hpp"
#include "solver/solver.hpp"
#include "solver/update_rules.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

#ifdef CREMA_USE_CUDA
// cuBLAS is opened on first use, not at start-up (core/cublas_library.hpp). These come first in the file, so that
// where the whole binary runs in one process no GPU test has opened it yet.
TEST(CublasTest, ACpuRunNeverOpensCublas) {
  NetParameter param;
  ReadProtoFromText(R"(
    layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 8 } } }
    layer { name: 'fc' type: 'InnerProduct' bottom: 'data' top: 'fc'
            inner_product_param { num_output: 3 weight_filler { type: 'gaussian' } } }
  )",
                    "net", &param);
  Net net(param, std::make_shared<Context>(Device::kCPU, 0));
  test::FillGaussian(net.blob_by_name("data"));
  net.Forward();
  std::ifstream maps("/proc/self/maps");
  ASSERT_TRUE(maps.good());
  const std::string mapped((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
  EXPECT_EQ(mapped.find("libcublas"), std::string::npos) << "cuBLAS was loaded by a run that never used it";
  EXPECT_FALSE(CublasLoaded());
}

TEST(CublasTest, AMissingOrForeignLibraryIsNamed) {
  std::string message = test::ErrorMessage([] { LoadCublasLibrary("/nonexistent/" + CublasLibraryName()); });
  EXPECT_NE(message.find("cannot open the cuBLAS library '/nonexistent/libcublas.so."), std::string::npos)
      << message;
  // A library that opens but is not cuBLAS: the first missing entry point is named.
  message = test::ErrorMessage([] { LoadCublasLibrary("libz.so.1"); });
  EXPECT_NE(message.find("'libz.so.1' has no cublasCreate_v2"), std::string::npos) << message;
}

TEST(CublasTest, TheToolkitsLibraryGivesEveryEntryPoint) {
  CublasLibrary library;
  try {
    library = LoadCublasLibrary(CublasLibraryName());
  } catch (const Error& error) {
    GTEST_SKIP() << "no cuBLAS on this machine's library path: " << error.what();
  }
  EXPECT_EQ(library.path, CublasLibraryName());
  for (const void* entry : {reinterpret_cast<const void*>(library.Create), reinterpret_cast<const void*>(library.Destroy),
                            reinterpret_cast<const void*>(library.SetStream),
                            reinterpret_cast<const void*>(library.GetStatusString),
                            reinterpret_cast<const void*>(library.Sgemm), reinterpret_cast<const void*>(library.Sgemv),
                            reinterpret_cast<const void*>(library.Saxpy), reinterpret_cast<const void*>(library.Sscal),
                            reinterpret_cast<const void*>(library.Sdot), reinterpret_cast<const void*>(library.Sasum)})
    EXPECT_NE(entry, nullptr);
  // The library's own words (cuBLAS 13: "the library was not initialized"), one text per status.
  const std::string not_initialized = library.GetStatusString(CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_FALSE(not_initialized.empty());
  EXPECT_NE(not_initialized, library.GetStatusString(CUBLAS_STATUS_SUCCESS));
}
#endif

TEST(GpuTest, AGpuContextWithoutAGpuIsAClearError) {
  if (Context::gpu_count() > 0) GTEST_SKIP() << "a CUDA device is present; the error path cannot be reached";
  const std::string message = test::ErrorMessage([] { Context context(Device::kGPU, 0); });
  EXPECT_NE(message.find("--gpu"), std::string::npos) << message;
}

TEST(GpuTest, AGpuOutOfRangeNamesTheCount) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::string message = test::ErrorMessage([] { Context context(Device::kGPU, Context::gpu_count()); });
  EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
}

TEST(GpuTest, SyncedMemoryRoundTripsThroughTheDevice) {
  CREMA_SKIP_WITHOUT_GPU();
  Context context(Device::kGPU, 0);
  Blob blob({3, 1000});
  test::FillGaussian(&blob);
  const std::vector<float> original = test::DataOf(blob);
  blob.mutable_gpu_data();  // the device copy is now the current one
  EXPECT_EQ(blob.data()->head(), SyncedMemory::Head::kAtDevice);
  EXPECT_EQ(test::DataOf(blob), original);
  EXPECT_EQ(blob.data()->head(), SyncedMemory::Head::kSynced);
}

#ifdef CREMA_USE_CUDA
TEST(GpuTest, DeviceMathMatchesTheCpu) {
  CREMA_SKIP_WITHOUT_GPU();
  Context gpu(Device::kGPU, 0);
  Blob x({5000}), y({5000});
  test::FillGaussian(&x, 0, 1, 1);
  test::FillGaussian(&y, 0, 1, 2);
  std::vector<float> expected(y.count());
  for (int i = 0; i < y.count(); ++i) expected[i] = 2.f * (y.cpu_data()[i] + 0.5f * x.cpu_data()[i]);
  gpu_axpy(gpu, x.count(), 0.5f, x.gpu_data(), y.mutable_gpu_data());
  gpu_scale(gpu, y.count(), 2.f, y.mutable_gpu_data());
  const std::vector<float> result = test::DataOf(y);
  for (int i = 0; i < y.count(); ++i) EXPECT_FLOAT_EQ(result[i], expected[i]);
  EXPECT_NEAR(gpu_dot(gpu, x.count(), x.gpu_data(), y.gpu_data()), cpu_dot(x.count(), x.cpu_data(), y.cpu_data()),
              1e-2);
  gpu_set(gpu, y.count(), 3.f, y.mutable_gpu_data());
  EXPECT_FLOAT_EQ(y.cpu_data()[4999], 3.f);
  // Row-major GEMM through cuBLAS's column-major interface.
  Blob a({3, 4}), b({4, 5}), c({3, 5});
  test::FillGaussian(&a, 0, 1, 3);
  test::FillGaussian(&b, 0, 1, 4);
  std::vector<float> product(15);
  cpu_gemm(Transpose::kNo, Transpose::kNo, 3, 5, 4, 1.f, a.cpu_data(), b.cpu_data(), 0.f, product.data());
  gpu_gemm(gpu, Transpose::kNo, Transpose::kNo, 3, 5, 4, 1.f, a.gpu_data(), b.gpu_data(), 0.f, c.mutable_gpu_data());
  const std::vector<float> on_gpu = test::DataOf(c);
  for (int i = 0; i < 15; ++i) EXPECT_NEAR(on_gpu[i], product[i], 1e-5);
  // GEMV both ways round, reading and writing gradients on the device: A * x (x of 4) and A^T * z (z of 3).
  Blob x4({4}), z3({3}), out({4});
  test::FillGaussian(&x4, 0, 1, 5);
  test::FillGaussian(&z3, 0, 1, 6);
  std::copy(x4.cpu_data(), x4.cpu_data() + 4, x4.mutable_cpu_diff());
  std::vector<float> ax(3), atz(4);
  cpu_gemv(Transpose::kNo, 3, 4, 1.f, a.cpu_data(), x4.cpu_data(), 0.f, ax.data());
  cpu_gemv(Transpose::kYes, 3, 4, 1.f, a.cpu_data(), z3.cpu_data(), 0.f, atz.data());
  gpu_gemv(gpu, Transpose::kNo, 3, 4, 1.f, a.gpu_data(), x4.gpu_diff(), 0.f, z3.mutable_gpu_diff());
  gpu_gemv(gpu, Transpose::kYes, 3, 4, 1.f, a.gpu_data(), z3.gpu_data(), 0.f, out.mutable_gpu_diff());
  const std::vector<float> ax_gpu = test::DiffOf(z3), atz_gpu = test::DiffOf(out);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(ax_gpu[i], ax[i], 1e-5);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(atz_gpu[i], atz[i], 1e-5);
}
#endif

// Forward and backward of one layer on each device from the same inputs; returns top data then bottom diff.
std::vector<float> RunLayer(const std::string& text, Device device) {
  auto context = std::make_shared<Context>(device, 0);
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({4, 5, 6}), 0, 1, 3);
  top.Add({});
  auto layer = LayerRegistry::Global().Create(test::ParseLayer(text), {{4, 5, 6}}, context);
  layer->SetUp(bottom.pointers, top.pointers);
  layer->Forward(bottom.pointers, top.pointers);
  test::FillGaussian(top.pointers[0], 0, 1, 4);  // the top gradient (FillGaussian writes data; move it over)
  std::vector<float> dy = test::DataOf(*top.pointers[0]);
  layer->Forward(bottom.pointers, top.pointers);
  std::copy(dy.begin(), dy.end(), top.pointers[0]->mutable_cpu_diff());
  layer->Backward(top.pointers, {true}, bottom.pointers);
  std::vector<float> result = test::DataOf(*top.pointers[0]);
  const std::vector<float> dx = test::DiffOf(*bottom.pointers[0]);
  result.insert(result.end(), dx.begin(), dx.end());
  return result;
}

TEST(GpuTest, RulesWrittenOnceGiveTheCpusResultsOnTheGpu) {
  CREMA_SKIP_WITHOUT_GPU();
  for (const char* text : {"name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.1 }",
                           "name: 'drop' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.4 }"}) {
    SCOPED_TRACE(text);
    const std::vector<float> cpu = RunLayer(text, Device::kCPU), gpu = RunLayer(text, Device::kGPU);
    ASSERT_EQ(cpu.size(), gpu.size());
    for (size_t i = 0; i < cpu.size(); ++i) EXPECT_FLOAT_EQ(gpu[i], cpu[i]) << i;
  }
}

// sum_per_channel's GPU pass (BatchNorm's terms: one and two a value, a fused ReLU's gate among them) against the
// host's sums in double, over one block a channel and several (partial sums added after), channels last (inner 1), an
// empty channel, and more channels than a grid's rows; the same bits twice.
std::vector<float> ChannelSums(Device device, int outer, int channels, int inner) {
  Context context(device, 0);
  Blob x({outer, channels, inner}), dy({outer, channels, inner}), gamma({channels}), beta({channels});
  Blob sums({3 * channels}), scratch({static_cast<int>(SumPerChannelScratch(outer, channels, inner, 2)) + 1});
  test::FillGaussian(&x, 0.5, 1, 21);
  test::FillGaussian(&dy, 0, 1, 22);
  test::FillGaussian(&gamma, 1, 0.5, 23);
  test::FillGaussian(&beta, 0, 0.5, 24);
  float* out = sums.mutable_data_on(device);
  float* partial = scratch.mutable_data_on(device);
  sum_per_channel(context, outer, channels, inner, BatchNormValueTermsOf<float>{{x.data_on(device)}}, 0.5f, out,
                  partial);
  const BatchNormAffine affine{gamma.data_on(device), beta.data_on(device), true};
  sum_per_channel(context, outer, channels, inner,
                  BatchNormGradientTerms{dy.data_on(device), x.data_on(device), affine}, 1.f, out + channels, partial);
  context.Synchronize();
  return test::DataOf(sums);
}

TEST(GpuTest, ChannelSumsOnTheGpuMatchTheCpu) {
  CREMA_SKIP_WITHOUT_GPU();
  struct Shape {
    int outer, channels, inner;
  };
  for (const Shape& s : {Shape{2, 3, 5}, Shape{64, 64, 3136}, Shape{64, 2048, 49}, Shape{5, 4, 0}, Shape{3, 5000, 1},
                         Shape{1, 70000, 2}, Shape{300, 1, 30000}}) {
    SCOPED_TRACE(std::to_string(s.outer) + " x " + std::to_string(s.channels) + " x " + std::to_string(s.inner));
    const std::vector<float> cpu = ChannelSums(Device::kCPU, s.outer, s.channels, s.inner);
    const std::vector<float> gpu = ChannelSums(Device::kGPU, s.outer, s.channels, s.inner);
    ASSERT_EQ(cpu.size(), gpu.size());
    // Float sums of m terms of magnitude about 1 to 2: within m units of roundoff of the magnitudes, and sqrt(m)
    // in practice; m * 2^-24 * 4 bounds it.
    const float bound = 4.f * static_cast<float>(s.outer) * s.inner * 6e-8f + 1e-6f;
    for (size_t i = 0; i < cpu.size(); ++i) ASSERT_NEAR(gpu[i], cpu[i], bound) << i;
    EXPECT_EQ(ChannelSums(Device::kGPU, s.outer, s.channels, s.inner), gpu);
  }
}

// The solver's update as Solver::ApplyUpdate runs it (decay, momentum, data -= step), on each device through
// the same rules; nvcc may fuse multiply-adds, so the devices agree to rounding.
std::vector<float> ThreeSgdSteps(Device device) {
  Context context(device, 0);
  Blob param({1000}), velocity({1000});
  test::FillGaussian(&param, 0, 1, 5);
  velocity.set_data(0.f);
  for (int step = 0; step < 3; ++step) {
    Blob gradient({1000});
    test::FillGaussian(&gradient, 0, 1, 10 + step);
    std::copy(gradient.cpu_data(), gradient.cpu_data() + 1000, param.mutable_cpu_diff());
    GradientPrologue decay;
    decay.decays = GradientPrologue::kL2;
    decay.l2 = L2Decay{param.data_on(device), param.mutable_diff_on(device), 0.01f};
    for_each_element(context, 1000,
                     AfterPrologue<SgdMomentum>{decay, SgdMomentum{velocity.mutable_data_on(device),
                                                                   param.mutable_diff_on(device), 0.9f, 0.1f}});
    axpy(context, 1000, -1.f, param.diff_on(device), param.mutable_data_on(device));
  }
  return test::DataOf(param);
}

TEST(GpuTest, SgdUpdateOnTheGpuMatchesTheCpu) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::vector<float> cpu = ThreeSgdSteps(Device::kCPU), gpu = ThreeSgdSteps(Device::kGPU);
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(gpu[i], cpu[i], 1e-5f * (1.f + std::fabs(cpu[i]))) << i;
}

// A layer type with no GPU engine runs on the host of a GPU net (as Caffe runs a layer without GPU code), and
// gives the CPU's result; an engine forced onto the GPU that does not run there is a clear error.
TEST(GpuTest, ALayerWithoutAGpuEngineRunsOnTheHost) {
  CREMA_SKIP_WITHOUT_GPU();
  // Every built-in type has a GPU engine; a type registered here for the CPU only (LRN's native engine under
  // another name) stands for a user's layer without GPU code.
  static bool registered = false;
  if (!registered) LayerRegistry::Global().Add<LRNLayer>("HostOnlyLRN", {"native", kCpuOnly});
  registered = true;
  NetParameter param;
  ReadProtoFromText(R"(
    layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 dim: 5 dim: 5 } } }
    layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
            convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: 'gaussian' } } }
    layer { name: 'norm' type: 'HostOnlyLRN' bottom: 'conv' top: 'norm' }
    layer { name: 'relu' type: 'ReLU' bottom: 'norm' top: 'out' }
  )",
                    "net", &param);
  std::vector<float> outputs[2];
  for (const Device device : {Device::kCPU, Device::kGPU}) {
    Net net(param, std::make_shared<Context>(device, 0));
    test::FillGaussian(net.blob_by_name("data"), 0, 1, 4);
    net.Forward();
    outputs[device == Device::kGPU] = test::DataOf(*net.blob_by_name("out"));
    if (device == Device::kGPU) {
      EXPECT_EQ(net.layer_by_name("conv")->device(), Device::kGPU);
      EXPECT_EQ(net.layer_by_name("norm")->device(), Device::kCPU);
    }
  }
  ASSERT_EQ(outputs[0].size(), outputs[1].size());
  for (size_t i = 0; i < outputs[0].size(); ++i)
    EXPECT_NEAR(outputs[1][i], outputs[0][i], 1e-4f * (1.f + std::fabs(outputs[0][i]))) << i;

  auto context = std::make_shared<Context>(Device::kGPU, 0);
  context->ForceEngines("Convolution:reference");
  const std::string message = test::ErrorMessage([&] { Net net(param, context); });
  EXPECT_NE(message.find("layer 'conv' (Convolution)"), std::string::npos) << message;
  EXPECT_NE(message.find("does not run on the GPU"), std::string::npos) << message;
}

// A layer with a learnable parameter written only with the device math, so that it runs on either device:
// top = bottom + bias (bias of the bottom's shape).
class DeviceBiasLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "DeviceBias"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    params_.push_back(std::make_shared<Blob>(bottom[0]->shape()));
    test::FillGaussian(params_[0].get(), 0, 1, 8);
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    top[0]->ReshapeLike(*bottom[0]);
  }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override { Run(bottom, top); }
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override { Run(bottom, top); }
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>&, const std::vector<Blob*>&) override {
    Gradient(top);
  }
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>&, const std::vector<Blob*>&) override {
    Gradient(top);
  }

 private:
  void Run(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
    const Device d = device();
    const int n = top[0]->count();
    copy(context(), n, bottom[0]->data_on(d), top[0]->mutable_data_on(d));
    axpy(context(), n, 1.f, params_[0]->data_on(d), top[0]->mutable_data_on(d));
  }
  void Gradient(const std::vector<Blob*>& top) {
    const Device d = device();
    axpy(context(), top[0]->count(), 1.f, top[0]->diff_on(d), params_[0]->mutable_diff_on(d));
  }
};

// Trains a bias under a weighted sum of squares (a ReLU between keeps it honest) for 4 iterations; returns
// the bias and whether its memory stayed on the device throughout.
std::vector<float> TrainDeviceBias(const char* mode, bool* stayed_on_device) {
  static bool registered = false;
  if (!registered) LayerRegistry::Global().Add<DeviceBiasLayer>("DeviceBias", {"native", kCpuAndGpu});
  registered = true;
  SolverParameter param;
  ReadProtoFromText(std::string("base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.01 display: 0 "
                                "clip_gradients: 100 solver_mode: ") +
                        mode,
                    "solver", &param);
  ReadProtoFromText(R"(
    layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 4 dim: 6 } } }
    layer { name: 'bias' type: 'DeviceBias' bottom: 'data' top: 'biased' }
    layer { name: 'relu' type: 'ReLU' bottom: 'biased' top: 'out' loss_weight: 1 }
  )",
                    "net", param.mutable_net_param());
  auto solver = CreateSolver(param);
  test::FillGaussian(solver->net()->blob_by_name("data"), 0, 1, 2);
  Blob* bias = solver->net()->learnable_params()[0];
  *stayed_on_device = true;
  for (int i = 0; i < 4; ++i) {
    solver->Step(1);
    // Reading it on the host would make the head kSynced; the update must have left it at the device.
    *stayed_on_device =
        *stayed_on_device && (mode == std::string("CPU") || (bias->data()->head() == SyncedMemory::Head::kAtDevice &&
                                                             bias->diff()->head() == SyncedMemory::Head::kAtDevice));
  }
  return test::DataOf(*bias);
}

// Item 8: a GPU net's parameters, gradients, regularisation, clipping and update stay on the device: no
// iteration copies them to the host, and the result is the CPU's.
TEST(GpuTest, TrainingOnTheGpuNeverCopiesParametersToTheHost) {
  CREMA_SKIP_WITHOUT_GPU();
  bool cpu_flag = false, on_device = false;
  const std::vector<float> cpu = TrainDeviceBias("CPU", &cpu_flag);
  const std::vector<float> gpu = TrainDeviceBias("GPU", &on_device);
  EXPECT_TRUE(on_device);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(gpu[i], cpu[i], 1e-5f * (1.f + std::fabs(cpu[i]))) << i;
}

// Training end to end on the GPU: the skeleton's layers (Data, Convolution, Pooling, InnerProduct, ReLU,
// Dropout, SoftmaxWithLoss) and the SGD update, from an LMDB, for 20 iterations, give the CPU's weights to
// rounding. (The Fashion-MNIST example's accuracy on the GPU is checked in test_fashion_mnist.cpp.)
std::vector<std::vector<float>> TrainSmallConvNet(const std::string& source, const char* mode) {
  SolverParameter param;
  ReadProtoFromText(std::string("base_lr: 0.05 lr_policy: 'step' gamma: 0.5 stepsize: 10 momentum: 0.9 "
                                "weight_decay: 0.001 display: 0 max_iter: 20 random_seed: 7 snapshot_after_train: false "
                                "solver_mode: ") +
                        mode,
                    "solver", &param);
  ReadProtoFromText(R"(
    layer { name: 'data' type: 'Data' top: 'data' top: 'label'
            data_param { source: ')" +
                        source + R"(' batch_size: 16 backend: LMDB }
            transform_param { scale: 0.00390625 crop_size: 7 mirror: true } }
    layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
            convolution_param { num_output: 6 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'pool' type: 'Pooling' bottom: 'conv' top: 'pool' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
    layer { name: 'ip1' type: 'InnerProduct' bottom: 'pool' top: 'ip1'
            inner_product_param { num_output: 16 weight_filler { type: 'xavier' } } }
    layer { name: 'relu' type: 'ReLU' bottom: 'ip1' top: 'ip1' }
    layer { name: 'drop' type: 'Dropout' bottom: 'ip1' top: 'ip1' dropout_param { dropout_ratio: 0.25 } }
    layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'
            inner_product_param { num_output: 4 weight_filler { type: 'xavier' } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' bottom: 'label' top: 'loss' }
  )",
                    "net", param.mutable_net_param());
  auto solver = CreateSolver(param);
  solver->Solve();
  std::vector<std::vector<float>> weights;
  for (Blob* blob : solver->net()->learnable_params()) weights.push_back(test::DataOf(*blob));
  return weights;
}

// The CPU half of the test below, where every machine runs it: the solver and net it builds are valid and train.
TEST(GpuTest, TheSmallConvNetTrainsOnTheCpu) {
  test::TempDir dir;
  test::WriteRandomDatums(dir.file("train_lmdb"), 64, 8, 8, 4, 3);
  const auto weights = TrainSmallConvNet(dir.file("train_lmdb"), "CPU");
  ASSERT_EQ(weights.size(), 6u);  // conv, ip1 and ip2, each with a bias
  for (const auto& blob : weights)
    for (float value : blob) ASSERT_TRUE(std::isfinite(value));
}

TEST(GpuTest, TrainingASmallConvNetGivesTheCpusWeights) {
  CREMA_SKIP_WITHOUT_GPU();
  test::TempDir dir;
  test::WriteRandomDatums(dir.file("train_lmdb"), 64, 8, 8, 4, 3);
  const auto cpu = TrainSmallConvNet(dir.file("train_lmdb"), "CPU");
  const auto gpu = TrainSmallConvNet(dir.file("train_lmdb"), "GPU");
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t b = 0; b < cpu.size(); ++b) {
    ASSERT_EQ(cpu[b].size(), gpu[b].size());
    for (size_t i = 0; i < cpu[b].size(); ++i)
      EXPECT_NEAR(gpu[b][i], cpu[b][i], 2e-3f * (1.f + std::fabs(cpu[b][i]))) << "parameter " << b << "[" << i << "]";
  }
}

}  // namespace
}  // namespace crema
