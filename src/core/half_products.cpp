// Half-precision products and their conversions (see half_products.hpp).
#include "core/half_products.hpp"

#include <sstream>
#include <vector>

#include "core/common.hpp"
#ifdef CREMA_USE_CUDA
#include "core/cuda_check.hpp"
#include "core/gpu_math.hpp"
#endif

namespace crema {

bool DeviceMultipliesIn(const Context& context, Precision precision, std::string* why) {
  if (precision == Precision::kFloat32) return true;
  if (context.device() == Device::kCPU) {
    if (context.gpu_code_on_host()) return true;
    if (why != nullptr) *why = "this is a CPU context";
    return false;
  }
#ifdef CREMA_USE_CUDA
  int major = 0, minor = 0;
  CREMA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, context.gpu_id()));
  CREMA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, context.gpu_id()));
  // Tensor cores multiply float16 from Volta (7.0) and bfloat16 from Ampere (8.0) on.
  const int needs = precision == Precision::kFloat16 ? 7 : 8;
  if (major >= needs) return true;
  if (why != nullptr) {
    std::ostringstream text;
    text << "GPU " << context.gpu_id() << " has compute capability " << major << "." << minor << ", and "
         << PrecisionName(precision) << " products need " << needs << ".0";
    *why = text.str();
  }
#endif
  return false;
}

namespace {

void CheckHalf(Precision precision) {
  CREMA_CHECK(precision != Precision::kFloat32) << "a half-precision conversion or product was asked for in float32";
}

}  // namespace

void RoundToHalf(Context& context, Precision precision, int n, const float* x, uint16_t* y) {
  CheckHalf(precision);
  for_each_element(context, n, RoundToHalfRule{x, y, precision == Precision::kBfloat16});
}

void WidenFromHalf(Context& context, Precision precision, int n, const uint16_t* x, float beta, float* y) {
  CheckHalf(precision);
  for_each_element(context, n, WidenFromHalfRule{x, y, beta, precision == Precision::kBfloat16});
}

const uint16_t* HalfValuesOf(Context& context, Precision precision, const Blob& blob, size_t offset, int count,
                             uint16_t* scratch) {
  CheckHalf(precision);
  const Device device = context.device();
  if (blob.quantization().floats()) {
    RoundToHalf(context, precision, count, blob.data_on(device) + offset, scratch);
    return scratch;
  }
  CREMA_CHECK(blob.data_type() == HalfElementType(precision))
      << "a blob of shape " << blob.shape_string() << " holds " << ElementTypeName(blob.data_type())
      << ", but its reader "
      << "multiplies " << PrecisionName(precision) << " operands";
  return static_cast<const uint16_t*>(blob.bytes_on(device)) + offset;
}

void HalfTop(Context& context, Precision precision, int n, const float* x, const HalfTopFinish& finish, uint16_t* y) {
  CheckHalf(precision);
  for_each_element(context, n, HalfTopRule<float>{x, y, finish, precision == Precision::kBfloat16});
}

void HalfTop(Context& context, Precision precision, int n, const uint16_t* x, const HalfTopFinish& finish,
             uint16_t* y) {
  CheckHalf(precision);
  for_each_element(context, n, HalfTopRule<uint16_t>{x, y, finish, precision == Precision::kBfloat16});
}

void HalfGemm(Context& context, Precision precision, Transpose trans_a, Transpose trans_b, int M, int N, int K,
              float alpha, const uint16_t* A, const uint16_t* B, float beta, float* C) {
  CheckHalf(precision);
  if (context.device() == Device::kGPU) {
#ifdef CREMA_USE_CUDA
    gpu_gemm_half(context, precision == Precision::kBfloat16, trans_a, trans_b, M, N, K, alpha, A, B, beta, C);
    return;
#else
    CREMA_FAIL() << "this crema was built without CUDA (CPU_ONLY): no product can run on a GPU";
#endif
  }
  // The host: the factors widened (exactly), their float32 product.
  const bool bfloat16 = precision == Precision::kBfloat16;
  std::vector<float> a(static_cast<size_t>(M) * K), b(static_cast<size_t>(K) * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = FromHalf(bfloat16, A[i]);
  for (size_t i = 0; i < b.size(); ++i) b[i] = FromHalf(bfloat16, B[i]);
  cpu_gemm(trans_a, trans_b, M, N, K, alpha, a.data(), b.data(), beta, C);
}

const uint16_t* HalfCopy::Of(Context& context, Precision precision, const Blob& blob) {
  const Device device = context.device();
  const int count = blob.count();
  const float* values = blob.data_on(device);
  const uint64_t version = blob.data_version();
  if (!made_ || version != version_ || values != values_ || precision != precision_ || count != count_) {
    if (!memory_ || memory_->size() < sizeof(uint16_t) * count)
      memory_ = std::make_unique<SyncedMemory>(sizeof(uint16_t) * static_cast<size_t>(count));
    void* copy = device == Device::kGPU ? memory_->mutable_gpu_data() : memory_->mutable_cpu_data();
    RoundToHalf(context, precision, count, values, static_cast<uint16_t*>(copy));
    made_ = true;
    version_ = version;
    values_ = values;
    precision_ = precision;
    count_ = count;
  }
  return static_cast<const uint16_t*>(device == Device::kGPU ? memory_->gpu_data() : memory_->cpu_data());
}

}  // namespace crema
