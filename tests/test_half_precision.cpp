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
#include <set>
#include <string>
#include <vector>

#include "core/element_type.hpp"
#include "core/half_products.hpp"
#include "core/im2col.hpp"
#include "core/random.hpp"
#include "io/proto_io.hpp"
#include "layers/layer_registry.hpp"
#include "layers/neuron/fused_activation.hpp"
#include "net/net.hpp"
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

TEST(HalfPrecisionTest, Float16BlobsHoldHalfTheBytesAndReadAsTheirValues) {
  EXPECT_EQ(ElementTypeName(ElementType::kFloat16), "float16");
  EXPECT_EQ(ElementBytes(ElementType::kFloat16), 2u);
  EXPECT_TRUE(IsHalfType(ElementType::kFloat16));
  EXPECT_TRUE(IsHalfType(ElementType::kBfloat16));
  EXPECT_FALSE(IsHalfType(ElementType::kFloat32));
  EXPECT_FALSE(IsHalfType(ElementType::kInt8));
  EXPECT_EQ(HalfElementType(Precision::kFloat16), ElementType::kFloat16);
  EXPECT_EQ(HalfElementType(Precision::kBfloat16), ElementType::kBfloat16);

  Blob blob({3, 5});  // 15 values: 8 floats of storage
  blob.set_quantization({ElementType::kFloat16, 4.f});
  EXPECT_EQ(blob.data_type(), ElementType::kFloat16);
  EXPECT_EQ(blob.quantization().scale, 1.f);  // a 16-bit float has no scale
  EXPECT_EQ(blob.data_floats(), 8u);
  EXPECT_EQ(blob.diff_floats(), 15u);  // the gradient stays float32
  const float values[] = {0.f,      -0.f, 1.f,  -2.5f,  65504.f, 1e5f,   6e-8f,  1e-3f,
                          3.14159f, -7.f, 0.1f, 2048.f, 2049.f,  -1e-9f, 12.375f};
  auto* bits = static_cast<uint16_t*>(blob.mutable_cpu_bytes());
  for (int i = 0; i < 15; ++i) bits[i] = ToFloat16(values[i]);
  const std::vector<float> read = PlainValues(blob);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(FloatBits(read[i]), FloatBits(FromFloat16(ToFloat16(values[i])))) << i;
  EXPECT_EQ(read[5], INFINITY);       // past float16's largest
  EXPECT_EQ(read[12], 2048.f);        // a tie, to the even neighbour
  EXPECT_EQ(read[6], 5.9604645e-8f);  // the smallest subnormal
  EXPECT_CONTAINS(test::ErrorMessage([&] { blob.cpu_data(); }), "holds float16");
  EXPECT_CONTAINS(test::ErrorMessage([&] { blob.mutable_data_on(Device::kCPU); }), "CREMA_ELEMENT_TYPES=float");
  EXPECT_NO_THROW(blob.cpu_diff());
}

// A ReLU fused for training runs backward over its output in 16 bits (a half-precision engine's top the plan keeps so)
// on `context`'s device as over the floats it was rounded from, but where a positive float rounded to zero: there the
// gradient is the slope's, as the 16-bit value reads (docs/architecture.md "Float16 and bf16 blobs on the GPU").
void ExpectFusedReLUBackwardReadsSixteenBitSigns(Context& context) {
  RandomStream random(29);
  for (const ElementType type : {ElementType::kFloat16, ElementType::kBfloat16}) {
    const bool bfloat16 = type == ElementType::kBfloat16;
    // Below what the type rounds away from zero: 2^-26 in float16, a denormal float (2^-130) in bf16.
    const float vanishing = bfloat16 ? 7.346840e-40f : 1.4901161e-8f;
    for (const float slope : {0.f, 0.25f}) {
      SCOPED_TRACE(std::string(ElementTypeName(type)) + ", slope " + std::to_string(slope));
      const int n = 1000;
      std::vector<float> y(n), dy(n);
      for (int i = 0; i < n; ++i) y[i] = random.Gaussian(0.f, 1.f), dy[i] = random.Gaussian(0.f, 1.f);
      y[0] = 0.f, y[1] = -0.f, y[2] = vanishing, y[3] = -vanishing, y[4] = 1e-3f, y[5] = -1e-3f;
      Blob floats({n}), halves({n});
      halves.set_quantization({type, 1.f});
      std::copy(y.begin(), y.end(), floats.mutable_cpu_data());
      auto* bits = static_cast<uint16_t*>(halves.mutable_cpu_bytes());
      for (int i = 0; i < n; ++i) bits[i] = ToHalf(bfloat16, y[i]);
      std::copy(dy.begin(), dy.end(), floats.mutable_cpu_diff());
      std::copy(dy.begin(), dy.end(), halves.mutable_cpu_diff());
      const FusedActivation relu{FusedActivation::kReLU, slope};
      ApplyFusedActivationBackward(context, relu, &floats);
      ApplyFusedActivationBackward(context, relu, &halves);
      const float* over_floats = floats.cpu_diff();
      const float* over_halves = halves.cpu_diff();
      for (int i = 0; i < n; ++i) {
        const float expected = y[i] > 0.f ? dy[i] : slope * dy[i];
        ASSERT_EQ(FloatBits(over_floats[i]), FloatBits(expected)) << i;
        if (i == 2) {  // the vanishing positive value: zero in 16 bits
          EXPECT_EQ(FloatBits(over_halves[i]), FloatBits(slope * dy[i]));
          continue;
        }
        ASSERT_EQ(FloatBits(over_halves[i]), FloatBits(expected)) << i << ": y " << y[i];
      }
    }
  }
}

TEST(HalfPrecisionTest, AFusedReLUsBackwardReadsItsSixteenBitOutputsSigns) {
  Context context;
  ExpectFusedReLUBackwardReadsSixteenBitSigns(context);
}

// im2col of a rounded image is the rounding of the float image's columns (padding is zero in either type), over
// random geometries, 2-d and 3-d, on the host's path and by the GPU's rule.
TEST(HalfPrecisionTest, SixteenBitImagesUnrollIntoTheRoundedColumns) {
  Context context;
  RandomStream random(31);
  for (int trial = 0; trial < 40; ++trial) {
    const int axes = trial % 4 == 3 ? 3 : 2;
    std::vector<int> image_shape = {1 + static_cast<int>(random.Uniform(0.f, 4.f))}, column_shape, kernel, pad, stride,
                     dilation;
    for (int a = 0; a < axes; ++a) {
      image_shape.push_back(2 + static_cast<int>(random.Uniform(0.f, 7.f)));
      kernel.push_back(1 + static_cast<int>(random.Uniform(0.f, 3.f)));
      pad.push_back(static_cast<int>(random.Uniform(0.f, 2.f)));
      stride.push_back(1 + static_cast<int>(random.Uniform(0.f, 2.f)));
      dilation.push_back(1 + static_cast<int>(random.Uniform(0.f, 2.f)));
    }
    column_shape.push_back(image_shape[0]);
    bool fits = true;
    for (int a = 0; a < axes; ++a) {
      const int extent = dilation[a] * (kernel[a] - 1) + 1, span = image_shape[a + 1] + 2 * pad[a] - extent;
      fits = fits && span >= 0;
      column_shape[0] *= kernel[a];
      column_shape.push_back(span / stride[a] + 1);
    }
    if (!fits) continue;
    const UnrollGeometry g = MakeUnrollGeometry(axes, image_shape.data(), column_shape.data(), kernel.data(),
                                                pad.data(), stride.data(), dilation.data(), 0, axes == 2);
    Blob image({g.channels * g.image_size});
    test::FillGaussian(&image, 0.f, 3.f, 100 + trial);
    std::vector<float> columns(static_cast<size_t>(g.channels) * g.kernel_size * g.output_size, NAN);
    im2col(context, image.cpu_data(), g, columns.data());
    for (bool bfloat16 : {false, true}) {
      std::vector<uint16_t> rounded(static_cast<size_t>(image.count()));
      for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = ToHalf(bfloat16, image.cpu_data()[i]);
      std::vector<uint16_t> half_columns(columns.size(), 0xffff), by_rule(columns.size(), 0xffff);
      im2col(context, rounded.data(), g, half_columns.data());
      // The GPU's rule, value by value (the host unrolls 2-d images line by line).
      for_each_element(context, static_cast<int>(columns.size()),
                       Im2colRuleOf<uint16_t>{rounded.data(), by_rule.data(), g});
      for (size_t i = 0; i < columns.size(); ++i) {
        ASSERT_EQ(half_columns[i], ToHalf(bfloat16, columns[i])) << "trial " << trial << ", value " << i;
        ASSERT_EQ(by_rule[i], half_columns[i]) << "trial " << trial << ", value " << i;
      }
    }
  }
}

// A layer whose GPU code reads its input in its products' 16-bit type (an AVE pooling, rehearsed) says so, reads a
// float input, and refuses an input in the other 16-bit type, naming the layer, the bottom and the type
// (Layer::BottomIsHalf).
TEST(HalfPrecisionTest, ALayerReadingSixteenBitsRefusesTheOtherSixteenBitType) {
  for (Precision precision : {Precision::kFloat16, Precision::kBfloat16}) {
    SCOPED_TRACE(PrecisionName(precision));
    const ElementType half = HalfElementType(precision);
    const ElementType other =
        HalfElementType(precision == Precision::kFloat16 ? Precision::kBfloat16 : Precision::kFloat16);
    auto context = RehearsalContext();
    context->set_precision(precision);
    auto pool = Make("name: 'pool' type: 'Pooling' pooling_param { pool: AVE kernel_size: 2 stride: 2 }", {2, 3, 4, 4},
                     context, "native");
    EXPECT_EQ(pool->layer->ReadsQuantized(0), (Quantization{half, 1.f}));
    pool->layer->Forward(pool->bottoms(), pool->tops());  // floats, rounded to `half` as they are read
    const std::vector<float> input = test::DataOf(pool->bottom);
    pool->bottom.set_quantization({other, 1.f});
    auto* bits = static_cast<uint16_t*>(pool->bottom.mutable_cpu_bytes());
    for (size_t i = 0; i < input.size(); ++i) bits[i] = ToHalf(other == ElementType::kBfloat16, input[i]);
    pool->layer->Reshape(pool->bottoms(), pool->tops());
    const std::string error = test::ErrorMessage([&] { pool->layer->Forward(pool->bottoms(), pool->tops()); });
    EXPECT_CONTAINS(error, "layer 'pool' (Pooling): bottom 0 lies in " + std::string(ElementTypeName(other)) +
                               ", which this layer does not read");
    // A CPU layer reads floats only.
    auto cpu_context = CpuContext();
    cpu_context->set_precision(precision);
    EXPECT_TRUE(Make("name: 'pool' type: 'Pooling' pooling_param { pool: AVE kernel_size: 2 stride: 2 }", {2, 3, 4, 4},
                     cpu_context, "native")
                    ->layer->ReadsQuantized(0)
                    .floats());
  }
}

// The half-precision engines' GPU code, rehearsed: a top written in 16 bits (the plan's choice where every reader
// rounds it so) holds the bits a float32 top, its bias added and its fused ReLU applied, would be rounded to; a 16-bit
// bottom gives the float bottom's outputs and gradients. What the engines say they read and write, too.
TEST(HalfPrecisionTest, SixteenBitTopsAndBottomsOfTheRehearsedEnginesAreTheRoundedFloats) {
  std::vector<Case> cases = PrecisionConvolutionCases();
  cases.push_back({kPrecisionInnerProduct, {4, 3, 5}});
  for (Precision precision : {Precision::kFloat16, Precision::kBfloat16}) {
    const bool bfloat16 = precision == Precision::kBfloat16;
    const ElementType half = HalfElementType(precision);
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(PrecisionName(precision)) + " " + c.text);
      auto reference = Make(c.text, c.shape, CpuContext(), "native");
      const auto make = [&] { return MakeIn(c.text, c.shape, precision, RehearsalContext(), "native", *reference); };
      auto floats = make(), halves = make();
      Layer& layer = *halves->layer;
      EXPECT_EQ(layer.ReadsQuantized(0), (Quantization{half, 1.f}));
      EXPECT_TRUE(layer.WritesQuantized(0, half));
      EXPECT_FALSE(layer.WritesQuantized(0, HalfElementType(bfloat16 ? Precision::kFloat16 : Precision::kBfloat16)));
      EXPECT_FALSE(layer.WritesQuantized(0, ElementType::kUInt8));
      const FusedActivation leaky{FusedActivation::kReLU, 0.25f};
      for (auto* single : {floats.get(), halves.get()}) single->layer->set_fused_activation(leaky);
      EXPECT_TRUE(layer.WritesQuantized(0, half));
      layer.set_fused_sum(true);
      EXPECT_FALSE(layer.WritesQuantized(0, half)) << "a fused sum adds to floats";
      EXPECT_TRUE(layer.ReadsQuantized(1).floats()) << "the summand is added in floats";
      EXPECT_EQ(layer.ReadsQuantized(0), (Quantization{half, 1.f}));
      layer.set_fused_sum(false);
      layer.set_fused_activation({FusedActivation::kSigmoid, 0.f});
      EXPECT_FALSE(layer.WritesQuantized(0, half)) << "HalfTop applies a ReLU only";
      layer.set_fused_activation(leaky);

      // The 16-bit bottom holds the float bottom's values rounded; the float twin reads the float values (rounding
      // them itself).
      const std::vector<float> input = test::DataOf(halves->bottom);
      halves->bottom.set_quantization({half, 1.f});
      auto* bits = static_cast<uint16_t*>(halves->bottom.mutable_cpu_bytes());
      for (size_t i = 0; i < input.size(); ++i) bits[i] = ToHalf(bfloat16, input[i]);
      halves->top.set_quantization({half, 1.f});
      layer.Reshape(halves->bottoms(), halves->tops());
      floats->layer->Forward(floats->bottoms(), floats->tops());
      layer.Forward(halves->bottoms(), halves->tops());
      const std::vector<float> expected = test::DataOf(floats->top), got = PlainValues(halves->top);
      ASSERT_EQ(got.size(), expected.size());
      int negative = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(FloatBits(got[i]), FloatBits(FromHalf(bfloat16, ToHalf(bfloat16, expected[i])))) << i;
        negative += expected[i] < 0.f;
      }
      EXPECT_GT(negative, 0) << "the leaky ReLU had nothing to do";

      // Backward (no fused activation: that runs forward only): the same gradients from the 16-bit bottom.
      for (auto* single : {floats.get(), halves.get()}) single->layer->set_fused_activation({});
      Blob top_diff(floats->top.shape());
      test::FillGaussian(&top_diff, 0.f, 1.f, 7);
      for (auto* single : {floats.get(), halves.get()}) {
        std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), single->top.mutable_cpu_diff());
        for (const auto& param : single->layer->params()) param->set_diff(0.f);
        single->layer->Backward(single->tops(), {true}, single->bottoms());
      }
      EXPECT_EQ(test::DiffOf(halves->bottom), test::DiffOf(floats->bottom));
      for (size_t i = 0; i < layer.params().size(); ++i)
        EXPECT_EQ(test::DiffOf(*layer.params()[i]), test::DiffOf(*floats->layer->params()[i])) << "parameter " << i;
    }
  }
}

// A solver of 12 iterations training `net_text` with products in `precision` (float16 or bf16), no snapshot.
SolverParameter HalfSolver(Precision precision, const std::string& net_text) {
  SolverParameter param = test::ResumeSolver(net_text, "", 12, 0);
  param.set_snapshot_after_train(false);
  param.set_precision(precision == Precision::kFloat16 ? ::caffe::FLOAT16 : ::caffe::BFLOAT16);
  return param;
}

// A training net whose half-precision layers read one another's outputs, one of them through a Split, three through
// a ReLU in place that training fuses into them (net/fuse.hpp): conv1 (+ReLU) -> conv2 (1x1, +leaky ReLU) ->
// {deconv -> ip1 (+ReLU) -> ip2, conv3 -> ip3}, the last two summed into the loss. `fuse` false: none fused
// (NetParameter.fold).
SolverParameter HalfChainSolver(Precision precision, bool fuse = true) {
  SolverParameter param = HalfSolver(precision, R"(
    name: 'half_chain'
    layer { name: 'data' type: 'DummyData' top: 'data' top: 'label'
            dummy_data_param { shape { dim: 4 dim: 3 dim: 9 dim: 9 } shape { dim: 4 }
                               data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' value: 2 } } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
            convolution_param { num_output: 6 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' }
                                bias_filler { type: 'gaussian' std: 0.1 } } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }
    layer { name: 'conv2' type: 'Convolution' bottom: 'conv1' top: 'conv2'
            convolution_param { num_output: 8 kernel_size: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'relu2' type: 'ReLU' bottom: 'conv2' top: 'conv2' relu_param { negative_slope: 0.1 } }
    layer { name: 'deconv' type: 'Deconvolution' bottom: 'conv2' top: 'deconv'
            convolution_param { num_output: 4 kernel_size: 2 stride: 2 weight_filler { type: 'xavier' }
                                bias_filler { type: 'gaussian' std: 0.1 } } }
    layer { name: 'conv3' type: 'Convolution' bottom: 'conv2' top: 'conv3'
            convolution_param { num_output: 4 kernel_size: 3 stride: 2 weight_filler { type: 'xavier' } } }
    layer { name: 'ip1' type: 'InnerProduct' bottom: 'deconv' top: 'ip1'
            inner_product_param { num_output: 10 weight_filler { type: 'xavier' } bias_filler { type: 'gaussian' std: 0.1 } } }
    layer { name: 'relu3' type: 'ReLU' bottom: 'ip1' top: 'ip1' }
    layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'
            inner_product_param { num_output: 5 weight_filler { type: 'xavier' } } }
    layer { name: 'ip3' type: 'InnerProduct' bottom: 'conv3' top: 'ip3'
            inner_product_param { num_output: 5 weight_filler { type: 'xavier' } } }
    layer { name: 'sum' type: 'Eltwise' bottom: 'ip2' bottom: 'ip3' top: 'sum' }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'sum' bottom: 'label' top: 'loss' }
  )");
  param.mutable_net_param()->set_fold(fuse);
  return param;
}

// A solver of `param` on a context of `make_context` computing in `precision`, with 16-bit blobs where the plan keeps
// them (`halves`), and its twin with float blobs (`floats`, CREMA_ELEMENT_TYPES=float); both trained where `solve`.
struct HalfAndFloatSolvers {
  std::unique_ptr<Solver> halves, floats;
};
HalfAndFloatSolvers MakeHalfAndFloatSolvers(const SolverParameter& param, Precision precision,
                                            const std::function<std::shared_ptr<Context>()>& make_context, bool solve) {
  const auto context = [&] {
    auto made = make_context();
    made->set_precision(precision);
    return made;
  };
  HalfAndFloatSolvers made;
  made.halves = CreateSolver(param, "", context());
  {
    const test::ScopedEnvironment float_blobs("CREMA_ELEMENT_TYPES", "float");
    made.floats = CreateSolver(param, "", context());
    if (solve) made.floats->Solve();
  }
  if (solve) made.halves->Solve();
  return made;
}

// HalfChainSolver's net trained on contexts of `make_context` with 16-bit blobs between its half-precision layers
// (checked: each layer's output that only such layers read lies in the type, the fused ReLUs' outputs among them)
// gives the training with float32 blobs bit for bit, and the training with the ReLUs' own steps (where a ReLU reads
// floats, so that its producer writes them): every weight after 12 iterations, in both half types.
void ExpectSixteenBitBlobsChangeNoBit(const std::function<std::shared_ptr<Context>()>& make_context) {
  for (Precision precision : {Precision::kFloat16, Precision::kBfloat16}) {
    SCOPED_TRACE(PrecisionName(precision));
    auto [halves, floats] = MakeHalfAndFloatSolvers(HalfChainSolver(precision), precision, make_context, true);
    auto unfused_context = make_context();
    unfused_context->set_precision(precision);
    auto unfused = CreateSolver(HalfChainSolver(precision, false), "", unfused_context);
    unfused->Solve();
    const Net& net = *halves->net();
    ASSERT_EQ(net.rewrites().size(), 3u) << ::testing::PrintToString(net.rewrites());
    EXPECT_EQ(net.rewrites()[0], "conv1 (Convolution): runs relu1 (ReLU) in its own passes, for training");
    EXPECT_EQ(net.rewrites()[1], "conv2 (Convolution): runs relu2 (ReLU) in its own passes, for training");
    EXPECT_EQ(net.rewrites()[2], "ip1 (InnerProduct): runs relu3 (ReLU) in its own passes, for training");
    EXPECT_TRUE(unfused->net()->rewrites().empty());
    for (const std::string name : {"conv1", "conv2", "ip1"})
      EXPECT_TRUE(unfused->net()->blob_by_name(name)->quantization().floats()) << name;
    for (const std::string name : {"deconv", "conv3"})
      EXPECT_EQ(unfused->net()->blob_by_name(name)->data_type(), HalfElementType(precision)) << name;
    for (const std::string name : {"conv1", "conv2", "deconv", "conv3", "ip1"}) {
      EXPECT_EQ(ElementTypeName(net.blob_by_name(name)->data_type()), ElementTypeName(HalfElementType(precision)))
          << name;
      EXPECT_TRUE(floats->net()->blob_by_name(name)->quantization().floats()) << name;
    }
    for (const std::string name : {"data", "ip2", "ip3", "sum"})
      EXPECT_TRUE(net.blob_by_name(name)->quantization().floats()) << name;
    for (const std::string name : {"conv1", "conv2", "deconv", "conv3", "ip1", "ip2", "ip3"})
      EXPECT_EQ(net.layer_by_name(name)->computes_in(), precision) << name;
    const auto& params = net.learnable_params();
    const auto& float_params = floats->net()->learnable_params();
    const auto& unfused_params = unfused->net()->learnable_params();
    ASSERT_EQ(params.size(), float_params.size());
    ASSERT_EQ(params.size(), unfused_params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> got = test::DataOf(*params[i]);
      EXPECT_TRUE(got == test::DataOf(*float_params[i]))
          << "parameter " << i << " differs from the float32 blobs' training";
      EXPECT_TRUE(got == test::DataOf(*unfused_params[i])) << "parameter " << i << " differs from the unfused training";
      for (float v : got) ASSERT_TRUE(std::isfinite(v)) << "parameter " << i;
    }
  }
}

// A training net whose half-precision layers meet through MAX poolings and a Concat, which pass 16-bit values
// through: conv1 -> pool1 (+ReLU, as CIFAR-10's) -> {conva (1x1, +ReLU), convb} -> concat -> pool2 -> conv3 -> ip
// -> loss.
SolverParameter PoolConcatSolver(Precision precision) {
  return HalfSolver(precision, R"(
    name: 'half_pool_concat'
    layer { name: 'data' type: 'DummyData' top: 'data' top: 'label'
            dummy_data_param { shape { dim: 4 dim: 3 dim: 12 dim: 12 } shape { dim: 4 }
                               data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' value: 3 } } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
            convolution_param { num_output: 6 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' }
                                bias_filler { type: 'gaussian' std: 0.1 } } }
    layer { name: 'pool1' type: 'Pooling' bottom: 'conv1' top: 'pool1' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'pool1' top: 'pool1' }
    layer { name: 'conva' type: 'Convolution' bottom: 'pool1' top: 'conva'
            convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: 'xavier' }
                                bias_filler { type: 'gaussian' std: 0.1 } } }
    layer { name: 'relua' type: 'ReLU' bottom: 'conva' top: 'conva' }
    layer { name: 'convb' type: 'Convolution' bottom: 'pool1' top: 'convb'
            convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'concat' type: 'Concat' bottom: 'conva' bottom: 'convb' top: 'concat' }
    layer { name: 'pool2' type: 'Pooling' bottom: 'concat' top: 'pool2' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
    layer { name: 'conv3' type: 'Convolution' bottom: 'pool2' top: 'conv3'
            convolution_param { num_output: 5 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'conv3' top: 'ip'
            inner_product_param { num_output: 10 weight_filler { type: 'xavier' } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
  )");
}

// PoolConcatSolver's net on contexts of `make_context`, with 16-bit blobs and with float ones: the poolings and the
// Concat pass the 16 bits through (every blob from conv1 to conv3 lies in 16 bits; training fuses the ReLUs into pool1
// and conva), and a forward gives each such blob as the rounding of the float run's, and the same loss, bit for bit.
// Each pooling's argmax points at a window's first maximum of the 16-bit values (pool1's output its ReLU): the float
// run's where the rounding made no tie (where it did, the float run's maximum is one of the equal 16-bit ones, after
// the first; where the float run keeps an argmax to compare). Trained 12 iterations, both runs' weights agree within
// eight units of the type's rounding.
void ExpectSixteenBitsPassThroughPoolingAndConcat(const std::function<std::shared_ptr<Context>()>& make_context) {
  for (Precision precision : {Precision::kFloat16, Precision::kBfloat16}) {
    SCOPED_TRACE(PrecisionName(precision));
    const bool bfloat16 = precision == Precision::kBfloat16;
    auto [halves, floats] = MakeHalfAndFloatSolvers(PoolConcatSolver(precision), precision, make_context, false);
    Net& h = *halves->net();
    Net& f = *floats->net();
    ASSERT_EQ(h.rewrites().size(), 2u) << ::testing::PrintToString(h.rewrites());
    EXPECT_EQ(h.rewrites()[0], "pool1 (Pooling): runs relu1 (ReLU) in its own passes, for training");
    EXPECT_EQ(h.rewrites()[1], "conva (Convolution): runs relua (ReLU) in its own passes, for training");
    const std::set<std::string> sixteen = {"conv1", "pool1", "conva", "convb", "concat", "pool2", "conv3"};
    for (const std::string& name : sixteen)
      ASSERT_EQ(ElementTypeName(h.blob_by_name(name)->data_type()), ElementTypeName(HalfElementType(precision)))
          << name;
    for (const std::string name : {"data", "ip", "loss"}) EXPECT_TRUE(h.blob_by_name(name)->quantization().floats());
    // A pass to make the storage, then one step by step, each top compared as it is written (the memory plan gives a
    // blob no later step reads to others).
    h.Forward();
    f.Forward();
    ASSERT_EQ(h.plan().size(), f.plan().size());
    float loss = 0.f, float_loss = 0.f;
    int ties = 0;
    for (size_t s = 0; s < h.plan().size(); ++s) {
      loss += h.ForwardStep(s);
      float_loss += f.ForwardStep(s);
      const PlanStep& step = h.plan()[s];
      for (int id : step.tops) {
        const std::string& name = h.blob_names()[id];
        if (!sixteen.count(name)) continue;
        SCOPED_TRACE(name);
        const std::vector<float> got = PlainValues(*h.blobs()[id]);
        const float* want = f.blob_by_name(name)->cpu_data();
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(FloatBits(got[i]), FloatBits(FromHalf(bfloat16, ToHalf(bfloat16, want[i])))) << i;
      }
      const std::string& pool = h.layer_names()[step.layer];
      if (pool != "pool1" && pool != "pool2") continue;
      SCOPED_TRACE(pool);
      const Blob& out = *h.blobs()[step.tops[0]];
      const Blob& argmax = *h.layer_by_name(pool)->internal_blobs().at(0);
      const Blob& float_argmax = *f.layer_by_name(pool)->internal_blobs().at(0);
      ASSERT_EQ(argmax.count(), out.count());
      const std::vector<float> in = PlainValues(*h.blobs()[step.bottoms[0]]), pooled = PlainValues(out);
      const int plane = h.blobs()[step.bottoms[0]]->count(2), outputs = out.count(2);
      for (int i = 0; i < out.count(); ++i) {
        const int at = static_cast<int>(argmax.cpu_data()[i]);
        const size_t start = static_cast<size_t>(i / outputs) * plane;
        const float most = in[start + at];
        const float relu = most > 0.f ? most : 0.f * most;  // the ReLU layer's rule
        ASSERT_EQ(FloatBits(pooled[i]), FloatBits(pool == "pool1" ? relu : most)) << "output " << i;
        if (float_argmax.count() != out.count()) continue;  // cuDNN's float run keeps none
        const int float_at = static_cast<int>(float_argmax.cpu_data()[i]);
        if (float_at == at) continue;
        ++ties;
        EXPECT_LT(at, float_at) << "output " << i;
        EXPECT_EQ(in[start + float_at], most) << "output " << i;
      }
    }
    EXPECT_EQ(FloatBits(loss), FloatBits(float_loss));
    LOG(INFO) << ties << " windows whose float maximum the rounding tied with an earlier value";
    halves->Solve();
    floats->Solve();
    // Eight units of the type's rounding (2^-11 in float16, 2^-8 in bf16) of each weight blob's largest value: ties
    // move a window's gradient to an equal neighbour, in bf16's seven bits of mantissa more often (12 iterations here
    // moved the weights by up to 0.44% of that scale in bf16, by nothing in float16).
    const float tolerance = 8.f * (bfloat16 ? 1.f / 256 : 1.f / 2048);
    const auto& params = h.learnable_params();
    const auto& float_params = f.learnable_params();
    ASSERT_EQ(params.size(), float_params.size());
    for (size_t p = 0; p < params.size(); ++p) {
      const std::vector<float> got = test::DataOf(*params[p]), expected = test::DataOf(*float_params[p]);
      float scale = 0.f, most = 0.f;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << "parameter " << p;
        scale = std::max(scale, std::fabs(expected[i]));
        most = std::max(most, std::fabs(got[i] - expected[i]));
      }
      EXPECT_LE(most, tolerance * scale) << "parameter " << p;
    }
  }
}

TEST(HalfPrecisionTest, SixteenBitValuesPassThroughRehearsedMaxPoolingsAndConcats) {
  ExpectSixteenBitsPassThroughPoolingAndConcat([] {
    auto context = RehearsalContext();
    context->ForceEngines("native");
    return context;
  });
}

// A training net of ResNet units: convolutions (no bias) each followed by a BatchNorm, a Scale and (bn0, bn1) a ReLU
// in place, which training fuses into the BatchNorm; conv1's unit also feeds the residual sum. data -> conv0 -> conv1
// -> conv2 -> conv3, then sum = conv3 + conv1 and its ReLU -> a global average pooling, as a ResNet's -> ip -> loss.
SolverParameter ResidualUnitsSolver(Precision precision) {
  std::string units;
  for (int k = 0; k < 4; ++k) {
    const std::string n = std::to_string(k), input = k == 0 ? "data" : "conv" + std::to_string(k - 1);
    units +=
        "layer { name: 'conv" + n + "' type: 'Convolution' bottom: '" + input + "' top: 'conv" + n +
        "' convolution_param { num_output: 8 kernel_size: 3 pad: 1 bias_term: false "
        "weight_filler { type: 'xavier' } } }\n"
        "layer { name: 'bn" +
        n + "' type: 'BatchNorm' bottom: 'conv" + n + "' top: 'conv" + n + "' }\n" + "layer { name: 'sc" + n +
        "' type: 'Scale' bottom: 'conv" + n + "' top: 'conv" + n +
        "' scale_param { bias_term: true filler { type: 'uniform' min: 0.5 max: 1.5 } "
        "bias_filler { type: 'uniform' min: -0.3 max: 0.3 } } }\n" +
        (k >= 2 ? "" : "layer { name: 'relu" + n + "' type: 'ReLU' bottom: 'conv" + n + "' top: 'conv" + n + "' }\n");
  }
  return HalfSolver(precision, R"(
    name: 'half_residual_units'
    layer { name: 'data' type: 'DummyData' top: 'data' top: 'label'
            dummy_data_param { shape { dim: 4 dim: 3 dim: 6 dim: 6 } shape { dim: 4 }
                               data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' value: 1 } } }
    )" + units + R"(
    layer { name: 'sum' type: 'Eltwise' bottom: 'conv3' bottom: 'conv1' top: 'sum' }
    layer { name: 'relu_sum' type: 'ReLU' bottom: 'sum' top: 'sum' }
    layer { name: 'pool' type: 'Pooling' bottom: 'sum' top: 'pool' pooling_param { pool: AVE global_pooling: true } }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'pool' top: 'ip'
            inner_product_param { num_output: 3 weight_filler { type: 'xavier' } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
  )");
}

// ResidualUnitsSolver's net on contexts of `make_context`: each BatchNorm runs its Scale and ReLU, and the sum its
// ReLU. Each BatchNorm reads its input in 16 bits, so every convolution writes its output so, and leaves its place on
// that output for a top of its own, which it writes in 16 bits for the convolution after it (bn0 with its ReLU, bn2
// without), for the sum (bn3, without, as a ResNet unit's last) or for both (bn1, through a Split); the sum adds 16-bit
// operands and writes 16 bits for the average pooling, which sums them in floats. Those 16 bits are the roundings the
// float run makes of the same values (a BatchNorm, a sum and an average pooling each round a float input), and
// backward reads the normalized values kept and the sum's output's signs: 12 iterations give every parameter and
// running statistic of the float blobs' training, bit for bit, in both half types.
void ExpectFusedBatchNormsWriteSixteenBits(const std::function<std::shared_ptr<Context>()>& make_context) {
  for (Precision precision : {Precision::kFloat16, Precision::kBfloat16}) {
    SCOPED_TRACE(PrecisionName(precision));
    auto [halves, floats] = MakeHalfAndFloatSolvers(ResidualUnitsSolver(precision), precision, make_context, true);
    const Net& net = *halves->net();
    ASSERT_EQ(net.rewrites().size(), 5u) << ::testing::PrintToString(net.rewrites());
    EXPECT_CONTAINS(net.rewrites()[4], "relu_sum");
    for (int k = 0; k < 4; ++k) {
      const std::string n = std::to_string(k);
      EXPECT_CONTAINS(net.rewrites()[k], "bn" + n + " (BatchNorm): runs sc" + n + " (Scale)");
      EXPECT_EQ(net.rewrites()[k].find("relu" + n) != std::string::npos, k < 2) << net.rewrites()[k];
    }
    for (const std::string name :
         {"conv0", "conv0@bn0", "conv1", "conv1@bn1", "conv2", "conv2@bn2", "conv3", "conv3@bn3", "sum"}) {
      EXPECT_EQ(ElementTypeName(net.blob_by_name(name)->data_type()), ElementTypeName(HalfElementType(precision)))
          << name;
    }
    const std::vector<std::string>& float_blobs = floats->net()->blob_names();
    EXPECT_EQ(std::find(float_blobs.begin(), float_blobs.end(), "conv0@bn0"), float_blobs.end());
    ASSERT_EQ(net.layers().size(), floats->net()->layers().size());
    for (size_t l = 0; l < net.layers().size(); ++l) {
      const auto& params = net.layers()[l]->params();
      const auto& float_params = floats->net()->layers()[l]->params();
      ASSERT_EQ(params.size(), float_params.size());
      for (size_t i = 0; i < params.size(); ++i) {
        const std::vector<float> got = test::DataOf(*params[i]);
        EXPECT_TRUE(got == test::DataOf(*float_params[i]))
            << net.layer_names()[l] << " blob " << i << " differs from the float32 blobs' training";
        for (float v : got) ASSERT_TRUE(std::isfinite(v)) << net.layer_names()[l] << " blob " << i;
      }
    }
  }
}

TEST(HalfPrecisionTest, RehearsedFusedBatchNormsWriteSixteenBitsForTheConvolutionsAfterThem) {
  ExpectFusedBatchNormsWriteSixteenBits([] {
    auto context = RehearsalContext();
    context->ForceEngines("native");
    return context;
  });
}

TEST(HalfPrecisionTest, SixteenBitBlobsBetweenRehearsedHalfLayersChangeNoBitOfTheTraining) {
  ExpectSixteenBitBlobsChangeNoBit([] {
    auto context = RehearsalContext();
    context->ForceEngines("native");
    return context;
  });
}

// Forward only, where the fold fuses each ReLU into the layer before it and a residual sum into the convolution whose
// output it adds to the other's: conv1 (+ReLU) -> conv2 (1x1, +leaky ReLU) -> {conv3, short (1x1)}, summed (+ReLU)
// -> ip (+ReLU) -> out. The blobs between them lie in 16 bits but the summand (added in floats) and the sum; the
// output is the float blobs' bit for bit, in both types.
TEST(HalfPrecisionTest, AFoldedInferenceNetPassesSixteenBitsBetweenItsRehearsedHalfLayers) {
  const std::string text = R"(
    name: 'half_inference'
    layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 dim: 10 dim: 10 } } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
            convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }
    layer { name: 'conv2' type: 'Convolution' bottom: 'conv1' top: 'conv2' convolution_param { num_output: 6 kernel_size: 1 } }
    layer { name: 'relu2' type: 'ReLU' bottom: 'conv2' top: 'conv2' relu_param { negative_slope: 0.125 } }
    layer { name: 'conv3' type: 'Convolution' bottom: 'conv2' top: 'conv3'
            convolution_param { num_output: 5 kernel_size: 3 pad: 1 stride: 2 } }
    layer { name: 'short' type: 'Convolution' bottom: 'conv2' top: 'short'
            convolution_param { num_output: 5 kernel_size: 1 stride: 2 } }
    layer { name: 'sum' type: 'Eltwise' bottom: 'conv3' bottom: 'short' top: 'sum' }
    layer { name: 'relu4' type: 'ReLU' bottom: 'sum' top: 'sum' }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'sum' top: 'ip' inner_product_param { num_output: 7 } }
    layer { name: 'relu3' type: 'ReLU' bottom: 'ip' top: 'ip' }
    layer { name: 'out' type: 'InnerProduct' bottom: 'ip' top: 'out' inner_product_param { num_output: 4 } }
  )";
  for (Precision precision : {Precision::kFloat16, Precision::kBfloat16}) {
    SCOPED_TRACE(PrecisionName(precision));
    const auto run = [&](std::unique_ptr<Net>* made) {
      NetParameter param = test::ParseNet(text);
      param.set_fold(true);
      auto context = RehearsalContext();
      context->set_precision(precision);
      context->ForceEngines("native");
      auto net = std::make_unique<Net>(param, context);
      uint64_t seed = 3;
      for (const auto& layer : net->layers())
        for (const auto& blob : layer->params()) test::FillUniform(blob.get(), -0.6f, 0.6f, seed++);
      test::FillGaussian(net->input_blobs()[0], 0.f, 1.f, 99);
      net->PlanMemory(false);
      net->RunAfterWeightsPasses();
      net->Forward();
      const std::vector<float> out = test::DataOf(*net->blob_by_name("out"));
      *made = std::move(net);
      return out;
    };
    std::unique_ptr<Net> halves, floats;
    const std::vector<float> out = run(&halves);
    std::vector<float> expected;
    {
      const test::ScopedEnvironment float_blobs("CREMA_ELEMENT_TYPES", "float");
      expected = run(&floats);
    }
    for (const std::string name : {"conv1", "conv2", "ip"}) {
      EXPECT_EQ(ElementTypeName(halves->blob_by_name(name)->data_type()), ElementTypeName(HalfElementType(precision)))
          << name;
      EXPECT_TRUE(floats->blob_by_name(name)->quantization().floats()) << name;
    }
    int fused_sums = 0;
    for (const PlanStep& step : halves->plan()) {  // the ReLUs and the sum fused into the layers before them
      const Layer& layer = *halves->layers()[step.layer];
      EXPECT_STRNE(layer.type(), "ReLU") << halves->layer_names()[step.layer];
      EXPECT_STRNE(layer.type(), "Eltwise") << halves->layer_names()[step.layer];
      if (!layer.fused_sum()) continue;
      ++fused_sums;
      // Its summand (the last bottom) and its output in floats; its input may lie in 16 bits.
      for (int id : {step.bottoms.back(), step.tops[0]})
        EXPECT_TRUE(halves->blobs()[id]->quantization().floats()) << halves->blob_names()[id];
    }
    EXPECT_EQ(fused_sums, 1);
    ASSERT_EQ(out.size(), expected.size());
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(FloatBits(out[i]), FloatBits(expected[i])) << i;
  }
}

// GoogLeNet's and ResNet-50's deploy nets, folded (ReLUs, BatchNorms and Scales, the residual sums into the
// convolutions), on one random image through their rehearsed half-precision GPU code: the blobs the plan keeps in 16
// bits (GoogLeNet's inception modules with their Concats and max poolings, the last one's output read by the average
// pooling in 16 bits; ResNet's conv1 through pool1 and each bottleneck's inner two) give the float blobs' output bit
// for bit. ResNet's sums, whose summands are added in floats, found the summand's rule (Layer::HalfOperands).
TEST(HalfPrecisionTest, FoldedGoogLeNetAndResNet50PassSixteenBitsAndGiveTheFloatBlobsOutput) {
  if (test::kAddressSanitizer) GTEST_SKIP() << "two ImageNet nets on the host take long under AddressSanitizer";
  const struct {
    const char* file;
    int sixteen;  // blobs in 16 bits
  } nets[] = {{"googlenet_deploy.prototxt", 74}, {"resnet50_deploy.prototxt", 34}};
  for (const auto& example : nets) {
    SCOPED_TRACE(example.file);
    const auto run = [&](std::unique_ptr<Net>* made) {
      NetParameter param;
      ReadProtoFromTextFile(test::SourceDir() + "/examples/imagenet/" + example.file, &param);
      param.mutable_layer(0)->mutable_input_param()->mutable_shape(0)->set_dim(0, 1);
      param.set_fold(true);
      auto context = RehearsalContext();
      context->set_precision(Precision::kFloat16);
      context->ForceEngines("native");
      auto net = std::make_unique<Net>(param, context);
      uint64_t seed = 3;
      for (const auto& layer : net->layers()) {
        if (std::string(layer->type()) == "BatchNorm") {  // mean, variance, their factor
          test::FillUniform(layer->params()[0].get(), -0.1f, 0.1f, seed++);
          test::FillUniform(layer->params()[1].get(), 0.5f, 1.f, seed++);
          layer->params()[2]->set_data(1.f);
          continue;
        }
        for (const auto& blob : layer->params()) test::FillGaussian(blob.get(), 0.f, 0.05f, seed++);
      }
      test::FillGaussian(net->input_blobs()[0], 0.f, 1.f, 99);
      net->PlanMemory(false);
      net->RunAfterWeightsPasses();
      net->Forward();
      *made = std::move(net);
      return test::DataOf(*(*made)->blobs()[(*made)->output_blob_indices()[0]]);
    };
    std::unique_ptr<Net> halves, floats;
    const std::vector<float> out = run(&halves);
    std::vector<float> expected;
    {
      const test::ScopedEnvironment float_blobs("CREMA_ELEMENT_TYPES", "float");
      expected = run(&floats);
    }
    int sixteen = 0;
    for (const auto& blob : halves->blobs()) sixteen += IsHalfType(blob->data_type()) ? 1 : 0;
    EXPECT_EQ(sixteen, example.sixteen);
    ASSERT_EQ(out.size(), expected.size());
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(FloatBits(out[i]), FloatBits(expected[i])) << i;
  }
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
      // From conv1's output to ip2's input every blob lies in 16 bits: through both poolings, and ip1's ReLU fused.
      for (const std::string name : {"conv1", "pool1", "conv2", "pool2", "ip1"}) {
        const ElementType expected = precision == Precision::kFloat32 ? ElementType::kFloat32 : ElementType::kFloat16;
        EXPECT_EQ(ElementTypeName(trainer.net()->blob_by_name(name)->data_type()), ElementTypeName(expected)) << name;
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

TEST(GpuHalfPrecisionTest, AFusedReLUsBackwardReadsItsSixteenBitOutputsSigns) {
  CREMA_SKIP_WITHOUT_GPU();
  ExpectFusedReLUBackwardReadsSixteenBitSigns(*GpuContext());
}

// On the GPU: the cuDNN convolutions and the InnerProduct read and write the 16-bit blobs themselves (cuDNN's tensors
// are the blobs' memory), and the training is the float32 blobs' bit for bit (cuDNN's algorithms by its heuristics,
// so that both runs take the same ones).
TEST(GpuHalfPrecisionTest, SixteenBitBlobsBetweenHalfLayersChangeNoBitOfTheTraining) {
  CREMA_SKIP_WITHOUT_HALF_GPU(Precision::kBfloat16);
  ExpectSixteenBitBlobsChangeNoBit([] {
    auto context = GpuContext();
    context->set_cudnn_algorithms(Context::CudnnAlgorithms::kHeuristic);
    return context;
  });
}

// On the GPU: cuDNN's BatchNorm with its Scale and ReLU fused writes the 16-bit tops, cuDNN's convolutions read them,
// and cuDNN's average pooling runs the native rule over the sum's 16 bits.
TEST(GpuHalfPrecisionTest, FusedBatchNormsWriteSixteenBitsForTheConvolutionsAfterThem) {
  CREMA_SKIP_WITHOUT_HALF_GPU(Precision::kBfloat16);
  ExpectFusedBatchNormsWriteSixteenBits([] {
    auto context = GpuContext();
    context->set_cudnn_algorithms(Context::CudnnAlgorithms::kHeuristic);
    return context;
  });
}

// On the GPU: cuDNN's MAX pooling runs the native rules over 16-bit blobs, the Concat copies them.
TEST(GpuHalfPrecisionTest, SixteenBitValuesPassThroughMaxPoolingsAndConcats) {
  CREMA_SKIP_WITHOUT_HALF_GPU(Precision::kBfloat16);
  ExpectSixteenBitsPassThroughPoolingAndConcat([] {
    auto context = GpuContext();
    context->set_cudnn_algorithms(Context::CudnnAlgorithms::kHeuristic);
    return context;
  });
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
