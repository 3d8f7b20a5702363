// The GPU foundation: device selection, SyncedMemory's device head and the elementwise CUDA helper. Tests
// that need a CUDA device skip with a message where none is visible (CI and the developers' machines).
#include <gtest/gtest.h>

#include "core/blob.hpp"
#include "core/context.hpp"
#include "core/gpu_math.hpp"
#include "layers/layer_registry.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

#define SKIP_WITHOUT_GPU()                                                                          \
  if (Context::gpu_count() == 0) {                                                                  \
    GTEST_SKIP() << (Context::built_with_cuda() ? "no CUDA device is visible on this machine"       \
                                                : "this build has no CUDA (CPU_ONLY)");             \
  }

TEST(GpuTest, SelectingAMissingGpuIsAClearError) {
  if (Context::gpu_count() > 0) GTEST_SKIP() << "a CUDA device is present; the error path cannot be reached";
  const std::string message = test::ErrorMessage([] { Context::set_device(Device::kGPU, 0); });
  EXPECT_NE(message.find("--gpu"), std::string::npos) << message;
  EXPECT_EQ(Context::device(), Device::kCPU);
}

TEST(GpuTest, SelectingAGpuOutOfRangeNamesTheCount) {
  SKIP_WITHOUT_GPU();
  const std::string message = test::ErrorMessage([] { Context::set_device(Device::kGPU, Context::gpu_count()); });
  EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
}

TEST(GpuTest, SyncedMemoryRoundTripsThroughTheDevice) {
  SKIP_WITHOUT_GPU();
  Blob blob({3, 1000});
  test::FillGaussian(&blob);
  const std::vector<float> original(blob.cpu_data(), blob.cpu_data() + blob.count());
  blob.mutable_gpu_data();  // the device copy is now the current one
  EXPECT_EQ(blob.data()->head(), SyncedMemory::Head::kAtDevice);
  for (int i = 0; i < blob.count(); ++i) ASSERT_EQ(blob.cpu_data()[i], original[i]);
  EXPECT_EQ(blob.data()->head(), SyncedMemory::Head::kSynced);
}

#ifdef CREMA_USE_CUDA
TEST(GpuTest, ElementwiseKernelsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Blob x({5000}), y({5000});
  test::FillGaussian(&x, 0, 1, 1);
  test::FillGaussian(&y, 0, 1, 2);
  std::vector<float> expected(y.count());
  for (int i = 0; i < y.count(); ++i) expected[i] = 2.f * (y.cpu_data()[i] + 0.5f * x.cpu_data()[i]);
  gpu_axpy(x.count(), 0.5f, x.gpu_data(), y.mutable_gpu_data());
  gpu_scale(y.count(), 2.f, y.mutable_gpu_data());
  for (int i = 0; i < y.count(); ++i) EXPECT_FLOAT_EQ(y.cpu_data()[i], expected[i]);
  gpu_set(y.count(), 3.f, y.mutable_gpu_data());
  EXPECT_FLOAT_EQ(y.cpu_data()[4999], 3.f);
}
#endif

TEST(GpuTest, LayersWithoutGpuCodeSayWhichLayer) {
  SKIP_WITHOUT_GPU();
  Context::set_device(Device::kGPU, 0);
  auto layer = LayerRegistry::Global().Create(test::ParseLayer("name: 'act' type: 'ReLU'"));
  test::BlobList bottom, top;
  bottom.Add({2, 3});
  top.Add({2, 3});
  layer->SetUp(bottom.pointers, top.pointers);
  const std::string message = test::ErrorMessage([&] { layer->Forward(bottom.pointers, top.pointers); });
  Context::set_device(Device::kCPU);
  EXPECT_NE(message.find("layer 'act' (ReLU)"), std::string::npos) << message;
  EXPECT_NE(message.find("not implemented on GPU yet"), std::string::npos) << message;
}

}  // namespace
}  // namespace crema
