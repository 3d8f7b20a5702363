// Products in half precision on a GPU's tensor cores, and their host rehearsal: the factors as 16-bit values (float16
// or bfloat16), the sums and the result in float32. An engine computing in half precision (Layer::computes_in) rounds
// its float32 operands into scratch here (RoundToHalf), multiplies them with HalfGemm (cuBLAS's GemmEx) or cuDNN's
// half-precision convolutions, and widens a 16-bit result back into its float32 blob (WidenFromHalf); parameters,
// blobs and everything else stay float32.
//
// The rules are written once (for_each_element) and round as the CPU's engines do (core/element_type.hpp: ToFloat16,
// ToBfloat16, the latter taking float denormals as zero as AVX512_BF16 does), so that a GPU run's operands are the
// bits a CPU run rounds. On a CPU context rehearsing GPU code (Context::gpu_code_on_host) the same calls run on the
// host: the rules as OpenMP loops, HalfGemm as the float32 product of the widened factors (exact products, float32
// sums: what the tensor cores compute, up to the order of the sums).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/blob.hpp"
#include "core/context.hpp"
#include "core/element_type.hpp"
#include "core/elementwise.hpp"
#include "core/math_functions.hpp"
#include "core/synced_memory.hpp"

namespace crema {

// Whether `context`'s device multiplies in `precision` (float16 or bfloat16): a GPU of compute capability 7.0 on
// (Volta's tensor cores) for float16, 8.0 on (Ampere's) for bfloat16; a CPU context rehearsing GPU code does (the host
// computes the same rounding). Where not, `why` (when given) says why, naming the GPU and its compute capability.
bool DeviceMultipliesIn(const Context& context, Precision precision, std::string* why = nullptr);

// The rules (GPU kernels in half_products.cu).
struct RoundToHalfRule {
  const float* x;
  uint16_t* y;
  bool bfloat16;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = ToHalf(bfloat16, x[i]); }
};
// y = widened x + beta * y; with beta 0 y is only written (a NaN it held does not pass on).
struct WidenFromHalfRule {
  const uint16_t* x;
  float* y;
  float beta;
  bool bfloat16;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float value = FromHalf(bfloat16, x[i]);
    y[i] = beta == 0.f ? value : value + beta * y[i];
  }
};

// What an engine adds to its products' results before it writes them as 16-bit values (HalfTop below): a bias per
// channel (bias[(i / spatial) % channels], where bias is given) and a ReLU of slope `slope` (where `relu`), in that
// order, in float32, as the float32 output's own steps (the bias's product, the fused activation) compute them.
struct HalfTopFinish {
  const float* bias = nullptr;
  int spatial = 1, channels = 1;
  bool relu = false;
  float slope = 0.f;
};
// y = the 16-bit value of finish(x): x the products' result in float32 or in the 16-bit type; in place where x is y.
template <typename X>
struct HalfTopRule {
  const X* x;
  uint16_t* y;
  HalfTopFinish finish;
  bool bfloat16;
  CREMA_HOST_DEVICE void operator()(int i) const {
    float v = StoredValue(bfloat16, x[i]);
    if (finish.bias != nullptr) v += finish.bias[(i / finish.spatial) % finish.channels];
    if (finish.relu) {
      const float leaked = finish.slope * v;
      v = v > 0.f ? v : leaked;
    }
    y[i] = ToHalf(bfloat16, v);
  }
};

// y[i] = x[i] rounded to `precision`'s 16 bits, on the context's device.
void RoundToHalf(Context& context, Precision precision, int n, const float* x, uint16_t* y);
// y[i] = x[i] widened to float32 + beta * y[i], on the context's device.
void WidenFromHalf(Context& context, Precision precision, int n, const uint16_t* x, float beta, float* y);

// y[i] = finish(x[i]) rounded to `precision`'s 16 bits, on the context's device: the output of an engine computing in
// half precision where the plan keeps its top in that type (plan_element_types). The bits are those a reader of the
// float32 output, bias added and activation applied, would have rounded.
void HalfTop(Context& context, Precision precision, int n, const float* x, const HalfTopFinish& finish, uint16_t* y);
void HalfTop(Context& context, Precision precision, int n, const uint16_t* x, const HalfTopFinish& finish, uint16_t* y);

// `count` values of `blob`'s data from value `offset` as `precision`'s 16-bit values, on the context's device: the
// blob's own where the plan keeps it in that type (plan_element_types), else its floats rounded into `scratch`. Throws
// where the blob lies in another 16-bit type than `precision`'s.
const uint16_t* HalfValuesOf(Context& context, Precision precision, const Blob& blob, size_t offset, int count,
                             uint16_t* scratch);

// C = alpha * op(A) * op(B) + beta * C, row-major as gemm (math_functions.hpp), A and B holding `precision`'s 16-bit
// values, C float32, the products summed in float32: on a GPU cuBLAS's GemmEx on the tensor cores (compute type
// 32F), on the host the float32 gemm of the widened factors.
void HalfGemm(Context& context, Precision precision, Transpose trans_a, Transpose trans_b, int M, int N, int K,
              float alpha, const uint16_t* A, const uint16_t* B, float beta, float* C);

// A float32 blob's values rounded to 16 bits, kept while the blob is unchanged: an engine's copy of its weights,
// rounded again only after the blob is written (the solver's update, weights loaded), which its data_version says.
class HalfCopy {
 public:
  // The copy of `blob`'s values on the context's device in `precision`, rounded where the copy is stale: made from
  // other memory, another version of the values (Blob::data_version), another precision or count.
  const uint16_t* Of(Context& context, Precision precision, const Blob& blob);

 private:
  std::unique_ptr<SyncedMemory> memory_;
  bool made_ = false;
  uint64_t version_ = 0;
  const float* values_ = nullptr;
  Precision precision_ = Precision::kFloat32;
  int count_ = 0;
};

}  // namespace crema
