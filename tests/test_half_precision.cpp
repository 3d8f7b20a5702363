// Half precision in the GPU engines (core/half_products.hpp): float16's rounding against an independent one; the
// conversions and products on the context's device; the InnerProduct's GPU code in float16 and bfloat16, rehearsed on
// the host, against the float32 product of rounded factors (forward) and central differences of the float32 layer
// (gradients), within the bounds the type's unit roundoff gives; and on a GPU, the cuDNN convolutions and the
// InnerProduct alike, and LeNet's training in each half type to the float32 accuracy.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/element_type.hpp"
#include "core/half_products.hpp"
#include "core/random.hpp"
#include "layers/layer_registry.hpp"
#include "precision_cases.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// float16's value nearest to `x`, ties to even, computed in double arithmetic: the grid of float16 values around x
// is spaced 2^(e - 10) for x in [2^e, 2^(e+1)), e at least -14 (the subnormals share the spacing 2^-24); rint rounds
// to the nearest multiple, a tie to the even one; past 65504 the next grid value, 65536, is infinity.
double Float16Reference(float x) {
  if (std::isnan(x) || std::isinf(x)) return x;
  if (x == 0.f) return x;
  int exponent = 0;
  std::frexp(std::fabs(static_cast<double>(x)), &exponent);  // |x| in [2^(exponent-1), 2^exponent)
  const int e = std::max(exponent - 1, -14);
  const double spacing = std::ldexp(1.0, e - 10);
  const double rounded = std::rint(static_cast<double>(x) / spacing) * spacing;
  if (std::fabs(rounded) >= 65536.0) return std::copysign(INFINITY, x);
  return rounded == 0.0 ? std::copysign(0.0, x) : rounded;
}

TEST(HalfPrecisionTest, Float16RoundingIsToNearestEvenWithSubnormalsAndInfinity) {
  // Known values.
  EXPECT_EQ(ToFloat16(1.f), 0x3c00);
  EXPECT_EQ(ToFloat16(-2.f), 0xc000);
  EXPECT_EQ(ToFloat16(65504.f), 0x7bff);
  EXPECT_EQ(ToFloat16(65519.99f), 0x7bff);
  EXPECT_EQ(ToFloat16(65520.f), 0x7c00);  // halfway to 65536: to the even, infinity
  EXPECT_EQ(ToFloat16(std::ldexp(1.f, -24)), 0x0001);
  EXPECT_EQ(ToFloat16(std::ldexp(1.f, -25)), 0x0000);  // a tie, to the even zero
  EXPECT_EQ(ToFloat16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(ToFloat16(std::ldexp(1.f, -14)), 0x0400);  // the smallest normal
  EXPECT_EQ(ToFloat16(-0.f), 0x8000);
  EXPECT_EQ(ToFloat16(0.1f), 0x2e66);
  EXPECT_EQ(ToFloat16(INFINITY), 0x7c00);
  const uint16_t nan = ToFloat16(std::nanf(""));
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x3ff, 0);
  EXPECT_TRUE(std::isnan(FromFloat16(nan)));

  // Every float16 widens to its value and rounds back to itself.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float value = FromFloat16(static_cast<uint16_t>(h));
    const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    if (exponent == 0x1f && mantissa != 0) {
      EXPECT_TRUE(std::isnan(value)) << std::hex << h;
      continue;
    }
    const double expected = exponent == 0x1f ? INFINITY
                            : exponent == 0  ? std::ldexp(static_cast<double>(mantissa), -24)
                                             : std::ldexp(1.0 + mantissa / 1024.0, static_cast<int>(exponent) - 15);
    ASSERT_EQ(static_cast<double>(value), (h & 0x8000) ? -expected : expected) << std::hex << h;
    ASSERT_EQ(ToFloat16(value), h) << std::hex << h;
  }
  // Floats across the whole range (a stride through the bit patterns), and every midpoint between two neighbouring
  // float16 values with the floats either side of it.
  std::vector<float> floats;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 7919) floats.push_back(FloatOfBits(bits));
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double midpoint =
        (static_cast<double>(FromFloat16(static_cast<uint16_t>(h))) + FromFloat16(static_cast<uint16_t>(h + 1))) / 2;
    const float exact = static_cast<float>(midpoint);  // exact: 12 significant bits
    for (float x : {exact, std::nextafter(exact, 0.f), std::nextafter(exact, INFINITY)}) {
      floats.push_back(x);
      floats.push_back(-x);
    }
  }
  for (float x : floats) {
    const uint16_t rounded = ToFloat16(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(FromFloat16(rounded)));
      continue;
    }
    const double expected = Float16Reference(x);
    const float got = FromFloat16(rounded);
    ASSERT_TRUE(static_cast<double>(got) == expected && std::signbit(got) == std::signbit(expected))
        << "float " << x << " (bits " << std::hex << FloatBits(x) << ") rounds to " << got << ", expected " << expected;
  }
}

TEST(HalfPrecisionTest, ConversionsOnTheContextsDeviceRoundAndWidenAsTheScalarRules) {
  Context context;
  const int n = 5000;  // above the threshold of a threaded loop
  Blob x({n});
  test::FillGaussian(&x, 0.f, 300.f, 5);
  x.mutable_cpu_data()[0] = 1e6f;    // beyond float16's range
  x.mutable_cpu_data()[1] = 1e-40f;  // a float denormal
  for (Precision precision : {Precision::kFloat16, Precision::kBfloat16}) {
    SCOPED_TRACE(PrecisionName(precision));
    const bool bf16 = precision == Precision::kBfloat16;
    std::vector<uint16_t> half(n);
    RoundToHalf(context, precision, n, x.cpu_data(), half.data());
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(half[i], bf16 ? ToBfloat16(x.cpu_data()[i]) : ToFloat16(x.cpu_data()[i])) << i;
    std::vector<float> y(n, 2.f);
    WidenFromHalf(context, precision, n, half.data(), 0.5f, y.data());
    for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], FromHalf(bf16, half[i]) + 1.f) << i;
    std::vector<float> overwritten(n, NAN);
    WidenFromHalf(context, precision, n, half.data(), 0.f, overwritten.data());
    for (int i = 0; i < n; ++i) ASSERT_EQ(overwritten[i], FromHalf(bf16, half[i])) << i;
  }
  EXPECT_TRUE(std::isinf(FromFloat16(ToFloat16(1e6f))));
  EXPECT_EQ(ToBfloat16(1e-40f), 0);
  EXPECT_THROW(RoundToHalf(context, Precision::kFloat32, 1, x.cpu_data(), nullptr), Error);
}

using Single = test::SingleLayer;

// `text` made for a bottom of `shape` (filled from a fixed seed) on `context` with `engine`, set up, with the
// parameters of `like` where given.
std::unique_ptr<Single> Make(const std::string& text, const std::vector<int>& shape, std::shared_ptr<Context> context,
                             const std::string& engine, const Single* like = nullptr) {
  return test::MakeSingleLayer(test::ParseLayer(text), shape, std::move(context), engine, like);
}

std::shared_ptr<Context> CpuContext() { return std::make_shared<Context>(); }

using Case = test::PrecisionCase;
using test::kPrecisionInnerProduct;
using test::PrecisionConvolutionCases;

// precision_cases.hpp's inner products, and one of a single item (a matrix-vector product elsewhere).
const std::vector<Case>& InnerProductCases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> all = test::PrecisionInnerProductCases();
    all.push_back({kPrecisionInnerProduct, {1, 40}});
    return all;
  }();
  return cases;
}

// `text` with `precision` on `context` with the engine `engine`, with the parameters of `like`.
std::unique_ptr<Single> MakeIn(const std::string& text, const std::vector<int>& shape, Precision precision,
                               std::shared_ptr<Context> context, const std::string& engine, const Single& like) {
  context->set_precision(precision);
  return Make(text, shape, std::move(context), engine, &like);
}

std::shared_ptr<Context> RehearsalContext() {
  auto context = std::make_shared<Context>();
  context->set_gpu_code_on_host(true);
  return context;
}

// Every case in both half types, each layer made on a context of `make_context` with `engine`, against the native
// float32 layer on the CPU (test::CheckHalfPrecisionLayer: products exact, float32 sums within 1e-5 of the magnitudes).
void CheckInBothHalfTypes(const std::vector<Case>& cases, const std::function<std::shared_ptr<Context>()>& make_context,
                          const std::string& engine, bool rounded_results) {
  for (Precision precision : {Precision::kFloat16, Precision::kBfloat16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(PrecisionName(precision)) + " " + c.text);
      test::CheckHalfPrecisionLayer(
          [&](const Single* like) { return Make(c.text, c.shape, CpuContext(), "native", like); },
          [&](const Single& like) { return MakeIn(c.text, c.shape, precision, make_context(), engine, like); },
          precision, 1e-5, rounded_results);
    }
  }
}

// The example LeNet trained on a slice of Fashion-MNIST (400 iterations) on `context` (its device and precision),
// looked at by `inspect` (where given) before it trains: its test accuracy over the whole test slice.
float LeNetSliceAccuracy(const test::FashionMnistSlices& slices, std::shared_ptr<Context> context,
                         const std::function<void(Solver&)>& inspect = nullptr) {
  SolverParameter solver = slices.ExampleSolver("fashion_mnist/lenet_solver.prototxt");
  solver.set_max_iter(400);
  solver.clear_test_iter();
  solver.add_test_iter(10);
  solver.set_test_interval(400);
  solver.set_test_initialization(false);
  auto trainer = CreateSolver(solver, "", std::move(context));
  if (inspect) inspect(*trainer);
  trainer->Solve();
  float accuracy = 0.f;
  // Kept: a range-for over TestAll()[0] would read an element of a temporary already destroyed.
  const auto scores = trainer->TestAll();
  for (const auto& output : scores[0])
    if (output.blob == "accuracy") accuracy = output.value;
  return accuracy;
}

TEST(HalfPrecisionTest, TheInnerProductsGpuCodeRehearsedOnTheHostComputesInHalfPrecision) {
  CheckInBothHalfTypes(InnerProductCases(), RehearsalContext, "native", false);
}

// The native Convolution's and Deconvolution's GPU code (im2col and a product per image and group), rehearsed.
TEST(HalfPrecisionTest, TheNativeConvolutionsGpuCodeRehearsedOnTheHostComputesInHalfPrecision) {
  CheckInBothHalfTypes(PrecisionConvolutionCases(), RehearsalContext, "native", false);
}

// The weights' 16-bit copy follows the weights (a write makes it stale), the weights' gradient adds to what the diff
// holds, and the layer on a plain CPU context (no GPU code) computes in float32 as asked of it.
TEST(HalfPrecisionTest, TheInnerProductsHalfWeightsFollowTheirWritesAndGradientsAdd) {
  auto single = Make(kPrecisionInnerProduct, {3, 6}, CpuContext(), "native");
  auto half = MakeIn(kPrecisionInnerProduct, {3, 6}, Precision::kFloat16, RehearsalContext(), "native", *single);
  half->layer->Forward(half->bottoms(), half->tops());
  const std::vector<float> before = test::DataOf(half->top);
  Blob& weights = *half->layer->params()[0];
  weights.mutable_cpu_data()[0] += 1.f;  // the first output's first weight
  half->layer->Forward(half->bottoms(), half->tops());
  const std::vector<float> after = test::DataOf(half->top);
  const float x0 = FromFloat16(ToFloat16(half->bottom.cpu_data()[0]));
  EXPECT_NE(after[0], before[0]);
  EXPECT_NEAR(after[0] - before[0], x0, 1e-2 * std::fabs(x0) + 1e-3);  // rounded weights: within float16's rounding
  EXPECT_EQ(after[1], before[1]);

  half->top.set_diff(1.f);
  for (const auto& param : half->layer->params()) param->set_diff(0.f);
  half->layer->Backward(half->tops(), {false}, half->bottoms());
  const std::vector<float> once = test::DiffOf(weights);
  half->layer->Backward(half->tops(), {false}, half->bottoms());
  const std::vector<float> twice = test::DiffOf(weights);
  for (size_t i = 0; i < once.size(); ++i) EXPECT_EQ(twice[i], 2 * once[i]) << i;

  auto plain = std::make_shared<Context>();
  auto cpu = MakeIn(kPrecisionInnerProduct, {3, 6}, Precision::kFloat16, plain, "native", *single);
  EXPECT_EQ(cpu->layer->computes_in(), Precision::kFloat32);
  EXPECT_EQ(cpu->layer->requested_precision(), Precision::kFloat16);
  std::string why;
  EXPECT_FALSE(DeviceMultipliesIn(*plain, Precision::kFloat16, &why));
  EXPECT_CONTAINS(why, "CPU context");
  EXPECT_TRUE(DeviceMultipliesIn(*RehearsalContext(), Precision::kBfloat16));
}

// LeNet trained through its GPU code rehearsed on the host in float16, its solver's dynamic loss scaling on by itself:
// the native convolutions and the inner products multiply float16 copies as a GPU run does, and the training reaches
// the float32 CPU run's accuracy (400 iterations on a slice of Fashion-MNIST). (bf16 trains on the CPU's own engines,
// test_precision.)
TEST(HalfPrecisionTest, LeNetTrainedThroughItsRehearsedGpuCodeInHalfPrecisionReachesTheFloat32Accuracy) {
  CREMA_SKIP_WITHOUT_FASHION_MNIST();
  if (test::kAddressSanitizer)
    GTEST_SKIP() << "a training through the GPU code on the host takes minutes under AddressSanitizer; the plain "
                    "build runs it";
  test::FashionMnistSlices slices(6000, 1000);
  const auto train = [&](Precision precision, bool* loss_scaled) {
    // float32 on the CPU's own code (the reference, and quick); float16 through the GPU code.
    auto context = std::make_shared<Context>();
    if (precision != Precision::kFloat32) {
      context->set_gpu_code_on_host(true);
      context->set_precision(precision);
      context->ForceEngines("native");
    }
    return LeNetSliceAccuracy(slices, context, [&](Solver& trainer) {
      for (const auto& layer : trainer.net()->layers()) {
        const std::string type = layer->type();
        if (type == "Convolution" || type == "InnerProduct") {
          EXPECT_EQ(layer->computes_in(), precision) << layer->name();
        }
      }
      *loss_scaled = trainer.loss_scaling() != nullptr;
    });
  };
  bool scaled = false;
  const float float32 = train(Precision::kFloat32, &scaled);
  EXPECT_FALSE(scaled);
  EXPECT_GT(float32, 0.65f);
  EXPECT_NEAR(train(Precision::kFloat16, &scaled), float32, 0.02f);
  EXPECT_TRUE(scaled);
}

// ---- on a GPU ---------------------------------------------------------------------------------------------------

std::shared_ptr<Context> GpuContext() { return std::make_shared<Context>(Device::kGPU, 0); }

// Skips where the GPU's tensor cores do not multiply in `precision`.
#define CREMA_SKIP_WITHOUT_HALF_GPU(precision) \
  CREMA_SKIP_WITHOUT_GPU();                    \
  if (std::string why; !DeviceMultipliesIn(*GpuContext(), precision, &why)) GTEST_SKIP() << why

TEST(GpuHalfPrecisionTest, CudnnConvolutionsComputeInHalfPrecisionOnTheTensorCores) {
  CREMA_SKIP_WITHOUT_HALF_GPU(Precision::kBfloat16);  // the later of the two (compute capability 8.0)
  CheckInBothHalfTypes(PrecisionConvolutionCases(), GpuContext, "cudnn", true);
}

TEST(GpuHalfPrecisionTest, TheInnerProductComputesInHalfPrecisionOnTheTensorCores) {
  CREMA_SKIP_WITHOUT_HALF_GPU(Precision::kBfloat16);
  CheckInBothHalfTypes(InnerProductCases(), GpuContext, "native", false);
}

// The example LeNet trained on the GPU in each half type reaches the float32 GPU run's accuracy (400 iterations on
// a slice of Fashion-MNIST, as FashionMnistTest's GPU test; float16 with the dynamic loss scaling its solver turns
// on by itself).
TEST(GpuHalfPrecisionTest, LeNetTrainsInHalfPrecisionToTheFloat32Accuracy) {
  CREMA_SKIP_WITHOUT_GPU();
  CREMA_SKIP_WITHOUT_FASHION_MNIST();
  test::FashionMnistSlices slices(6000, 1000);
  const auto train = [&](Precision precision) {
    auto context = GpuContext();
    context->set_precision(precision);
    return LeNetSliceAccuracy(slices, context);
  };
  const float float32 = train(Precision::kFloat32);
  EXPECT_GT(float32, 0.65f);
  for (Precision precision : {Precision::kFloat16, Precision::kBfloat16}) {
    if (!DeviceMultipliesIn(*GpuContext(), precision)) continue;
    SCOPED_TRACE(PrecisionName(precision));
    EXPECT_NEAR(train(precision), float32, 0.02f);
  }
}

}  // namespace
}  // namespace crema
