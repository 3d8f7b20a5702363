// Half-precision products (Precision; oneDNN's engines, onednn::EnginePrecision). In bfloat16 a Convolution's and an
// InnerProduct's forward is the float32 product of the input and weights rounded to bf16; their gradients are gradient
// checked against central differences of the float32 layer, within the bound bf16's rounding of the two factors of
// every product allows (derived from the type's unit roundoff, not tuned); a bf16 training run resumes bit for bit;
// float16 on the CPU, and a layer's own FLOAT32 in a bf16 net, compute in float32; bf16 blobs between bf16 steps
// give the bits of float32 blobs, forward only and in training.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#ifdef CREMA_USE_ONEDNN

#include "core/bf16_blocked_copy.hpp"
#include "core/bf16_vectors.hpp"
#include "core/derived_copy.hpp"
#include "core/element_type.hpp"
#include "core/random.hpp"
#include "core/threads.hpp"
#include "core/vector_clones.hpp"
#include "io/proto_io.hpp"
#include "layers/common/eltwise.hpp"
#include "layers/layer_registry.hpp"
#include "layers/normalization/batch_norm_affine.hpp"
#include "layers/normalization/onednn_batch_norm.hpp"
#include "layers/normalization/onednn_lrn.hpp"
#include "layers/onednn_util.hpp"
#include "layers/vision/onednn_convolution.hpp"
#include "layers/vision/onednn_pooling.hpp"
#include "layers/vision/pooling_lanes.hpp"
#include "net/net.hpp"
#include "precision_cases.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// bfloat16 keeps 8 significant bits: rounding to nearest errs by at most 2^-8 of the value.
constexpr double kBfloat16UnitRoundoff = 1.0 / 256;

// `x` rounded to the nearest bfloat16, ties to even, as oneDNN's reorders round (finite values).
float RoundToBfloat16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}

using Twin = test::SingleLayer;

// `text` made with the onednn engine in `precision` for a bottom of `shape` (filled from `seed`), set up, with the
// parameters of `like` where given.
std::unique_ptr<Twin> MakeIn(const std::string& text, ::caffe::Precision precision, const std::vector<int>& shape,
                             const Twin* like = nullptr) {
  LayerParameter param = test::ParseLayer(text);
  param.set_precision(precision);
  return test::MakeSingleLayer(param, shape, std::make_shared<Context>(), "onednn", like);
}

// Skips the test where this CPU computes no bf16 (a macro: GTEST_SKIP returns from the function it is written in, so
// in a helper the test would go on).
#define CREMA_SKIP_WITHOUT_BFLOAT16() \
  if (!onednn::HasBfloat16Kernels())  \
  GTEST_SKIP() << "this CPU has no bf16 instructions (AVX512_BF16 or AMX): bf16 layers compute in float32 here"

// The layout of the weights of oneDNN's bf16 inner product over `outputs` x `inputs` weights (`forward`: its
// primitive), as a pair-blocked one (false where it is not).
bool BlockedLayoutOfInnerProduct(int outputs, int inputs, dnnl::inner_product_forward::primitive_desc* forward,
                                 PairBlockedLayout* layout) {
  using dnnl::memory;
  const memory::desc user({outputs, inputs}, memory::data_type::f32, memory::format_tag::oi);
  *forward = dnnl::inner_product_forward::primitive_desc(
      dnnl::inner_product_forward::desc(
          dnnl::prop_kind::forward_training,
          memory::desc({10, inputs}, memory::data_type::bf16, memory::format_tag::nc),
          memory::desc({outputs, inputs}, memory::data_type::bf16, memory::format_tag::any),
          memory::desc({10, outputs}, memory::data_type::f32, memory::format_tag::nc)),
      onednn::CpuEngine());
  return onednn::PairBlockedLayoutOf(forward->weights_desc(), user, layout);
}

// Whether oneDNN's bf16 inner product wants its weights in a layout crema writes (on the CPUs seen so far it does:
// AVX512_BF16's brgemm kernels; elsewhere its bf16 weights are oneDNN's reorders, as before); `kernels` names its
// kernels.
bool CremaWritesBfloat16Weights(std::string* kernels) {
  dnnl::inner_product_forward::primitive_desc forward;
  PairBlockedLayout layout;
  const bool writes = BlockedLayoutOfInnerProduct(64, 32, &forward, &layout);
  *kernels = forward.impl_info_str();
  return writes;
}

// Skips the test where it is not so.
#define CREMA_SKIP_WITHOUT_CREMAS_BF16_WEIGHTS()                                                              \
  CREMA_SKIP_WITHOUT_BFLOAT16();                                                                              \
  if (std::string kernels; !CremaWritesBfloat16Weights(&kernels))                                             \
  GTEST_SKIP() << "oneDNN's bf16 inner product here (" << kernels << ") wants its weights in a layout crema " \
               << "does not write"

using test::kPrecisionConvolution;
using Case = test::PrecisionCase;
// Every layer of precision_cases.hpp.
const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> all = test::PrecisionConvolutionCases();
    for (const Case& c : test::PrecisionInnerProductCases()) all.push_back(c);
    return all;
  }();
  return cases;
}

// A bf16 layer against its float32 twin (test::CheckHalfPrecisionLayer): forward within the float32 sums of the
// products of the input and weights rounded to bf16 (exact in float32: 1e-6 of the products' magnitudes for the sums'
// order), gradients against central differences of the twin's objective within (2u + u^2) of the products' magnitudes,
// u bf16's unit roundoff (each gradient a sum of products of two rounded factors: x and dy for the weights, w and dy
// for the input, dy alone for the bias), the numeric estimate's own error as the float32 checks allow.
TEST(PrecisionTest, Bfloat16ForwardAndGradientsAreWithinTheTypesRounding) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.text);
    test::CheckHalfPrecisionLayer([&](const Twin* like) { return MakeIn(c.text, ::caffe::FLOAT32, c.shape, like); },
                                  [&](const Twin& like) {
                                    auto half = MakeIn(c.text, ::caffe::BFLOAT16, c.shape, &like);
                                    EXPECT_EQ(half->layer->engine_note().rfind("bfloat16", 0), 0u)
                                        << half->layer->engine_note();
                                    return half;
                                  },
                                  Precision::kBfloat16, 1e-6, false);
  }
}

// Random convolutions and deconvolutions (test::RandomConvolutionCases) in bf16 on oneDNN's engine against an engine of
// crema's own in float32 given the operands rounded to bf16 (the reference engine's direct loops; for deconvolutions
// the native engine's im2col and GEMM): the output, the input gradient and the parameters' gradients each within 2e-5
// of their products' magnitudes, which the same engine computes over the operands' absolute values (float32 sums in
// another order). The faults of oneDNN's 1x1 kernels (KernelFault) showed as errors of the order of the values.
TEST(PrecisionTest, Bfloat16RandomConvolutionsAreTheProductsOfTheRoundedOperands) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  int compared = 0;
  for (const bool transposed : {false, true}) {
    const std::string engine = transposed ? "native" : "reference";
    for (const Case& c : test::RandomConvolutionCases(transposed, 300, transposed ? 37 : 36)) {
      SCOPED_TRACE(c.text + " over " + ShapeString(c.shape));
      const LayerParameter param = test::ParseLayer(c.text);
      const std::vector<std::vector<int>> shapes = {c.shape};
      if (!LayerRegistry::Global().Refusal("onednn", EngineQuery{param, shapes, Device::kCPU}).empty()) continue;
      auto half = MakeIn(c.text, ::caffe::BFLOAT16, c.shape);
      ASSERT_EQ(half->layer->engine_note().rfind("bfloat16", 0), 0u) << half->layer->engine_note();
      auto exact = test::MakeSingleLayer(param, c.shape, std::make_shared<Context>(), engine, half.get());
      auto magnitude = test::MakeSingleLayer(param, c.shape, std::make_shared<Context>(), engine, half.get());
      // The operands as the bf16 layer reads them: the input, the weights and the output gradient rounded (the bias
      // and the sums float32).
      const auto set = [](const Blob& from, Blob* to, bool round, bool absolute, bool diff) {
        const float* values = diff ? from.cpu_diff() : from.cpu_data();
        float* target = diff ? to->mutable_cpu_diff() : to->mutable_cpu_data();
        for (int i = 0; i < from.count(); ++i) {
          const float v = round ? RoundToBfloat16(values[i]) : values[i];
          target[i] = absolute ? std::fabs(v) : v;
        }
      };
      for (const bool absolute : {false, true}) {
        test::SingleLayer& twin = absolute ? *magnitude : *exact;
        set(half->bottom, &twin.bottom, true, absolute, false);
        for (size_t i = 0; i < half->layer->params().size(); ++i)
          set(*half->layer->params()[i], twin.layer->params()[i].get(), i == 0, absolute, false);
      }
      for (test::SingleLayer* layer : {half.get(), exact.get(), magnitude.get()})
        layer->layer->Forward(layer->bottoms(), layer->tops());
      Blob gradient(half->top.shape());
      test::FillGaussian(&gradient, 0.f, 1.f, 29);
      std::copy(gradient.cpu_data(), gradient.cpu_data() + gradient.count(), half->top.mutable_cpu_diff());
      set(half->top, &exact->top, true, false, true);
      set(half->top, &magnitude->top, true, true, true);
      for (test::SingleLayer* layer : {half.get(), exact.get(), magnitude.get()}) {
        for (const auto& blob : layer->layer->params()) blob->set_diff(0.f);
        layer->layer->Backward(layer->tops(), {true}, layer->bottoms());
      }
      const auto expect_within = [](const std::vector<float>& got, const std::vector<float>& want,
                                    const std::vector<float>& magnitudes, const std::string& what) {
        ASSERT_EQ(got.size(), want.size()) << what;
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 2e-5 * magnitudes[i] + 1e-6) << what << " " << i;
      };
      expect_within(test::DataOf(half->top), test::DataOf(exact->top), test::DataOf(magnitude->top), "output");
      expect_within(test::DiffOf(half->bottom), test::DiffOf(exact->bottom), test::DiffOf(magnitude->bottom),
                    "input gradient");
      for (size_t i = 0; i < half->layer->params().size(); ++i)
        expect_within(test::DiffOf(*half->layer->params()[i]), test::DiffOf(*exact->layer->params()[i]),
                      test::DiffOf(*magnitude->layer->params()[i]), "parameter gradient " + std::to_string(i));
      ++compared;
    }
  }
  EXPECT_GE(compared, 500);  // oneDNN's engine takes nearly every case
}

TEST(PrecisionTest, Float16OnTheCpuAndALayersOwnFloat32ComputeInFloat32) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.text);
    auto single = MakeIn(c.text, ::caffe::FLOAT32, c.shape);
    auto fp16 = MakeIn(c.text, ::caffe::FLOAT16, c.shape, single.get());
    EXPECT_EQ(fp16->layer->computes_in(), Precision::kFloat32);
    EXPECT_EQ(fp16->layer->requested_precision(), Precision::kFloat16);
    single->layer->Forward(single->bottoms(), single->tops());
    fp16->layer->Forward(fp16->bottoms(), fp16->tops());
    EXPECT_EQ(test::DataOf(fp16->top), test::DataOf(single->top));
  }
  // A bf16 context with the layer's own FLOAT32 (the per-layer override wins).
  LayerParameter param = test::ParseLayer(kPrecisionConvolution);
  param.set_precision(::caffe::FLOAT32);
  auto context = std::make_shared<Context>();
  context->set_precision(Precision::kBfloat16);
  context->force_engine("Convolution", "onednn");
  Blob bottom({1, 16, 5, 5}), top;
  auto layer = LayerRegistry::Global().Create(param, {bottom.shape()}, context);
  layer->SetUp({&bottom}, {&top});
  EXPECT_EQ(layer->requested_precision(), Precision::kFloat32);
  EXPECT_EQ(layer->computes_in(), Precision::kFloat32);
  param.clear_precision();
  auto inherits = LayerRegistry::Global().Create(param, {bottom.shape()}, context);
  inherits->SetUp({&bottom}, {&top});
  EXPECT_EQ(inherits->requested_precision(), Precision::kBfloat16);
  EXPECT_EQ(inherits->computes_in(), onednn::HasBfloat16Kernels() ? Precision::kBfloat16 : Precision::kFloat32);
}

// An InnerProduct over large weights (from 2^18 values) at a small batch (under 32 rows) computes in float32 though set
// to bf16 (its float32 products are faster there), and in bf16 from 32 rows on; small weights in bf16 at any batch.
// A fully connected layer in bf16 over few rows: its weights' gradient in float32 (under 32 rows), and over large
// weights bf16 at all only where the solver's update writes the weights' bf16 copy (not for transposed weights).
TEST(PrecisionTest, AFewRowsThroughLargeWeightsComputeInBfloat16WhereTheUpdateWritesTheirCopy) {
  CREMA_SKIP_WITHOUT_CREMAS_BF16_WEIGHTS();
  const std::string large = "name: 'fc' type: 'InnerProduct' inner_product_param { num_output: 512 }";
  const std::string transposed =
      "name: 'fc' type: 'InnerProduct' inner_product_param { num_output: 512 transpose: true }";
  struct Expected {
    std::string text;
    int rows, inputs;
    Precision precision;
    std::string note;
  };
  const std::string written = ", its weights' bf16 copy written by the update";
  for (const Expected& e :
       {Expected{large, 31, 512, Precision::kBfloat16, "bfloat16, the weights' gradient in float32" + written},
        Expected{large, 32, 512, Precision::kBfloat16, "bfloat16" + written},
        Expected{transposed, 31, 512, Precision::kFloat32, ""},
        Expected{transposed, 4, 511, Precision::kBfloat16, "bfloat16, the weights' gradient in float32"},
        Expected{transposed, 32, 512, Precision::kBfloat16, "bfloat16"}}) {
    SCOPED_TRACE(e.text + ": " + std::to_string(e.rows) + " rows of " + std::to_string(e.inputs));
    auto twin = MakeIn(e.text, ::caffe::BFLOAT16, {e.rows, e.inputs});
    EXPECT_EQ(twin->layer->computes_in(), e.precision);
    EXPECT_EQ(twin->layer->engine_note(), e.note);
    twin->layer->Forward(twin->bottoms(), twin->tops());  // and runs
  }
}

TEST(PrecisionTest, PrecisionWordsAreParsedAndBadOnesNamed) {
  EXPECT_EQ(ParsePrecision("bf16", "--precision"), Precision::kBfloat16);
  EXPECT_EQ(ParsePrecision("fp16", "--precision"), Precision::kFloat16);
  EXPECT_EQ(ParsePrecision("fp32", "--precision"), Precision::kFloat32);
  test::ExpectErrorContaining([] { ParsePrecision("half", "--precision"); }, {"--precision", "half", "bf16"});
  SolverParameter solver;
  EXPECT_EQ(Solver::ContextFor(solver)->precision(), Precision::kFloat32);
  solver.set_solver_mode(SolverParameter::CPU);
  solver.set_precision(::caffe::BFLOAT16);
  EXPECT_EQ(Solver::ContextFor(solver)->precision(), Precision::kBfloat16);
}

// A small convolutional net trained in bf16 from an LMDB of random images (its data cursor and random streams
// restored, as every resume is): 20 iterations, a snapshot, 20 more, give the bits of 40 straight; with every blob and
// gradient in floats, the same bits; and the bf16 run is not the float32 one.
SolverParameter Bfloat16Solver(const std::string& source, const std::string& prefix, int max_iter,
                               ::caffe::Precision precision) {
  SolverParameter param = test::ResumeSolver(R"(
    name: 'bf16'
    layer { name: 'data' type: 'Data' top: 'data' top: 'label'
            data_param { source: ')" + source + R"(' batch_size: 16 backend: LMDB }
            transform_param { scale: 0.00390625 mirror: true } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
            convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }
    layer { name: 'conv1b' type: 'Convolution' bottom: 'conv1' top: 'conv1b'
            convolution_param { num_output: 16 kernel_size: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'relu1b' type: 'ReLU' bottom: 'conv1b' top: 'conv1b' }
    layer { name: 'norm1' type: 'LRN' bottom: 'conv1b' top: 'norm1' lrn_param { local_size: 3 alpha: 0.1 beta: 0.75 } }
    layer { name: 'conv2' type: 'Convolution' bottom: 'norm1' top: 'conv2'
            convolution_param { num_output: 16 kernel_size: 3 stride: 2 weight_filler { type: 'xavier' } } }
    layer { name: 'relu2' type: 'ReLU' bottom: 'conv2' top: 'conv2' }
    layer { name: 'ip1' type: 'InnerProduct' bottom: 'conv2' top: 'ip1'
            inner_product_param { num_output: 24 weight_filler { type: 'xavier' } } }
    layer { name: 'relu3' type: 'ReLU' bottom: 'ip1' top: 'ip1' }
    layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'
            inner_product_param { num_output: 4 weight_filler { type: 'xavier' } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' bottom: 'label' top: 'loss' }
  )",
                                             prefix, max_iter, 20);
  param.set_precision(precision);
  return param;
}

TEST(PrecisionTest, Bfloat16TrainingResumesBitForBit) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  test::TempDir dir;
  const std::string source = dir.file("train_lmdb");
  test::WriteRandomDatums(source, 70, 8, 8, 4, 11);

  auto straight_solver = CreateSolver(Bfloat16Solver(source, dir.file("straight"), 40, ::caffe::BFLOAT16));
  for (const char* name : {"conv1", "conv1b", "conv2", "ip1", "ip2"})
    EXPECT_EQ(straight_solver->net()->layer_by_name(name)->computes_in(), Precision::kBfloat16) << name;
  // conv1's output (its ReLU fused into it) passes to conv1b as bf16 in training too (the values conv1b reads in
  // forward and for its weights' gradient, and the ReLU's backward reads the signs of), and so does the LRN's output
  // to conv2; conv1b's, which the LRN reads, stays float.
  for (const char* name : {"conv1", "norm1"})
    EXPECT_EQ(ElementTypeName(straight_solver->net()->blob_by_name(name)->data_type()),
              ElementTypeName(ElementType::kBfloat16))
        << name;
  EXPECT_TRUE(straight_solver->net()->blob_by_name("conv1b")->quantization().floats());
  // conv1's output gradient, which conv1b's input gradient writes and conv1 (through its fused ReLU) reads, is bf16;
  // norm1's, which the LRN reads, float.
  EXPECT_EQ(ElementTypeName(straight_solver->net()->blob_by_name("conv1")->diff_type()),
            ElementTypeName(ElementType::kBfloat16));
  EXPECT_EQ(straight_solver->net()->blob_by_name("norm1")->diff_type(), ElementType::kFloat32);
  straight_solver->Solve();
  const std::string straight = test::FileBytes(dir.file("straight_iter_40.caffemodel"));
  ASSERT_FALSE(straight.empty());
  {  // every blob in float32: the same bytes (the bf16 blob holds what conv2 would have rounded)
    const test::ScopedEnvironment floats("CREMA_ELEMENT_TYPES", "float");
    auto float_blobs = CreateSolver(Bfloat16Solver(source, dir.file("float_blobs"), 40, ::caffe::BFLOAT16));
    EXPECT_TRUE(float_blobs->net()->blob_by_name("conv1")->quantization().floats());
    float_blobs->Solve();
  }
  EXPECT_TRUE(test::FileBytes(dir.file("float_blobs_iter_40.caffemodel")) == straight)
      << "bf16 blobs between the bf16 convolutions changed the training";

  CreateSolver(Bfloat16Solver(source, dir.file("split"), 20, ::caffe::BFLOAT16))->Solve();
  auto resumed = CreateSolver(Bfloat16Solver(source, dir.file("split"), 40, ::caffe::BFLOAT16));
  resumed->Solve(dir.file("split_iter_20.solverstate"));
  EXPECT_TRUE(test::FileBytes(dir.file("split_iter_40.caffemodel")) == straight)
      << "the resumed bf16 run's weights differ from the uninterrupted run's";
  EXPECT_NE(test::FileBytes(dir.file("split_iter_20.caffemodel")), straight);

  CreateSolver(Bfloat16Solver(source, dir.file("float"), 40, ::caffe::FLOAT32))->Solve();
  EXPECT_NE(test::FileBytes(dir.file("float_iter_40.caffemodel")), straight)
      << "the bf16 run gave the float32 run's weights";
}

// crema's copy in `layout` of `rows` x `length` random weights (seeded by `seed`; `user`: their plain desc, `wanted`:
// the primitive's) against oneDNN's reorder into `wanted`, byte for byte, padding included; written a block of rows at
// a time as whole; and for the values whose rounding is a rule of its own (ties, denormals, infinities, NaN), among the
// first 32, the rounding ToBfloat16 gives, at the layout's place for (row, value) (transposed: (value, row)).
void ExpectCremasCopyIsOneDnnsReorder(const PairBlockedLayout& layout, const dnnl::memory::desc& user,
                                      const dnnl::memory::desc& wanted, int rows, int length, uint64_t seed) {
  using dnnl::memory;
  Blob weights({rows, length});
  test::FillGaussian(&weights, 0.f, 1.f, seed);
  float* w = weights.mutable_cpu_data();
  // Ties (the bf16 halves' last bit even and odd), a denormal, infinities and a NaN.
  const uint32_t specials[] = {0x3f808000u, 0x3f818000u, 0x00000123u, 0x80400000u,
                               0x7f800000u, 0xff800000u, 0x7fc12345u, 0x7f812345u};
  for (size_t k = 0; k < std::size(specials); ++k) std::memcpy(&w[k], &specials[k], sizeof(float));

  Bfloat16BlockedCopy copy(layout);
  ASSERT_EQ(copy.row_length(), length);
  for (int64_t begin = 0; begin < rows; begin += copy.rows_together())  // a block of rows at a time
    copy.WriteRows(weights.cpu_data(), begin, std::min<int64_t>(rows, begin + copy.rows_together()));
  Bfloat16BlockedCopy whole(layout);
  whole.WriteRows(weights.cpu_data(), 0, rows);
  ASSERT_EQ(std::memcmp(copy.data(), whole.data(), copy.bytes()), 0);
  for (size_t k = 0; k < std::size(specials); ++k) {
    const int row = static_cast<int>(k) / length, value = static_cast<int>(k) % length;
    EXPECT_EQ(copy.data()[layout.transposed ? layout.Offset(value, row) : layout.Offset(row, value)], ToBfloat16(w[k]))
        << "value " << k;
  }

  for (size_t k = 0; k < std::size(specials); ++k) w[k] = 0.5f;  // oneDNN's reorder for the rest
  copy.WriteRows(weights.cpu_data(), 0, rows);
  memory source(user, onednn::CpuEngine(), weights.mutable_cpu_data());
  memory reordered(wanted, onednn::CpuEngine());
  dnnl::stream stream(onednn::CpuEngine());
  dnnl::reorder(source, reordered).execute(stream, source, reordered);
  stream.wait();
  ASSERT_EQ(wanted.get_size(), copy.bytes());
  EXPECT_EQ(std::memcmp(reordered.get_data_handle(), copy.data(), copy.bytes()), 0);
}

// crema's bf16 copy of a fully connected layer's weights in oneDNN's blocked layout (core/bf16_blocked_copy.hpp), for
// the layouts oneDNN's bf16 inner products choose: the bytes of oneDNN's own reorder for random weights (outputs and
// inputs that fill no block, and ones that fill them), whichever stretches of rows write it; and for the values whose
// rounding is a rule of its own (ties, denormals, infinities, NaN) the rounding ToBfloat16 gives.
TEST(PrecisionTest, Bfloat16BlockedWeightsAreOneDnnsReorder) {
  CREMA_SKIP_WITHOUT_CREMAS_BF16_WEIGHTS();
  using dnnl::memory;
  for (const auto& [outputs, inputs] : std::vector<std::pair<int, int>>{{64, 32}, {100, 75}, {130, 200}, {17, 9}}) {
    SCOPED_TRACE(std::to_string(outputs) + " outputs of " + std::to_string(inputs) + " inputs");
    const memory::desc user({outputs, inputs}, memory::data_type::f32, memory::format_tag::oi);
    dnnl::inner_product_forward::primitive_desc forward;
    PairBlockedLayout layout;
    ASSERT_TRUE(BlockedLayoutOfInnerProduct(outputs, inputs, &forward, &layout))
        << "oneDNN chose a bf16 layout crema does not write for these shapes";
    ExpectCremasCopyIsOneDnnsReorder(layout, user, forward.weights_desc(), outputs, inputs, 31);
  }
}

// A 1x1 convolution's weights as oneDNN's bf16 input-gradient kernel reads them (blocks of inputs by pairs of
// outputs: "BAcd8a16b2a" on a Zen 5) are a transposed pair-blocked copy (PairBlockedLayoutOf), which crema writes with
// the bits of oneDNN's reorder into that layout, padding included: written a block of rows at a time or whole, an odd
// last output, inputs past the vectors, and the rounding's special values.
TEST(PrecisionTest, Bfloat16TransposedBlockedWeightsAreOneDnnsReorder) {
  CREMA_SKIP_WITHOUT_CREMAS_BF16_WEIGHTS();
  using dnnl::memory;
  const auto bf16 = memory::data_type::bf16;
  for (const auto& [outputs, inputs] : std::vector<std::pair<int, int>>{{20, 48}, {64, 32}, {33, 17}, {256, 80}}) {
    SCOPED_TRACE(std::to_string(outputs) + " outputs of " + std::to_string(inputs) + " inputs");
    const memory::desc src({2, inputs, 3, 3}, bf16, memory::format_tag::nChw16c);
    const memory::desc dst({2, outputs, 3, 3}, bf16, memory::format_tag::nChw16c);
    const memory::desc any_weights({outputs, inputs, 1, 1}, bf16, memory::format_tag::any);
    const dnnl::convolution_forward::primitive_desc forward(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src,
                                        any_weights, dst, {1, 1}, {0, 0}, {0, 0}),
        onednn::CpuEngine());
    const dnnl::convolution_backward_data::primitive_desc backward(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src, any_weights, dst, {1, 1},
                                              {0, 0}, {0, 0}),
        onednn::CpuEngine(), forward);
    const memory::desc wanted = backward.weights_desc();
    const memory::desc user({outputs, inputs, 1, 1}, memory::data_type::f32, memory::format_tag::oihw);
    PairBlockedLayout layout;
    if (!onednn::PairBlockedLayoutOf(wanted.reshape({outputs, inputs}), user.reshape({outputs, inputs}), &layout) ||
        !layout.transposed)
      GTEST_SKIP() << "oneDNN's bf16 1x1 input gradient here (" << backward.impl_info_str()
                   << ") wants its weights in a layout crema does not write";
    ASSERT_EQ(layout.outputs, inputs);  // the copy's rows are the convolution's outputs
    ASSERT_EQ(layout.inputs, outputs);
    ExpectCremasCopyIsOneDnnsReorder(layout, user, wanted, outputs, inputs, 37);
  }
}

// crema's input gradient over the blocked bf16 weights (Bfloat16BlockedCopy::InputGradient: the output gradient rounded
// to bf16, float32 sums): within the float32 sums' rounding of the exact products of the rounded factors (a sum of
// outputs / 16 + 10 terms at most in sequence: 16 lanes, a pair of outputs a step, then 8 lanes), at several rows and
// shapes; the same bits on one thread as on two.
TEST(PrecisionTest, Bfloat16BlockedWeightsInputGradientIsWithinItsRounding) {
  CREMA_SKIP_WITHOUT_CREMAS_BF16_WEIGHTS();
  for (const auto& [outputs, inputs, rows] :
       std::vector<std::tuple<int, int, int>>{{64, 32, 1}, {100, 75, 5}, {130, 200, 10}, {17, 9, 3}, {300, 64, 31}}) {
    SCOPED_TRACE(std::to_string(rows) + " rows, " + std::to_string(outputs) + " outputs of " + std::to_string(inputs) +
                 " inputs");
    dnnl::inner_product_forward::primitive_desc forward;
    PairBlockedLayout layout;
    ASSERT_TRUE(BlockedLayoutOfInnerProduct(outputs, inputs, &forward, &layout));
    Blob weights({outputs, inputs}), output_gradient({rows, outputs});
    test::FillGaussian(&weights, 0.f, 1.f, 41);
    test::FillGaussian(&output_gradient, 0.f, 1.f, 43);
    Bfloat16BlockedCopy copy(layout);
    copy.WriteRows(weights.cpu_data(), 0, outputs);
    std::vector<float> computed(static_cast<size_t>(rows) * inputs, -1.f), one_thread(computed.size(), -2.f);
    ASSERT_TRUE(copy.InputGradient(output_gradient.cpu_data(), rows, computed.data()));
    {
      OneThreadWhile one(true);
      ASSERT_TRUE(copy.InputGradient(output_gradient.cpu_data(), rows, one_thread.data()));
    }
    EXPECT_EQ(std::memcmp(computed.data(), one_thread.data(), computed.size() * sizeof(float)), 0);
    const float* w = weights.cpu_data();
    const float* dy = output_gradient.cpu_data();
    const double u = std::ldexp(1.0, -24), terms = outputs / 16 + 10;
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < inputs; ++i) {
        double exact = 0, magnitude = 0;
        for (int o = 0; o < outputs; ++o) {
          const double product = static_cast<double>(FromBfloat16(ToBfloat16(dy[r * outputs + o]))) *
                                 FromBfloat16(ToBfloat16(w[o * inputs + i]));
          exact += product;
          magnitude += std::fabs(product);
        }
        const double bound = terms * u / (1 - terms * u) * magnitude;
        ASSERT_LE(std::fabs(computed[r * inputs + i] - exact), bound) << "row " << r << ", input " << i;
      }
  }
}

// The solver's update writes the bf16 copies of the fully connected layers' weights as it writes the weights
// (core/derived_copy.hpp): after each iteration they are current, hold what the layer would write from the weights,
// and the training is the one whose layers wrote them themselves (the weights marked written after each iteration).
TEST(PrecisionTest, TheUpdateWritesTheBfloat16WeightsTheLayersWouldWrite) {
  CREMA_SKIP_WITHOUT_CREMAS_BF16_WEIGHTS();
  test::TempDir dir;
  const std::string source = dir.file("train_lmdb");
  test::WriteRandomDatums(source, 70, 8, 8, 4, 11);
  auto by_update = CreateSolver(Bfloat16Solver(source, dir.file("update"), 40, ::caffe::BFLOAT16));
  auto by_layers = CreateSolver(Bfloat16Solver(source, dir.file("layers"), 40, ::caffe::BFLOAT16));
  for (int iteration = 0; iteration < 6; ++iteration) {
    by_update->Step(1);
    by_layers->Step(1);
    for (const char* name : {"ip1", "ip2"}) {
      SCOPED_TRACE(std::string(name) + " after iteration " + std::to_string(iteration + 1));
      Blob& weights = *by_update->net()->layer_by_name(name)->params()[0];
      const std::vector<std::shared_ptr<DerivedCopy>> copies = weights.DerivedCopies();
      ASSERT_EQ(copies.size(), 1u);
      EXPECT_TRUE(copies[0]->IsCurrent(weights));
      const auto* copy = dynamic_cast<const Bfloat16BlockedCopy*>(copies[0].get());
      ASSERT_NE(copy, nullptr);
      Bfloat16BlockedCopy fresh(copy->layout());
      WriteDerivedCopy(weights, &fresh);
      EXPECT_EQ(std::memcmp(copy->data(), fresh.data(), copy->bytes()), 0);
    }
    for (Blob* param : by_layers->net()->learnable_params()) param->mutable_cpu_data();
  }
  const auto& a = by_update->net()->learnable_params();
  const auto& b = by_layers->net()->learnable_params();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i]->cpu_data(), b[i]->cpu_data(), a[i]->count() * sizeof(float)), 0) << "parameter " << i;
}

// A 1x1 convolution computing in bf16 for training reads its weights' bf16 copy in an inner product's layout, which
// crema writes (WeightCache::DeriveFrom) and registers with the weights for the solver's update: each weight's bf16
// value at its place in the layout, the padding zero; stale after the weights are written, current again after a
// forward. (The forward and gradients through that copy are checked with the other cases, within bf16's rounding.)
TEST(PrecisionTest, APointwiseConvolutionsBfloat16WeightsAreCremasCopy) {
  CREMA_SKIP_WITHOUT_CREMAS_BF16_WEIGHTS();
  // In channel blocks, as a net's runs of oneDNN layers lie (channels-last takes other kernels and weights' layouts).
  const test::ScopedEnvironment blocks("CREMA_ONEDNN_ACTIVATIONS", "blocked");
  const std::vector<int> shape = {2, 48, 3, 4};
  auto half = MakeIn(test::kPrecisionPointwiseConvolution, ::caffe::BFLOAT16, shape);
  Blob& weights = *half->layer->params()[0];
  half->layer->Forward(half->bottoms(), half->tops());
  const std::vector<std::shared_ptr<DerivedCopy>> copies = weights.DerivedCopies();
  // oneDNN's bf16 1x1 kernel for AVX512_BF16 wants the pair-blocked layout; another (AMX's) may want one crema does not
  // write, and then reorders in the pass.
  const std::string kernel = dynamic_cast<const OneDnnConvolutionLayer&>(*half->layer).implementation();
  if (copies.empty() && kernel.rfind("jit_bf16_1x1", 0) != 0)
    GTEST_SKIP() << "oneDNN's bf16 1x1 convolution here (" << kernel << ") wants its weights in a layout crema does "
                 << "not write";
  // The forward's copy, and (where oneDNN's input gradient wants the transposed layout) the input gradient's.
  ASSERT_GE(copies.size(), 1u) << kernel;
  ASSERT_LE(copies.size(), 2u) << kernel;
  const Bfloat16BlockedCopy* forward_copy = nullptr;
  const Bfloat16BlockedCopy* backward_copy = nullptr;
  for (const std::shared_ptr<DerivedCopy>& derived : copies) {
    const auto* copy = dynamic_cast<const Bfloat16BlockedCopy*>(derived.get());
    ASSERT_NE(copy, nullptr);
    (copy->layout().transposed ? backward_copy : forward_copy) = copy;
  }
  ASSERT_NE(forward_copy, nullptr);
  if (copies.size() == 2) {
    ASSERT_NE(backward_copy, nullptr);
  }
  // Weight w[o][i] (20 outputs of 48 inputs) at the layout's (o, i), or the transposed layout's (i, o); the rest 0.
  const auto check = [&](const Bfloat16BlockedCopy& copy) {
    SCOPED_TRACE(copy.layout().transposed ? "the input gradient's copy" : "the forward's copy");
    EXPECT_TRUE(copy.IsCurrent(weights));
    const PairBlockedLayout& layout = copy.layout();
    ASSERT_EQ(layout.transposed ? layout.inputs : layout.outputs, 20);
    ASSERT_EQ(layout.transposed ? layout.outputs : layout.inputs, 48);
    std::vector<bool> placed(copy.bytes() / sizeof(uint16_t), false);
    for (int64_t o = 0; o < 20; ++o)
      for (int64_t i = 0; i < 48; ++i) {
        const int64_t at = layout.transposed ? layout.Offset(i, o) : layout.Offset(o, i);
        ASSERT_EQ(copy.data()[at], ToBfloat16(weights.cpu_data()[o * 48 + i])) << o << ", " << i;
        placed[at] = true;
      }
    for (size_t at = 0; at < placed.size(); ++at) {
      if (!placed[at]) {
        ASSERT_EQ(copy.data()[at], 0) << "padding at " << at;
      }
    }
  };
  check(*forward_copy);
  if (backward_copy != nullptr) {
    // Written as the update writes them: the input gradient's copy by the backward that reads it where stale.
    half->layer->Backward(half->tops(), {true}, half->bottoms());
    check(*backward_copy);
  }
  weights.mutable_cpu_data()[0] += 1.f;
  EXPECT_FALSE(forward_copy->IsCurrent(weights));
  half->layer->Forward(half->bottoms(), half->tops());
  EXPECT_TRUE(forward_copy->IsCurrent(weights));
  EXPECT_EQ(forward_copy->data()[forward_copy->layout().Offset(0, 0)], ToBfloat16(weights.cpu_data()[0]));
  if (backward_copy != nullptr) {
    EXPECT_FALSE(backward_copy->IsCurrent(weights));
    half->layer->Backward(half->tops(), {true}, half->bottoms());
    EXPECT_TRUE(backward_copy->IsCurrent(weights));
    EXPECT_EQ(backward_copy->data()[backward_copy->layout().Offset(0, 0)], ToBfloat16(weights.cpu_data()[0]));
    // The solver's update writes both copies as it writes the weights, and marks them current.
    weights.mutable_cpu_diff()[0] = 0.25f;
    WriteWithStep(half->layer->context(), &weights);
    EXPECT_TRUE(forward_copy->IsCurrent(weights));
    EXPECT_TRUE(backward_copy->IsCurrent(weights));
    check(*forward_copy);
    check(*backward_copy);
  }
  // And the primitive reads it as its layout: forward and gradients within bf16's rounding, as for the other cases.
  test::CheckHalfPrecisionLayer(
      [&](const Twin* like) { return MakeIn(test::kPrecisionPointwiseConvolution, ::caffe::FLOAT32, shape, like); },
      [&](const Twin& like) {
        auto layer = MakeIn(test::kPrecisionPointwiseConvolution, ::caffe::BFLOAT16, shape, &like);
        layer->layer->Forward(layer->bottoms(), layer->tops());
        EXPECT_GE(layer->layer->params()[0]->DerivedCopies().size(), 1u);
        return layer;
      },
      Precision::kBfloat16, 1e-6, false);
}

// Training through crema's bf16 Winograd (a 3 x 3 convolution over 28 x 28, all three passes) resumes bit for bit, and
// gives the bytes of the run with every blob in floats (its rule reads its operands rounded, wherever they lie). (A MAX
// pooling would not: its bf16 run's maxima are the rounded values', whose ties may differ from the float run's.)
TEST(PrecisionTest, Bfloat16WinogradTrainingResumesBitForBit) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  test::TempDir dir;
  const std::string source = dir.file("train_lmdb");
  test::WriteRandomDatums(source, 40, 28, 28, 4, 13);
  const auto solver = [&](const std::string& prefix, int max_iter) {
    SolverParameter param = test::ResumeSolver(R"(
      name: 'winograd'
      layer { name: 'data' type: 'Data' top: 'data' top: 'label'
              data_param { source: ')" + source + R"(' batch_size: 8 backend: LMDB }
              transform_param { scale: 0.00390625 } }
      layer { name: 'conv0' type: 'Convolution' bottom: 'data' top: 'conv0'
              convolution_param { num_output: 16 kernel_size: 1 weight_filler { type: 'xavier' } } }
      layer { name: 'conv1' type: 'Convolution' bottom: 'conv0' top: 'conv1'
              convolution_param { num_output: 32 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' } } }
      layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }
      layer { name: 'conv2' type: 'Convolution' bottom: 'conv1' top: 'conv2'
              convolution_param { num_output: 16 kernel_size: 1 weight_filler { type: 'xavier' } } }
      layer { name: 'ip' type: 'InnerProduct' bottom: 'conv2' top: 'ip'
              inner_product_param { num_output: 4 weight_filler { type: 'xavier' } } }
      layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
    )",
                                               dir.file(prefix), max_iter, 20);
    param.set_precision(::caffe::BFLOAT16);
    param.set_base_lr(0.005f);  // 0.05 made this small net's weights grow without bound in either kernels
    return CreateSolver(param);
  };
  const test::ScopedEnvironment blocks("CREMA_ONEDNN_ACTIVATIONS", "blocked");
  auto straight = solver("straight", 40);
  EXPECT_EQ(static_cast<const OneDnnConvolutionLayer&>(*straight->net()->layer_by_name("conv1")).implementation(),
            "crema_bf16_winograd_2x3");
  EXPECT_EQ(ElementTypeName(straight->net()->blob_by_name("conv1")->diff_type()),
            ElementTypeName(ElementType::kBfloat16));
  straight->Solve();
  const std::string bytes = test::FileBytes(dir.file("straight_iter_40.caffemodel"));
  ASSERT_FALSE(bytes.empty());
  solver("split", 20)->Solve();
  solver("split", 40)->Solve(dir.file("split_iter_20.solverstate"));
  EXPECT_TRUE(test::FileBytes(dir.file("split_iter_40.caffemodel")) == bytes)
      << "the resumed run's weights differ from the uninterrupted run's";
  {
    const test::ScopedEnvironment floats("CREMA_ELEMENT_TYPES", "float");
    auto float_blobs = solver("float_blobs", 40);
    EXPECT_EQ(float_blobs->net()->blob_by_name("conv1")->diff_type(), ElementType::kFloat32);
    float_blobs->Solve();
  }
  EXPECT_TRUE(test::FileBytes(dir.file("float_blobs_iter_40.caffemodel")) == bytes)
      << "bf16 blobs and gradients changed the training";
}

// The bf16 element type of a blob: the rounding (to nearest, ties to even; NaN kept, infinities kept), half the memory
// of floats, the float accessors refused, the values read back as floats.
TEST(Bfloat16BlobTest, RoundsToNearestEvenAndHoldsHalfTheBytes) {
  RandomStream random(5);
  for (int i = 0; i < 100000; ++i) {
    const float x = random.Gaussian(0.f, 1.f) * std::pow(10.f, random.Uniform(-6.f, 6.f));
    ASSERT_EQ(FromBfloat16(ToBfloat16(x)), RoundToBfloat16(x)) << x;
  }
  // Ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and goes to the even 1; 1 + 3 * 2^-8 to 1 + 2^-6.
  EXPECT_EQ(FromBfloat16(ToBfloat16(1.f + 1.f / 256)), 1.f);
  EXPECT_EQ(FromBfloat16(ToBfloat16(1.f + 3.f / 256)), 1.f + 1.f / 64);
  EXPECT_TRUE(std::isnan(FromBfloat16(ToBfloat16(std::nanf("")))));
  EXPECT_EQ(FromBfloat16(ToBfloat16(-INFINITY)), -INFINITY);
  EXPECT_EQ(FromBfloat16(ToBfloat16(3.4e38f)), INFINITY);  // past the largest bf16 (3.39e38), rounded up
  // Denormal floats (below 2^-126 in magnitude) become zero of their sign, as AVX512_BF16's conversion takes them; the
  // smallest normal float stays, and the largest denormal does not round up to it.
  EXPECT_EQ(ToBfloat16(FloatOfBits(0x00000001u)), 0x0000);
  EXPECT_EQ(ToBfloat16(FloatOfBits(0x807fffffu)), 0x8000);
  EXPECT_EQ(ToBfloat16(FloatOfBits(0x00800000u)), 0x0080);
  EXPECT_EQ(ToBfloat16(FloatOfBits(0x80808000u)), 0x8080);  // a tie at the smallest normals, to even
  // The loops' branch-free rounding (core/vector_clones.hpp) gives ToBfloat16's bits for every kind of float:
  // a sweep over the bit patterns, denormals, infinities and NaNs among them.
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) {
    const float x = FloatOfBits(static_cast<uint32_t>(bits));
    ASSERT_EQ(StoredAs(x, static_cast<const uint16_t*>(nullptr)), ToBfloat16(x)) << std::hex << bits;
  }

  Blob blob({3, 5});
  test::FillGaussian(&blob, 0.f, 1.f, 9);
  const std::vector<float> floats = test::DataOf(blob);
  blob.set_quantization({ElementType::kBfloat16, 1.f});
  EXPECT_EQ(blob.data_floats(), 8u);  // 15 halves in 8 floats
  auto* stored = static_cast<uint16_t*>(blob.mutable_cpu_bytes());
  for (int i = 0; i < 15; ++i) stored[i] = ToBfloat16(floats[i]);
  const std::vector<float> read = PlainValues(blob);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(read[i], RoundToBfloat16(floats[i]));
  EXPECT_THROW(blob.cpu_data(), Error);

  // The gradient alike: half the bytes in bf16, its float accessors refused, saying it is the gradient; 8 bits refused.
  Blob gradient({3, 5});
  EXPECT_NE(gradient.cpu_diff(), nullptr);
  gradient.set_diff_type(ElementType::kBfloat16);
  EXPECT_EQ(gradient.diff_floats(), 8u);
  EXPECT_EQ(gradient.diff()->size(), 15 * sizeof(float));  // an owner keeps the storage it has
  try {
    gradient.cpu_diff();
    ADD_FAILURE() << "a bf16 gradient was read as floats";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("holds its gradient in bfloat16"), std::string::npos) << error.what();
  }
  EXPECT_NE(gradient.cpu_diff_bytes(), nullptr);
  EXPECT_TRUE(gradient.quantization().floats());
  EXPECT_NE(gradient.cpu_data(), nullptr);
  EXPECT_THROW(gradient.set_diff_type(ElementType::kInt8), Error);
  gradient.set_diff_type(ElementType::kFloat32);
  EXPECT_NE(gradient.cpu_diff(), nullptr);
}

// On a CPU with bf16 instructions, crema's rounding is oneDNN's (its reorders convert with AVX512_BF16's instruction),
// bit for bit over a sweep of the bit patterns: the layers' own loops and oneDNN's conversions agree on every value a
// run may hand from one to the other, denormals and NaNs included.
TEST(PrecisionTest, Bfloat16RoundingIsOneDnnsOnThisCpu) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  std::vector<float> floats;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 65537)
    floats.push_back(FloatOfBits(static_cast<uint32_t>(bits)));
  for (uint32_t bits : {0x00000001u, 0x807fffffu, 0x00800000u, 0x7f7fffffu, 0x7fc00001u, 0xff800001u})
    floats.push_back(FloatOfBits(bits));
  const auto count = static_cast<dnnl::memory::dim>(floats.size());
  const dnnl::memory::desc from({count}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  const dnnl::memory::desc to({count}, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::a);
  std::vector<uint16_t> converted(floats.size());
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  dnnl::memory source(from, engine, floats.data()), target(to, engine, converted.data());
  dnnl::reorder(source, target).execute(stream, source, target);
  stream.wait();
  for (size_t i = 0; i < floats.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &floats[i], sizeof bits);
    ASSERT_EQ(ToBfloat16(floats[i]), converted[i]) << std::hex << bits;
  }
  // The vector loop's rounding too (RoundToBfloat16, AVX512_BF16's conversion), in pieces of every length from 0 to 40
  // (whole vectors and the masked tail) and the rest in one.
  std::vector<uint16_t> rounded(floats.size(), 0xdead);
  size_t at = 0;
  for (size_t length = 0; length <= 40; ++length) {
    crema::RoundToBfloat16(floats.data() + at, static_cast<long long>(length), rounded.data() + at);
    at += length;
  }
  crema::RoundToBfloat16(floats.data() + at, static_cast<long long>(floats.size() - at), rounded.data() + at);
  EXPECT_EQ(rounded, converted);
}

// A net of `text` computing in bf16 (a CPU context, seed 7), `types` on oneDNN's engine, with a memory plan (its
// blobs then planned in bf16 where they may be) or without (every blob in floats), made for backward; `fill` draws
// its parameters and inputs before the plan.
std::unique_ptr<Net> Bfloat16TrainingNet(const std::string& text, bool plan, const std::vector<const char*>& types,
                                         const std::function<void(Net&)>& fill) {
  auto context = std::make_shared<Context>(Device::kCPU, 0, 7);
  context->set_plan_memory(plan);
  for (const char* type : types) context->force_engine(type, "onednn");
  context->set_precision(Precision::kBfloat16);
  auto net = std::make_unique<Net>(test::ParseNet(text), context);
  fill(*net);
  net->PlanMemory(true);
  net->RunAfterWeightsPasses();
  return net;
}

// Every parameter drawn around 0 and the inputs, from `seed` on.
void FillAroundZero(Net& net, uint64_t seed) {
  for (const auto& layer : net.layers())
    for (const auto& blob : layer->params()) test::FillGaussian(blob.get(), 0.f, 0.3f, seed++);
  for (Blob* input : net.input_blobs()) test::FillGaussian(input, 0.f, 1.f, seed++);
}

// In channel blocks and in channels-last: `check` over the net `build(true)` makes (bf16 where planned) and the one
// `build(false)` makes (every blob in floats), whose plans have the same steps.
void InEachLayout(const std::function<std::unique_ptr<Net>(bool)>& build, const std::function<void(Net&, Net&)>& check) {
  for (const char* activations : {"blocked", "nhwc"}) {
    SCOPED_TRACE(activations);
    const test::ScopedEnvironment layout("CREMA_ONEDNN_ACTIVATIONS", activations);
    const auto net = build(true);
    const auto float_net = build(false);
    ASSERT_EQ(net->plan().size(), float_net->plan().size());
    check(*net, *float_net);
  }
}

// Runs `net` forward step by step (and `float_net`, every blob in floats, beside it where `step_both`; else it has run
// already and keeps every blob) and checks each step's top, read before a later step reuses its memory, against the
// float net's blob of the user's name: bit for bit, or its bf16 rounding where the top is bf16. Returns the tops
// compared, by name, until the first that differs.
std::vector<std::string> CompareStepTops(Net* net, Net* float_net, bool step_both) {
  std::vector<std::string> compared;
  for (size_t s = 0; s < net->plan().size(); ++s) {
    net->ForwardStep(s);
    if (step_both) float_net->ForwardStep(s);
    for (int id : net->plan()[s].tops) {
      const std::string& name = net->blob_names()[id];
      const std::vector<float> held = PlainValues(*net->blobs()[id]);
      const std::vector<float> computed = PlainValues(*float_net->blob_by_name(net->UserBlobName(name)));
      const bool bf16 = net->blobs()[id]->data_type() == ElementType::kBfloat16;
      if (held.size() != computed.size()) {
        ADD_FAILURE() << name << ": " << held.size() << " values against " << computed.size();
        return compared;
      }
      for (size_t i = 0; i < held.size(); ++i)
        if (held[i] != (bf16 ? RoundToBfloat16(computed[i]) : computed[i])) {
          ADD_FAILURE() << name << " at " << i << ": " << held[i] << " against " << computed[i];
          return compared;
        }
      compared.push_back(name);
    }
  }
  return compared;
}

// A net planned for forward alone in bf16: a blob whose writer can write bf16 and whose every reader computes in bf16
// (the oneDNN Convolution) passes as bf16, through the MAX pooling and the Concat, from the LRN (which reads floats
// and rounds its output) on; a blob a float reader (the InnerProduct) reads, the net's outputs and everything in a net
// planned for backward stay floats. Each bf16 blob holds exactly the bf16 rounding of what the same net computes with
// every blob in floats, and what reads them computes the same bits: the rounding the readers did is done once by the
// writer. In the channel-blocked layouts (the LRN's oneDNN primitive, its output reordered) and in channels-last (its
// own loops).
TEST(PrecisionTest, Bfloat16BlobsPassBetweenBf16StepsAsTheirReadersWouldRoundThem) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  const std::string text = R"(
    layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 16 dim: 12 dim: 12 } } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'c1' convolution_param { num_output: 32
            kernel_size: 3 pad: 1 } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'c1' top: 'c1' }
    layer { name: 'norm' type: 'LRN' bottom: 'c1' top: 'norm' lrn_param { local_size: 5 alpha: 0.1 beta: 0.75 } }
    layer { name: 'conv2' type: 'Convolution' bottom: 'norm' top: 'c2' convolution_param { num_output: 16
            kernel_size: 1 } }
    layer { name: 'relu2' type: 'ReLU' bottom: 'c2' top: 'c2' }
    layer { name: 'pool' type: 'Pooling' bottom: 'norm' top: 'pooled' pooling_param { pool: MAX kernel_size: 3
            stride: 1 pad: 1 } }
    layer { name: 'join' type: 'Concat' bottom: 'c2' bottom: 'pooled' top: 'joined' }
    layer { name: 'conv3' type: 'Convolution' bottom: 'joined' top: 'c3' convolution_param { num_output: 24
            kernel_size: 3 pad: 1 } }
    layer { name: 'fc' type: 'InnerProduct' bottom: 'c3' top: 'out' inner_product_param { num_output: 10 } }
  )";
  const auto build = [&](bool backward, bool plan = true, int lanes = 1) {
    auto context = std::make_shared<Context>(Device::kCPU, 0, 7);
    context->set_plan_memory(plan);
    context->set_lanes(lanes);
    context->force_engine("Convolution", "onednn");
    context->force_engine("InnerProduct", "onednn");
    context->force_engine("LRN", "onednn");
    context->force_engine("Pooling", "onednn");
    context->force_engine("Concat", "onednn");
    context->set_precision(Precision::kBfloat16);
    auto net = std::make_unique<Net>(test::ParseNet(text), context);
    uint64_t seed = 3;
    for (const auto& layer : net->layers())
      for (const auto& blob : layer->params()) test::FillGaussian(blob.get(), 0.f, 0.3f, seed++);
    test::FillGaussian(net->input_blobs()[0], 0.f, 1.f, seed++);
    net->PlanMemory(backward);
    net->RunAfterWeightsPasses();
    return net;
  };
  for (const char* activations : {"blocked", "nhwc"}) {
    SCOPED_TRACE(activations);
    const test::ScopedEnvironment layout("CREMA_ONEDNN_ACTIVATIONS", activations);
    const auto net = build(false);
    // In channel blocks the LRN computes by its bf16 rule (oneDNN's bf16 primitive), which reads its input in bf16
    // too; in channels-last its own loops read floats.
    const bool blocked = std::string(activations) == "blocked";
    EXPECT_EQ(static_cast<const OneDnnLRNLayer&>(*net->layer_by_name("norm")).computes_bf16(), blocked);
    std::vector<std::string> bf16 = {"norm", "c2", "pooled", "joined"}, floats = {"c3", "out"};
    (blocked ? bf16 : floats).push_back("c1");
    for (const std::string& name : bf16) {
      SCOPED_TRACE(name);
      EXPECT_EQ(ElementTypeName(net->blob_by_name(name)->data_type()), ElementTypeName(ElementType::kBfloat16));
      EXPECT_EQ(net->blob_by_name(name)->data_floats(), static_cast<size_t>(net->blob_by_name(name)->count()) / 2);
    }
    for (const std::string& name : floats) EXPECT_TRUE(net->blob_by_name(name)->quantization().floats()) << name;

    // The same net with every blob in floats, and memory of their own (no plan), so that each can be read afterwards.
    const auto float_net = build(false, false);
    ASSERT_TRUE(float_net->blob_by_name("joined")->quantization().floats());
    float_net->Forward();
    // The planned net step by step.
    const std::vector<std::string> compared = CompareStepTops(net.get(), float_net.get(), false);
    // Every step's top (the ReLUs fused into the convolutions): the float ones bit for bit.
    EXPECT_EQ(compared, (std::vector<std::string>{"data", "c1", "norm", "c2", "pooled", "joined", "c3", "out"}));
    // On two lanes (conv2 and the pooling at once, the memory plan made for lanes), the same output.
    const auto on_lanes = build(false, true, 2);
    ASSERT_EQ(on_lanes->lanes(), 2);
    EXPECT_EQ(on_lanes->blob_by_name("joined")->data_type(), ElementType::kBfloat16);
    on_lanes->Forward();
    EXPECT_EQ(test::DataOf(*on_lanes->blob_by_name("out")), test::DataOf(*net->blob_by_name("out")));

    const auto training_net = build(true);
    for (const auto& blob : training_net->blobs()) EXPECT_TRUE(blob->quantization().floats());
  }
}

// A training net: an input of 16 channels over 8 x 8, conv1 -> bn1 -> sc1 -> relu1 ('c1', 32 channels), conv2 (1 x 1,
// `outputs` channels) -> bn2 -> sc2 ('c2'), then `rest`, whose loss compares with 'target' (`target_channels`).
std::string BatchNormStem(int outputs, int target_channels, const std::string& rest) {
  return R"(
    force_backward: true
    state { phase: TRAIN }
    layer { name: 'data' type: 'Input' top: 'data' top: 'target'
            input_param { shape { dim: 2 dim: 16 dim: 8 dim: 8 } shape { dim: 2 dim: )" +
         std::to_string(target_channels) + R"( dim: 8 dim: 8 } } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'c1' convolution_param { num_output: 32
            kernel_size: 3 pad: 1 } }
    layer { name: 'bn1' type: 'BatchNorm' bottom: 'c1' top: 'c1' }
    layer { name: 'sc1' type: 'Scale' bottom: 'c1' top: 'c1' scale_param { bias_term: true } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'c1' top: 'c1' }
    layer { name: 'conv2' type: 'Convolution' bottom: 'c1' top: 'c2' convolution_param { num_output: )" +
         std::to_string(outputs) + R"( kernel_size: 1 } }
    layer { name: 'bn2' type: 'BatchNorm' bottom: 'c2' top: 'c2' }
    layer { name: 'sc2' type: 'Scale' bottom: 'c2' top: 'c2' scale_param { bias_term: true } }
  )" + rest;
}

// Every parameter but BatchNorm's statistics drawn (a Scale's scales around 1, the rest around 0), and the inputs.
void FillAroundOne(Net& net, uint64_t seed) {
  for (const auto& layer : net.layers())
    for (size_t i = 0; i < layer->params().size() && std::string(layer->type()) != "BatchNorm"; ++i)
      test::FillGaussian(layer->params()[i].get(), i == 0 && std::string(layer->type()) == "Scale" ? 1.f : 0.f, 0.3f,
                         seed++);
  for (Blob* input : net.input_blobs()) test::FillGaussian(input, 0.f, 1.f, seed++);
}

// Training in bf16 through a ResNet's BatchNorm, Scale and ReLU (fused: fuse_for_training), which compute by the bf16
// rule: the BatchNorm leaves its place on the convolution's output for a top of its own, held in bf16 for the
// convolution after it; it reads the convolution's output in bf16 (the convolution writes it so) and the next
// convolution's input gradient in bf16; it writes the convolution's output gradient in bf16 (the memory plan keeps the
// gradients apart: bf16 over floats in place would overwrite what the loops have yet to read), in channel blocks and
// channels-last. Every step's top is what the net with every blob in floats (no memory plan: the BatchNorm stays in
// place, rounding what it reads) computes, rounded where it is bf16; every parameter's gradient is its gradient bit
// for bit.
TEST(PrecisionTest, Bfloat16BatchNormOutputsAndGradientsInTrainingAreTheFloatRunsRounded) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  const std::string text = BatchNormStem(16, 24, R"(
    layer { name: 'conv3' type: 'Convolution' bottom: 'c2' top: 'c3' convolution_param { num_output: 24
            kernel_size: 3 pad: 1 } }
    layer { name: 'loss' type: 'EuclideanLoss' bottom: 'c3' bottom: 'target' top: 'loss' }
  )");
  const auto build = [&](bool plan) {
    return Bfloat16TrainingNet(text, plan, {"Convolution", "BatchNorm"}, [](Net& net) { FillAroundOne(net, 5); });
  };
  InEachLayout(build, [&](Net& net, Net& float_net) {
    // The fused BatchNorms write tops of their own in bf16, and read the convolutions' outputs in bf16.
    for (const char* name : {"c1@bn1", "c2@bn2"}) {
      EXPECT_EQ(ElementTypeName(net.blob_by_name(name)->data_type()), ElementTypeName(ElementType::kBfloat16)) << name;
      EXPECT_EQ(net.UserBlobName(name), std::string(name).substr(0, 2));
    }
    for (const char* name : {"c1", "c2"})
      EXPECT_EQ(ElementTypeName(net.blob_by_name(name)->data_type()), ElementTypeName(ElementType::kBfloat16)) << name;
    for (const char* layer : {"bn1", "bn2"}) {
      const auto* bn = dynamic_cast<const OneDnnBatchNormLayer*>(net.layer_by_name(layer));
      ASSERT_NE(bn, nullptr) << layer;
      EXPECT_TRUE(bn->computes_bf16()) << layer;
    }
    EXPECT_TRUE(net.blob_by_name("c3")->quantization().floats());  // the loss reads it
    // The convolutions' output gradients, which the BatchNorms write and the convolutions read in bf16, are bf16; so
    // are the BatchNorms' output gradients, which the next convolutions write and the BatchNorms read in bf16 (bn2's
    // through conv3); the loss's input gradient stays floats.
    for (const char* name : {"c1", "c2", "c1@bn1", "c2@bn2"})
      EXPECT_EQ(ElementTypeName(net.blob_by_name(name)->diff_type()), ElementTypeName(ElementType::kBfloat16)) << name;
    EXPECT_EQ(net.blob_by_name("c3")->diff_type(), ElementType::kFloat32);
    for (const auto& blob : float_net.blobs())
      EXPECT_TRUE(blob->quantization().floats() && blob->diff_type() == ElementType::kFloat32);

    const std::vector<std::string> compared = CompareStepTops(&net, &float_net, true);
    EXPECT_EQ(compared, (std::vector<std::string>{"data", "target", "c1", "c1@bn1", "c2", "c2@bn2", "c3", "loss"}));

    net.ClearParamDiffs();
    float_net.ClearParamDiffs();
    EXPECT_EQ(net.ForwardBackward(), float_net.ForwardBackward());
    for (const char* layer : {"conv1", "sc1", "conv2", "sc2", "conv3"})
      for (size_t i = 0; i < net.layer_by_name(layer)->params().size(); ++i) {
        const Blob& gradient = *net.layer_by_name(layer)->params()[i];
        EXPECT_GT(test::AbsSum(test::DiffOf(gradient)), 0.0) << layer << " " << i;
        EXPECT_EQ(test::DiffOf(gradient), test::DiffOf(*float_net.layer_by_name(layer)->params()[i]))
            << layer << " " << i;
      }
  });
}

// BatchNorm's bf16 rule (layers/normalization/batch_norm_affine.hpp) against this test's own arithmetic in double: the
// statistics of the input rounded to bf16, x_hat rounded to bf16, the top through the Scale and ReLU, and backward
// from the output gradient rounded to bf16, in 16-channel blocks and channels-last (positions not a multiple of the
// loops' four chains of sums). The input and the gradient given in bf16 give the bits their floats give.
TEST(Bfloat16BlobTest, BatchNormRuleReadsItsOperandsRoundedAndKeepsNormalizedValuesInBf16) {
  const int num = 3, channels = 32, spatial = 35;
  const size_t count = static_cast<size_t>(num) * channels * spatial;
  for (const int block : {16, channels}) {
    SCOPED_TRACE(block == 16 ? "blocks of 16" : "channels-last");
    const ChannelGrid grid{num, channels, spatial, block};
    const auto at = [&](int n, int c, int s) {  // core/layout.hpp's arrangement
      return ((static_cast<size_t>(n) * (channels / block) + c / block) * spatial + s) * block + c % block;
    };
    RandomStream random(31);
    std::vector<float> x(count), dy(count), gamma(channels), beta(channels);
    std::vector<uint16_t> x16(count), dy16(count);
    for (size_t i = 0; i < count; ++i) {
      x[i] = random.Gaussian(0.5f, 2.f);
      dy[i] = random.Gaussian(0.f, 1.f);
      x16[i] = ToBfloat16(x[i]);
      dy16[i] = ToBfloat16(dy[i]);
    }
    for (int c = 0; c < channels; ++c) {
      gamma[c] = random.Uniform(0.5f, 1.5f);
      beta[c] = random.Uniform(-0.5f, 0.5f);
    }
    std::vector<float> mean(channels), variance(channels), mean16(channels), variance16(channels), inv_std(channels);
    Bfloat16StatisticsLoops(grid, x.data(), mean.data(), variance.data());
    Bfloat16StatisticsLoops(grid, x16.data(), mean16.data(), variance16.data());
    EXPECT_EQ(mean, mean16);
    EXPECT_EQ(variance, variance16);
    const double m = static_cast<double>(num) * spatial;
    for (int c = 0; c < channels; ++c) {
      double sum = 0, squares = 0;
      for (int n = 0; n < num; ++n)
        for (int s = 0; s < spatial; ++s) sum += RoundToBfloat16(x[at(n, c, s)]);
      const double mu = sum / m;
      for (int n = 0; n < num; ++n)
        for (int s = 0; s < spatial; ++s) squares += std::pow(RoundToBfloat16(x[at(n, c, s)]) - mu, 2);
      EXPECT_NEAR(mean[c], mu, 1e-6 * (1 + std::fabs(mu))) << c;
      EXPECT_NEAR(variance[c], squares / m, 1e-6 * squares / m) << c;
      inv_std[c] = 1.f / std::sqrt(variance[c] + 1e-5f);
    }
    std::vector<uint16_t> xhat(count), xhat_from16(count), y(count), y_from16(count);
    std::vector<float> y_floats(count);
    Bfloat16NormalizeLoops(grid, x.data(), mean.data(), inv_std.data(), gamma.data(), beta.data(), true, xhat.data(),
                           y.data());
    Bfloat16NormalizeLoops(grid, x16.data(), mean.data(), inv_std.data(), gamma.data(), beta.data(), true,
                           xhat_from16.data(), y_from16.data());
    Bfloat16NormalizeLoops(grid, x.data(), mean.data(), inv_std.data(), gamma.data(), beta.data(), true, xhat.data(),
                           y_floats.data());
    EXPECT_EQ(xhat, xhat_from16);
    EXPECT_EQ(y, y_from16);
    for (int n = 0; n < num; ++n)
      for (int c = 0; c < channels; ++c)
        for (int s = 0; s < spatial; ++s) {
          const size_t i = at(n, c, s);
          // x_hat: the rounding of (x rounded - mean) * inv_std, a subtraction and a product in float.
          ASSERT_EQ(xhat[i], ToBfloat16((RoundToBfloat16(x[i]) - mean[c]) * inv_std[c])) << i;
          const double z = static_cast<double>(gamma[c]) * FromBfloat16(xhat[i]) + beta[c];
          ASSERT_NEAR(y_floats[i], std::max(z, 0.0), 1e-6 * (1 + std::fabs(z))) << i;
          ASSERT_EQ(y[i], ToBfloat16(y_floats[i])) << i;
        }

    // Backward, the batch's statistics: dz = dy (rounded) where z > 0; dx = inv_std * gamma * (dz - mean(dz) - x_hat *
    // mean(dz * x_hat)).
    std::vector<float> dx_floats(count), gamma_diff(channels), beta_diff(channels), gamma_diff16(channels),
        beta_diff16(channels);
    std::vector<uint16_t> dx(count), dx_from16(count);
    AffineBackwardLoops(grid, dy.data(), xhat.data(), inv_std.data(), gamma.data(), beta.data(), true, true, dx.data(),
                        gamma_diff.data(), beta_diff.data());
    AffineBackwardLoops(grid, dy16.data(), xhat.data(), inv_std.data(), gamma.data(), beta.data(), true, true,
                        dx_from16.data(), gamma_diff16.data(), beta_diff16.data());
    EXPECT_EQ(dx, dx_from16);
    EXPECT_EQ(gamma_diff, gamma_diff16);
    EXPECT_EQ(beta_diff, beta_diff16);
    std::vector<float> unused(channels);
    AffineBackwardLoops(grid, dy.data(), xhat.data(), inv_std.data(), gamma.data(), beta.data(), true, true,
                        dx_floats.data(), unused.data(), unused.data());
    for (int c = 0; c < channels; ++c) {
      double sum_dz = 0, sum_dz_xhat = 0;
      std::vector<double> dz(count);
      for (int n = 0; n < num; ++n)
        for (int s = 0; s < spatial; ++s) {
          const size_t i = at(n, c, s);
          const double xh = FromBfloat16(xhat[i]);
          dz[i] = gamma[c] * xh + beta[c] > 0 ? RoundToBfloat16(dy[i]) : 0.0;
          sum_dz += dz[i];
          sum_dz_xhat += dz[i] * xh;
        }
      EXPECT_NEAR(beta_diff[c], sum_dz, 1e-5 * (1 + std::fabs(sum_dz))) << c;
      EXPECT_NEAR(gamma_diff[c], sum_dz_xhat, 1e-5 * (1 + std::fabs(sum_dz_xhat))) << c;
      for (int n = 0; n < num; ++n)
        for (int s = 0; s < spatial; ++s) {
          const size_t i = at(n, c, s);
          const double want = static_cast<double>(inv_std[c]) * gamma[c] *
                              (dz[i] - sum_dz / m - FromBfloat16(xhat[i]) * (sum_dz_xhat / m));
          ASSERT_NEAR(dx_floats[i], want, 1e-5 * (1 + std::fabs(want))) << i;
          ASSERT_EQ(dx[i], ToBfloat16(dx_floats[i])) << i;
        }
    }
  }
}

// MAX pooling in the lanes over bf16 values (training's, where the plan passes bf16 through a pooling) is the float
// pooling of the values they stand for: the top the bf16 bits of the float top, the record of the maxima the same
// (ties, made often here by a coarse grid of values, go to the first in both), in channel blocks of 16 and 8 and in
// channels-last with a tail of lanes; NaNs and infinities among the values.
TEST(Bfloat16BlobTest, MaxPoolingInLanesIsTheFloatPoolingOfTheValuesTheyStandFor) {
  const PoolingWindows w{9, 7, 5, 4, 3, 3, 2, 2, 1, 1};  // 9 x 7 in, 5 x 4 out, 3 x 3 windows, stride 2, pad 1
  const int num = 2;
  for (const auto& [layout, channels] : std::vector<std::pair<Layout, int>>{
           {Layout::kChannelBlocks16, 32}, {Layout::kChannelBlocks8, 16}, {Layout::kChannelsLast, 20}}) {
    SCOPED_TRACE(LayoutName(layout));
    const size_t in_count = static_cast<size_t>(num) * channels * w.height * w.width;
    const size_t out_count = static_cast<size_t>(num) * channels * w.pooled_h * w.pooled_w;
    std::vector<uint16_t> in(in_count);
    std::vector<float> in_floats(in_count);
    RandomStream random(17);
    for (size_t i = 0; i < in_count; ++i) {
      // A coarse grid (eighths in [-2, 2]): many equal values in a window.
      const float value = std::floor(random.Uniform(-16.f, 16.f)) / 8.f;
      in[i] = ToBfloat16(i % 97 == 5 ? std::nanf("") : i % 89 == 3 ? -INFINITY : i % 83 == 7 ? INFINITY : value);
      in_floats[i] = FromBfloat16(in[i]);
    }
    std::vector<uint16_t> out(out_count);
    std::vector<float> out_floats(out_count);
    std::vector<uint8_t> arg(out_count), arg_floats(out_count);
    MaxPoolForwardInLanes(w, layout, num, channels, in.data(), out.data(), arg.data());
    MaxPoolForwardInLanes(w, layout, num, channels, in_floats.data(), out_floats.data(), arg_floats.data());
    for (size_t i = 0; i < out_count; ++i) {
      ASSERT_EQ(out[i], ToBfloat16(out_floats[i])) << "at " << i;
      ASSERT_EQ(arg[i], arg_floats[i]) << "at " << i;
    }
    // Without a record (forward alone), the same top.
    std::vector<uint16_t> unrecorded(out_count);
    MaxPoolForwardInLanes(w, layout, num, channels, in.data(), unrecorded.data(), nullptr);
    EXPECT_EQ(unrecorded, out);
  }
}

// A residual unit trained in bf16: the sum (an Eltwise SUM with its ReLU fused for training) adds its operands rounded
// to bf16, so its output, its shortcut (through the Split's copies) and its branch pass as bf16 between the steps,
// with the same bits as the net with every blob in floats, whose sum rounds its operands alike; gradients bit for bit.
// Its backward reads its output's gradient rounded to bf16 and writes its operands' gradients in bf16, and the Split
// reads its copies' gradients rounded to bf16 and writes their sum in bf16, so those pass as bf16 too. `precision:
// FLOAT32` on the Eltwise keeps the sums and what they read in floats.
TEST(PrecisionTest, Bfloat16ResidualSumsInTrainingAddTheirOperandsRounded) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  const auto unit = [](const std::string& sum_setting) {
    return BatchNormStem(32, 16, R"(
      layer { name: 'sum' type: 'Eltwise' bottom: 'c2' bottom: 'c1' top: 'sum' )" +
                                     sum_setting + R"( }
      layer { name: 'relu_sum' type: 'ReLU' bottom: 'sum' top: 'sum' }
      layer { name: 'conv3' type: 'Convolution' bottom: 'sum' top: 'c3' convolution_param { num_output: 16
              kernel_size: 1 } }
      layer { name: 'loss' type: 'EuclideanLoss' bottom: 'c3' bottom: 'target' top: 'loss' }
    )");
  };
  const auto fill = [](Net& net) { FillAroundOne(net, 21); };
  const std::vector<const char*> engines = {"Convolution", "BatchNorm", "Eltwise"};
  // A residual sum, and a difference (whose negative values the fused ReLU stops).
  for (const char* setting : {"", "eltwise_param { coeff: 1 coeff: -1 }"}) {
    SCOPED_TRACE(setting);
    const auto build = [&](bool plan) { return Bfloat16TrainingNet(unit(setting), plan, engines, fill); };
    InEachLayout(build, [&](Net& net, Net& float_net) {
      for (const char* name : {"sum", "c1@bn1", "c2@bn2"}) {
        EXPECT_EQ(ElementTypeName(net.blob_by_name(name)->data_type()), ElementTypeName(ElementType::kBfloat16))
            << name;
        // The sum's gradient (conv3 writes it, the sum reads it), its branch's (the sum writes it, bn2 reads it) and
        // the shortcut's (the Split writes the sum of its copies', bn1 reads it).
        EXPECT_EQ(ElementTypeName(net.blob_by_name(name)->diff_type()), ElementTypeName(ElementType::kBfloat16))
            << name;
      }
      // The Split's copies of c1@bn1: conv2 and the sum write their gradients in bf16, which the Split reads rounded.
      int copies = 0;
      for (const PlanStep& step : net.plan()) {
        if (std::string(net.layers()[step.layer]->type()) != "Split") continue;
        for (int id : step.tops) {
          ++copies;
          EXPECT_EQ(ElementTypeName(net.blobs()[id]->diff_type()), ElementTypeName(ElementType::kBfloat16))
              << net.blob_names()[id];
        }
      }
      EXPECT_EQ(copies, 2);
      size_t tops = 0;
      for (const PlanStep& step : net.plan()) tops += step.tops.size();
      EXPECT_EQ(CompareStepTops(&net, &float_net, true).size(), tops);  // every step's tops, the Split's copies too
      net.ClearParamDiffs();
      float_net.ClearParamDiffs();
      EXPECT_EQ(net.ForwardBackward(), float_net.ForwardBackward());
      for (const char* layer : {"conv1", "sc1", "conv2", "sc2", "conv3"})
        for (size_t i = 0; i < net.layer_by_name(layer)->params().size(); ++i)
          EXPECT_EQ(test::DiffOf(*net.layer_by_name(layer)->params()[i]),
                    test::DiffOf(*float_net.layer_by_name(layer)->params()[i]))
              << layer << " " << i;
      if (std::string(setting).empty()) return;
      // The difference is negative somewhere, so that the ReLU's rule is tried both ways.
      const std::vector<float> sum = PlainValues(*net.blob_by_name("sum"));
      EXPECT_GT(std::count(sum.begin(), sum.end(), 0.f), 0);
      EXPECT_GT(std::count_if(sum.begin(), sum.end(), [](float v) { return v > 0.f; }), 0);
    });
  }
  const auto float_sums = Bfloat16TrainingNet(unit("precision: FLOAT32"), true, engines, fill);
  for (const char* name : {"sum", "c1@bn1"}) EXPECT_TRUE(float_sums->blob_by_name(name)->quantization().floats());
  EXPECT_EQ(ElementTypeName(float_sums->blob_by_name("c2@bn2")->data_type()), ElementTypeName(ElementType::kFloat32));
}

// The residual sum's bf16 rule with other than a residual sum's two gradients to write (three operands; two with one
// gradient asked for) and with them (its vector loops): the output is the ReLU of the coefficients times the operands
// rounded to bf16, summed in operand order in floats, and each operand's gradient its coefficient times the output's
// gradient rounded to bf16, passed where the output is positive (the slope times it elsewhere), computed here from
// those definitions.
TEST(PrecisionTest, Bfloat16SumRuleWritesEachAskedGradientFromTheRoundedOutputGradient) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  struct Case {
    std::vector<float> coeffs;  // none given: 1 each
    std::vector<bool> down;
    float slope;
  };
  const std::vector<Case> cases = {{{1.f, -0.5f, 2.f}, {true, false, true}, 0.f},
                                   {{0.75f, -3.f}, {false, true}, 0.125f},
                                   {{0.75f, -3.f}, {true, true}, 0.125f},
                                   {{}, {true, true, true, true}, 0.f}};
  for (const Case& c : cases) {
    const size_t n = c.down.size();
    std::string given;
    for (float coeff : c.coeffs) given += " coeff: " + std::to_string(coeff);
    SCOPED_TRACE(given + ", " + std::to_string(n) + " operands");
    const LayerParameter param =
        test::ParseLayer("name: 'sum' type: 'Eltwise' precision: BFLOAT16 eltwise_param {" + given + " }");
    const std::vector<int> shape = {2, 3, 5, 7};  // 210 values: the vector loops' whole and partial lanes
    std::vector<std::unique_ptr<Blob>> operands;
    std::vector<Blob*> bottom;
    for (size_t b = 0; b < n; ++b) {
      operands.push_back(std::make_unique<Blob>(shape));
      test::FillGaussian(operands.back().get(), 0.f, 1.f, 31 + b);
      bottom.push_back(operands.back().get());
    }
    Blob top;
    const std::vector<Blob*> tops = {&top};
    auto layer =
        LayerRegistry::Global().Create(param, std::vector<std::vector<int>>(n, shape), std::make_shared<Context>());
    auto* sum = dynamic_cast<EltwiseLayer*>(layer.get());
    ASSERT_NE(sum, nullptr);
    layer->SetUp(bottom, tops);
    sum->AbsorbReLU(c.slope);
    ASSERT_TRUE(sum->SumsInBfloat16());
    layer->Forward(bottom, tops);
    const std::vector<float> coeffs = c.coeffs.empty() ? std::vector<float>(n, 1.f) : c.coeffs;
    const int count = top.count();
    int positive = 0;
    for (int k = 0; k < count; ++k) {
      float value = 0.f;
      for (size_t b = 0; b < n; ++b) {
        const float term = coeffs[b] * FromBfloat16(ToBfloat16(bottom[b]->cpu_data()[k]));
        value = b == 0 ? term : value + term;
      }
      const float expected = value > 0.f ? value : c.slope * value;
      ASSERT_EQ(top.cpu_data()[k], expected) << "output " << k;
      positive += value > 0.f;
    }
    EXPECT_GT(positive, 0);
    EXPECT_LT(positive, count);  // the ReLU's rule both ways
    RandomStream random(47);
    for (int k = 0; k < count; ++k) top.mutable_cpu_diff()[k] = random.Gaussian(0.f, 1.f);
    for (size_t b = 0; b < n; ++b) std::fill_n(bottom[b]->mutable_cpu_diff(), count, -77.f);
    layer->Backward(tops, c.down, bottom);
    int inexact = 0;  // output gradients that bf16 does not hold: the rounding is tried
    for (int k = 0; k < count; ++k) {
      const float g = top.cpu_diff()[k];
      const float rounded = FromBfloat16(ToBfloat16(g));
      inexact += rounded != g;
      const float passed = top.cpu_data()[k] > 0.f ? rounded : c.slope * rounded;
      for (size_t b = 0; b < n; ++b)
        ASSERT_EQ(bottom[b]->cpu_diff()[k], c.down[b] ? coeffs[b] * passed : -77.f) << "operand " << b << " at " << k;
    }
    EXPECT_GT(inexact, count / 2);
  }
}

// The LRN's bf16 rule (OneDnnLRNLayer::computes_bf16, oneDNN's bf16 primitives) in training, in 16-channel blocks (32
// channels): its input, output and both gradients lie in bf16, and its values are Caffe's LRN over its operands
// rounded to bf16, computed here in double from the float-blob run's own operands: the output within its rounding, the
// input gradient within twice that of its terms. Over 20 channels channels-last, where oneDNN's bf16 kernel for the
// gradient errs (GradientKernelErrs, layers/normalization/onednn_lrn.cpp), the LRN computes in float32: Caffe's LRN of
// its float operands, within float32's rounding.
TEST(PrecisionTest, Bfloat16LrnRuleIsCaffesLrnOfItsRoundedOperands) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  for (const auto& setting : {std::pair<int, const char*>{32, "blocked"}, {20, "nhwc"}}) {
    // (named copies: lambdas below capture them, which clang does not allow of structured bindings in C++17)
    const int channels = setting.first;
    const char* layout_name = setting.second;
    SCOPED_TRACE(std::to_string(channels) + " channels, " + layout_name);
    const std::string text = R"(
      force_backward: true
      state { phase: TRAIN }
      layer { name: 'data' type: 'Input' top: 'data' top: 'target'
              input_param { shape { dim: 2 dim: 16 dim: 8 dim: 8 } shape { dim: 2 dim: 16 dim: 8 dim: 8 } } }
      layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'c1' convolution_param { num_output: )" +
                             std::to_string(channels) + R"(
              kernel_size: 3 pad: 1 } }
      layer { name: 'norm' type: 'LRN' bottom: 'c1' top: 'norm' lrn_param { local_size: 5 alpha: 0.5 beta: 0.75 } }
      layer { name: 'conv2' type: 'Convolution' bottom: 'norm' top: 'c2' convolution_param { num_output: 16
              kernel_size: 1 } }
      layer { name: 'loss' type: 'EuclideanLoss' bottom: 'c2' bottom: 'target' top: 'loss' }
    )";
    const auto build = [&](bool plan) {
      return Bfloat16TrainingNet(text, plan, {"Convolution", "LRN"}, [](Net& net) { FillAroundZero(net, 11); });
    };
    const test::ScopedEnvironment layouts("CREMA_ONEDNN_ACTIVATIONS", layout_name);
    const bool rule = channels % 16 == 0;
    const auto net = build(true);
    ASSERT_EQ(static_cast<const OneDnnLRNLayer&>(*net->layer_by_name("norm")).computes_bf16(), rule);
    // In float32 its input and both gradients are floats (its output may still pass to conv2 in bf16).
    for (const char* name : {"c1", "norm"}) {
      const ElementType type = rule ? ElementType::kBfloat16 : ElementType::kFloat32;
      if (rule || std::string(name) == "c1") {
        EXPECT_EQ(ElementTypeName(net->blob_by_name(name)->data_type()), ElementTypeName(type)) << name;
      }
      EXPECT_EQ(ElementTypeName(net->blob_by_name(name)->diff_type()), ElementTypeName(type)) << name;
    }
    // The run with every blob in floats computes the same values (the rule rounds its operands as it reads them).
    const auto float_net = build(false);
    float_net->ForwardBackward();
    const std::vector<float> x = test::DataOf(*float_net->blob_by_name("c1"));
    const std::vector<float> y = test::DataOf(*float_net->blob_by_name("norm"));
    const std::vector<float> dy = test::DiffOf(*float_net->blob_by_name("norm"));
    const std::vector<float> dx = test::DiffOf(*float_net->blob_by_name("c1"));
    const int num = 2, spatial = 64, size = 5;
    const double alpha = 0.5, beta = 0.75, k = 1;
    // Each value where the blobs' layout keeps it (the same for the four: the LRN takes its bottom's).
    const Layout layout = float_net->blob_by_name("c1")->layout();
    ASSERT_EQ(float_net->blob_by_name("norm")->layout(), layout);
    const int block = ChannelBlock(layout, channels);
    const auto at = [&](int n, int c, int s) {
      return ((static_cast<size_t>(n) * (channels / block) + c / block) * spatial + s) * block + c % block;
    };
    const auto rounded = [&](float v) { return static_cast<double>(rule ? RoundToBfloat16(v) : v); };
    // The rule's values are bf16, each within its rounding; float32's within its sums' rounding.
    const double roundoff = rule ? kBfloat16UnitRoundoff : 1e-6;
    int checked = 0;
    for (int n = 0; n < num; ++n)
      for (int s = 0; s < spatial; ++s) {
        std::vector<double> scale(channels), out(channels);
        for (int c = 0; c < channels; ++c) {
          double squares = 0;
          for (int w = std::max(0, c - size / 2); w <= std::min(channels - 1, c + size / 2); ++w)
            squares += rounded(x[at(n, w, s)]) * rounded(x[at(n, w, s)]);
          scale[c] = k + alpha / size * squares;
          out[c] = rounded(x[at(n, c, s)]) * std::pow(scale[c], -beta);
          const float got = y[at(n, c, s)];
          if (rule) {
            ASSERT_EQ(got, RoundToBfloat16(got)) << "the output is not a bf16 value";
          }
          ASSERT_NEAR(got, out[c], std::fabs(out[c]) * roundoff + 1e-6) << n << " " << c << " " << s;
        }
        for (int c = 0; c < channels; ++c) {
          const double direct = rounded(dy[at(n, c, s)]) * std::pow(scale[c], -beta);
          double cross = 0, magnitude = std::fabs(direct);
          for (int w = std::max(0, c - size / 2); w <= std::min(channels - 1, c + size / 2); ++w) {
            const double term =
                2 * alpha * beta / size * rounded(x[at(n, c, s)]) * rounded(dy[at(n, w, s)]) * out[w] / scale[w];
            cross += term;
            magnitude += std::fabs(term);
          }
          const float got = dx[at(n, c, s)];
          if (rule) {
            ASSERT_EQ(got, RoundToBfloat16(got)) << "the input gradient is not a bf16 value";
          }
          ASSERT_NEAR(got, direct - cross, 2 * magnitude * roundoff + 1e-6) << n << " " << c << " " << s;
          ++checked;
        }
      }
    EXPECT_EQ(checked, num * channels * spatial);
  }
}

// Winograd's F(2x2, 3x3) over one input (channels x height x width, floats, indexed by `in`) and 3 x 3 kernels
// (`kernel(output, input, y, x)`), padded by `pad`, to outputs over out_h x out_w: the exact convolution of the input
// rounded to bf16 with the kernels as given, in double (`exact`), and the bound on what the bf16 rule may err from it
// (`bound`): each of the rule's products U V has both factors rounded to bf16 (V = B^T d B, U = G w G^T, each within u
// of its value, u bf16's unit roundoff), so each output A^T (sum U V) A may err by (2u + u^2) times the sum of its
// terms' magnitudes, |A^T| (sum |U| |V|) |A|, and by float32's sums beside (1e-5 of that).
struct WinogradReference {
  std::vector<double> exact, bound;
};
WinogradReference WinogradOf(int inputs, int outputs, int height, int width, int pad, int out_h, int out_w,
                             const std::function<double(int, int, int)>& in,
                             const std::function<double(int, int, int, int)>& kernel) {
  const double bt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  const double g[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
  const double at[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
  const auto value = [&](int c, int y, int x) {
    return y < 0 || y >= height || x < 0 || x >= width ? 0.0 : static_cast<double>(RoundToBfloat16(in(c, y, x)));
  };
  // U for every output-input pair, |U| beside.
  std::vector<double> u(static_cast<size_t>(outputs) * inputs * 16);
  for (int o = 0; o < outputs; ++o)
    for (int i = 0; i < inputs; ++i)
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) {
          double sum = 0;
          for (int y = 0; y < 3; ++y)
            for (int x = 0; x < 3; ++x) sum += g[r][y] * kernel(o, i, y, x) * g[c][x];
          u[(static_cast<size_t>(o) * inputs + i) * 16 + r * 4 + c] = sum;
        }
  WinogradReference ref;
  ref.exact.assign(static_cast<size_t>(outputs) * out_h * out_w, 0.0);
  ref.bound.assign(ref.exact.size(), 0.0);
  const double roundings = 2 * kBfloat16UnitRoundoff + kBfloat16UnitRoundoff * kBfloat16UnitRoundoff;
  for (int ty = 0; 2 * ty < out_h; ++ty)
    for (int tx = 0; 2 * tx < out_w; ++tx) {
      // V of every input over this tile's patch.
      std::vector<double> v(static_cast<size_t>(inputs) * 16);
      for (int i = 0; i < inputs; ++i)
        for (int r = 0; r < 4; ++r)
          for (int c = 0; c < 4; ++c) {
            double sum = 0;
            for (int y = 0; y < 4; ++y)
              for (int x = 0; x < 4; ++x) sum += bt[r][y] * value(i, 2 * ty - pad + y, 2 * tx - pad + x) * bt[c][x];
            v[i * 16 + r * 4 + c] = sum;
          }
      for (int o = 0; o < outputs; ++o) {
        double magnitude[16] = {};
        for (int i = 0; i < inputs; ++i)
          for (int e = 0; e < 16; ++e)
            magnitude[e] += std::fabs(u[(static_cast<size_t>(o) * inputs + i) * 16 + e] * v[i * 16 + e]);
        for (int r = 0; r < 2 && 2 * ty + r < out_h; ++r)
          for (int s = 0; s < 2 && 2 * tx + s < out_w; ++s) {
            const int oy = 2 * ty + r, ox = 2 * tx + s;
            double sum = 0, terms = 0;
            for (int i = 0; i < inputs; ++i)
              for (int y = 0; y < 3; ++y)
                for (int x = 0; x < 3; ++x) sum += kernel(o, i, y, x) * value(i, oy - pad + y, ox - pad + x);
            for (int e = 0; e < 16; ++e) terms += std::fabs(at[r][e / 4] * at[s][e % 4]) * magnitude[e];
            const size_t at_output = (static_cast<size_t>(o) * out_h + oy) * out_w + ox;
            ref.exact[at_output] = sum;
            ref.bound[at_output] = (roundings + 1e-5) * terms;
          }
      }
    }
  return ref;
}

// crema's bf16 Winograd (layers/vision/bf16_winograd.hpp) in training: a 3 x 3 convolution of stride 1 between blobs in
// 16-channel blocks, over 29 x 28 (a last row of tiles half outside), takes it, in its three passes. Its output
// (through its fused ReLU), its input gradient and its weights' gradient are within the rule's rounding of the exact
// sums of their operands (the input and the output gradient rounded to bf16; the weights as they are: the rule
// transforms the float32 weights), in double; and the run with every blob in floats computes the same bits (the rule
// reads its operands rounded), the weights' gradients included, as does a run on one thread (but for the weights'
// gradients, whose threads' sums are added in thread order).
TEST(PrecisionTest, Bfloat16WinogradIsWithinItsRoundingOfTheExactConvolution) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  const std::string text = R"(
    force_backward: true
    state { phase: TRAIN }
    layer { name: 'data' type: 'Input' top: 'data' top: 'target'
            input_param { shape { dim: 2 dim: 16 dim: 29 dim: 28 } shape { dim: 2 dim: 16 dim: 29 dim: 28 } } }
    layer { name: 'conv0' type: 'Convolution' bottom: 'data' top: 'c0' convolution_param { num_output: 32
            kernel_size: 1 } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'c0' top: 'c1' convolution_param { num_output: 48
            kernel_size: 3 pad: 1 } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'c1' top: 'c1' }
    layer { name: 'conv2' type: 'Convolution' bottom: 'c1' top: 'c2' convolution_param { num_output: 16
            kernel_size: 1 } }
    layer { name: 'loss' type: 'EuclideanLoss' bottom: 'c2' bottom: 'target' top: 'loss' }
  )";
  const auto build = [&](bool plan) {
    return Bfloat16TrainingNet(text, plan, {"Convolution", "LRN"}, [](Net& net) { FillAroundZero(net, 31); });
  };
  const test::ScopedEnvironment blocks("CREMA_ONEDNN_ACTIVATIONS", "blocked");
  const auto net = build(true);
  const auto float_net = build(false);
  for (Net* n : {net.get(), float_net.get()}) {
    EXPECT_EQ(n->layer_by_name("conv1")->engine_note(), "bfloat16 Winograd");
    EXPECT_EQ(n->layer_by_name("conv0")->engine_note(), "bfloat16");  // a 1 x 1 convolution: oneDNN's
    EXPECT_EQ(static_cast<const OneDnnConvolutionLayer&>(*n->layer_by_name("conv1")).implementation(),
              "crema_bf16_winograd_2x3");
  }
  for (const char* name : {"c0", "c1"})
    EXPECT_EQ(ElementTypeName(net->blob_by_name(name)->data_type()), ElementTypeName(ElementType::kBfloat16)) << name;
  EXPECT_EQ(ElementTypeName(net->blob_by_name("c0")->diff_type()), ElementTypeName(ElementType::kBfloat16));
  const std::vector<std::string> compared = CompareStepTops(net.get(), float_net.get(), true);
  EXPECT_EQ(compared, (std::vector<std::string>{"data", "target", "c0", "c1", "c2", "loss"}));
  net->ClearParamDiffs();
  float_net->ClearParamDiffs();
  EXPECT_EQ(net->ForwardBackward(), float_net->ForwardBackward());
  for (const char* layer : {"conv0", "conv1", "conv2"})
    for (size_t i = 0; i < net->layer_by_name(layer)->params().size(); ++i)
      EXPECT_EQ(test::DiffOf(*net->layer_by_name(layer)->params()[i]),
                test::DiffOf(*float_net->layer_by_name(layer)->params()[i]))
          << layer << " " << i;
  // The input gradient held in bf16: the float run's, rounded.
  const Blob& held = *net->blob_by_name("c0");
  const auto* held_diff = static_cast<const uint16_t*>(held.cpu_diff_bytes());
  const std::vector<float> float_diff = test::DiffOf(*float_net->blob_by_name("c0"));
  for (size_t i = 0; i < float_diff.size(); ++i)
    ASSERT_EQ(FromBfloat16(held_diff[i]), RoundToBfloat16(float_diff[i])) << i;

  // The float run's operands and results, in their 16-channel blocks.
  const int num = 2, inputs = 32, outputs = 48, height = 29, width = 28;
  const Blob& x_blob = *float_net->blob_by_name("c0");
  ASSERT_EQ(x_blob.layout(), Layout::kChannelBlocks16);
  const std::vector<float> x = test::DataOf(x_blob), dx = test::DiffOf(x_blob);
  const std::vector<float> y = test::DataOf(*float_net->blob_by_name("c1")),
                           dy = test::DiffOf(*float_net->blob_by_name("c1"));
  const Layer& conv1 = *float_net->layer_by_name("conv1");
  const float* w = conv1.params()[0]->cpu_data();
  const float* bias = conv1.params()[1]->cpu_data();
  const auto at = [&](int channels, int n, int c, int yy, int xx) {
    return (((static_cast<size_t>(n) * (channels / 16) + c / 16) * height + yy) * width + xx) * 16 + c % 16;
  };
  const auto weight = [&](int k, int c, int yy, int xx) {
    return static_cast<double>(w[((k * inputs + c) * 3 + yy) * 3 + xx]);
  };
  int checked = 0, negative = 0;
  double largest = 0;
  for (int n = 0; n < num; ++n) {
    // Forward: the output through the ReLU (which moves no value further from another), rounded to bf16.
    const WinogradReference forward = WinogradOf(
        inputs, outputs, height, width, 1, height, width,
        [&](int c, int yy, int xx) { return x[at(inputs, n, c, yy, xx)]; }, weight);
    for (int k = 0; k < outputs; ++k)
      for (int yy = 0; yy < height; ++yy)
        for (int xx = 0; xx < width; ++xx) {
          const size_t e = (static_cast<size_t>(k) * height + yy) * width + xx;
          const double expected = std::max(0.0, forward.exact[e] + bias[k]);
          const float got = y[at(outputs, n, k, yy, xx)];
          ASSERT_NEAR(got, expected,
                      forward.bound[e] + (std::fabs(expected) + forward.bound[e]) * kBfloat16UnitRoundoff + 1e-6)
              << "output " << n << " " << k << " " << yy << " " << xx;
          largest = std::max(largest, std::fabs(got - expected));
          negative += forward.exact[e] + bias[k] < 0;
          ++checked;
        }
    // The input gradient: the output gradient (the ReLU's gating applied, rounded to bf16) through the kernels turned
    // half a turn, outputs and inputs swapped, pad 2 - 1.
    const WinogradReference backward = WinogradOf(
        outputs, inputs, height, width, 1, height, width,
        [&](int k, int yy, int xx) { return dy[at(outputs, n, k, yy, xx)]; },
        [&](int c, int k, int yy, int xx) { return weight(k, c, 2 - yy, 2 - xx); });
    for (int c = 0; c < inputs; ++c)
      for (int yy = 0; yy < height; ++yy)
        for (int xx = 0; xx < width; ++xx) {
          const size_t e = (static_cast<size_t>(c) * height + yy) * width + xx;
          const float got = dx[at(inputs, n, c, yy, xx)];
          ASSERT_NEAR(got, backward.exact[e], backward.bound[e] + 1e-6)
              << "input gradient " << n << " " << c << " " << yy << " " << xx;
          ++checked;
        }
  }
  EXPECT_EQ(checked, num * (outputs + inputs) * height * width);
  // The weights' gradient: the exact sum over both images of rounded(dy) rounded(x), within (2u + u^2) of its terms'
  // magnitudes through the transforms, |G^T| (sum over the tiles of |A dY A^T| |B^T x B|) |G| (and float32's sums);
  // the bias's, the sum of the rounded output gradient.
  const double bt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  const double a[4][2] = {{1, 0}, {1, 1}, {1, -1}, {0, -1}};
  const double g[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
  const auto rounded = [](float value) { return static_cast<double>(RoundToBfloat16(value)); };
  const int tiles_h = (height + 1) / 2, tiles_w = (width + 1) / 2;
  const size_t tiles = static_cast<size_t>(num) * tiles_h * tiles_w;
  // Every tile's transforms: V of the input, A dY A^T of the output gradient.
  std::vector<double> v(tiles * inputs * 16), gy(tiles * outputs * 16);
  for (int n = 0; n < num; ++n)
    for (int t = 0; t < tiles_h * tiles_w; ++t) {
      const int ty = t / tiles_w, tx = t % tiles_w;
      const size_t tile = static_cast<size_t>(n) * tiles_h * tiles_w + t;
      for (int c = 0; c < inputs; ++c)
        for (int e = 0; e < 16; ++e) {
          double sum = 0;
          for (int yy = 0; yy < 4; ++yy)
            for (int xx = 0; xx < 4; ++xx) {
              const int iy = 2 * ty - 1 + yy, ix = 2 * tx - 1 + xx;
              if (iy >= 0 && iy < height && ix >= 0 && ix < width)
                sum += bt[e / 4][yy] * rounded(x[at(inputs, n, c, iy, ix)]) * bt[e % 4][xx];
            }
          v[(tile * inputs + c) * 16 + e] = sum;
        }
      for (int k = 0; k < outputs; ++k)
        for (int e = 0; e < 16; ++e) {
          double sum = 0;
          for (int r = 0; r < 2; ++r)
            for (int q = 0; q < 2; ++q)
              if (2 * ty + r < height && 2 * tx + q < width)
                sum += a[e / 4][r] * rounded(dy[at(outputs, n, k, 2 * ty + r, 2 * tx + q)]) * a[e % 4][q];
          gy[(tile * outputs + k) * 16 + e] = sum;
        }
    }
  const float* dw = conv1.params()[0]->cpu_diff();
  const float* db = conv1.params()[1]->cpu_diff();
  const double roundings = 2 * kBfloat16UnitRoundoff + kBfloat16UnitRoundoff * kBfloat16UnitRoundoff;
  double largest_weight_error = 0;
  for (int k = 0; k < outputs; ++k) {
    double bias_sum = 0, bias_magnitude = 0;
    for (int n = 0; n < num; ++n)
      for (int yy = 0; yy < height; ++yy)
        for (int xx = 0; xx < width; ++xx) {
          bias_sum += rounded(dy[at(outputs, n, k, yy, xx)]);
          bias_magnitude += std::fabs(rounded(dy[at(outputs, n, k, yy, xx)]));
        }
    ASSERT_NEAR(db[k], bias_sum, 1e-5 * bias_magnitude + 1e-6) << "bias gradient " << k;
    for (int c = 0; c < inputs; ++c) {
      double magnitude[16] = {};
      for (size_t tile = 0; tile < tiles; ++tile)
        for (int e = 0; e < 16; ++e)
          magnitude[e] += std::fabs(gy[(tile * outputs + k) * 16 + e] * v[(tile * inputs + c) * 16 + e]);
      for (int yy = 0; yy < 3; ++yy)
        for (int xx = 0; xx < 3; ++xx) {
          double exact = 0, terms = 0;
          for (int n = 0; n < num; ++n)
            for (int oy = 0; oy < height; ++oy)
              for (int ox = 0; ox < width; ++ox) {
                const int iy = oy - 1 + yy, ix = ox - 1 + xx;
                if (iy >= 0 && iy < height && ix >= 0 && ix < width)
                  exact += rounded(dy[at(outputs, n, k, oy, ox)]) * rounded(x[at(inputs, n, c, iy, ix)]);
              }
          for (int e = 0; e < 16; ++e) terms += std::fabs(g[e / 4][yy] * g[e % 4][xx]) * magnitude[e];
          const float got = dw[((k * inputs + c) * 3 + yy) * 3 + xx];
          ASSERT_NEAR(got, exact, (roundings + 1e-5) * terms + 1e-6)
              << "weight gradient " << k << " " << c << " " << yy << " " << xx;
          largest_weight_error = std::max(largest_weight_error, std::fabs(got - exact));
        }
    }
  }
  EXPECT_GT(largest_weight_error, 1e-4);  // bf16's rounding shows in the weights' gradient too
  EXPECT_GT(negative, 0);    // the ReLU stopped some
  EXPECT_GT(largest, 1e-3);  // bf16's rounding shows: the rule ran in bf16

  // Its forward and input gradient compute each output on one thread: on one thread, the same bits.
  std::unique_ptr<Net> single;
  {
    OneThreadWhile one(true);
    single = build(true);
    EXPECT_EQ(CompareStepTops(single.get(), float_net.get(), false),
              (std::vector<std::string>{"data", "target", "c0", "c1", "c2", "loss"}));
    single->Backward();
  }
  const auto* single_diff = static_cast<const uint16_t*>(single->blob_by_name("c0")->cpu_diff_bytes());
  for (size_t i = 0; i < float_diff.size(); ++i) ASSERT_EQ(single_diff[i], held_diff[i]) << i;
}

// The MAX pooling's bf16 gradient rule (OneDnnPoolingLayer::computes_bf16_gradients) in training: in channel blocks its
// output gradient and its input gradient lie in bf16, and each input's gradient is the rounding of the float sum, in
// output order, of the rounded output gradients of the windows whose first maximum (of the bf16 values) it is,
// computed here from the net's own bf16 operands, each read before a later step may reuse its memory.
TEST(PrecisionTest, Bfloat16MaxPoolingGradientRoundsTheSumOfItsWindowsRoundedGradients) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  const std::string text = R"(
        state { phase: TRAIN }
    layer { name: 'data' type: 'Input' top: 'data' top: 'target'
            input_param { shape { dim: 2 dim: 16 dim: 13 dim: 13 } shape { dim: 2 dim: 16 dim: 6 dim: 6 } } }
    layer { name: 'conv0' type: 'Convolution' bottom: 'data' top: 'c0' convolution_param { num_output: 32
            kernel_size: 1 } }
    layer { name: 'pool' type: 'Pooling' bottom: 'c0' top: 'pooled' pooling_param { pool: MAX kernel_size: 3
            stride: 2 } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'pooled' top: 'c1' convolution_param { num_output: 16
            kernel_size: 1 } }
    layer { name: 'loss' type: 'EuclideanLoss' bottom: 'c1' bottom: 'target' top: 'loss' }
  )";
  const test::ScopedEnvironment blocks("CREMA_ONEDNN_ACTIVATIONS", "blocked");
  const auto net = Bfloat16TrainingNet(text, true, {"Convolution", "Pooling"}, [](Net& n) {
    uint64_t seed = 41;
    for (const auto& layer : n.layers())
      for (const auto& blob : layer->params()) test::FillGaussian(blob.get(), 0.f, 0.3f, seed++);
    for (Blob* input : n.input_blobs()) test::FillGaussian(input, 0.f, 1.f, seed++);
  });
  const auto* pool = dynamic_cast<const OneDnnPoolingLayer*>(net->layer_by_name("pool"));
  ASSERT_NE(pool, nullptr);
  EXPECT_TRUE(pool->computes_bf16_gradients());
  for (const char* name : {"c0", "pooled"}) {
    EXPECT_EQ(ElementTypeName(net->blob_by_name(name)->data_type()), ElementTypeName(ElementType::kBfloat16)) << name;
    EXPECT_EQ(ElementTypeName(net->blob_by_name(name)->diff_type()), ElementTypeName(ElementType::kBfloat16)) << name;
  }
  // The pooling's input as the forward left it (a later step may reuse its memory), then the gradients.
  const Blob& input = *net->blob_by_name("c0");
  const Blob& output = *net->blob_by_name("pooled");
  ASSERT_EQ(input.layout(), Layout::kChannelBlocks16);
  net->Forward();
  const auto bits = [](const void* data, int count) {
    const auto* from = static_cast<const uint16_t*>(data);
    return std::vector<uint16_t>(from, from + count);
  };
  const std::vector<uint16_t> x = bits(input.cpu_bytes(), input.count());
  // Backward step by step, the pooling's output gradient read before its step and its input gradient after.
  std::vector<uint16_t> dy, dx;
  for (size_t step = net->plan().size(); step-- > 0;) {
    const bool pooling = net->layer_names()[net->plan()[step].layer] == "pool";
    if (pooling) dy = bits(output.cpu_diff_bytes(), output.count());
    net->BackwardStep(step);
    if (pooling) dx = bits(input.cpu_diff_bytes(), input.count());
  }
  ASSERT_FALSE(dx.empty());
  const int num = 2, channels = 32, size = 13, pooled = 6;
  const auto at = [&](int n, int c, int plane, int position) {
    return ((static_cast<size_t>(n) * (channels / 16) + c / 16) * plane + position) * 16 + c % 16;
  };
  int nonzero = 0, shared = 0;
  for (int n = 0; n < num; ++n)
    for (int c = 0; c < channels; ++c) {
      std::vector<float> sums(size * size, 0.f);
      std::vector<int> takers(size * size, 0);
      for (int oy = 0; oy < pooled; ++oy)
        for (int ox = 0; ox < pooled; ++ox) {
          int best = (2 * oy) * size + 2 * ox;
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int i = (2 * oy + ky) * size + 2 * ox + kx;
              if (FromBfloat16(x[at(n, c, size * size, i)]) > FromBfloat16(x[at(n, c, size * size, best)])) best = i;
            }
          sums[best] += FromBfloat16(dy[at(n, c, pooled * pooled, oy * pooled + ox)]);
          ++takers[best];
        }
      for (int i = 0; i < size * size; ++i) {
        ASSERT_EQ(dx[at(n, c, size * size, i)], ToBfloat16(sums[i])) << n << " " << c << " " << i;
        nonzero += sums[i] != 0.f;
        shared += takers[i] > 1;
      }
    }
  EXPECT_GT(nonzero, 0);
  EXPECT_GT(shared, 0);  // some inputs are the maxima of two windows: their sums are rounded once
}

// GoogLeNet's inception modules trained in bf16: a module's branch outputs, its Concat, the Split's copies of the
// output and the MAX pooling after them form one group held in bf16 (every step reading it from outside computes in
// bf16), in channel blocks and channels-last. Forward, every step's top is the float-blob net's, rounded where it is
// bf16 (a maximum of rounded values is the rounded maximum); backward, the pooling's record of the maxima is the bf16
// values', whose ties may send a gradient elsewhere than the float run's, so the parameters' gradients are compared
// within a bound.
TEST(PrecisionTest, Bfloat16InceptionModulesTrainThroughSplitConcatAndPooling) {
  CREMA_SKIP_WITHOUT_BFLOAT16();
  const std::string branch = R"(
    layer { name: 'M/1x1' type: 'Convolution' bottom: 'IN' top: 'M/1x1' convolution_param { num_output: 16
            kernel_size: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'M/relu1' type: 'ReLU' bottom: 'M/1x1' top: 'M/1x1' }
    layer { name: 'M/3x3r' type: 'Convolution' bottom: 'IN' top: 'M/3x3r' convolution_param { num_output: 16
            kernel_size: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'M/relu2' type: 'ReLU' bottom: 'M/3x3r' top: 'M/3x3r' }
    layer { name: 'M/3x3' type: 'Convolution' bottom: 'M/3x3r' top: 'M/3x3' convolution_param { num_output: 32
            kernel_size: 3 pad: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'M/relu3' type: 'ReLU' bottom: 'M/3x3' top: 'M/3x3' }
    layer { name: 'M/pool' type: 'Pooling' bottom: 'IN' top: 'M/pool' pooling_param { pool: MAX kernel_size: 3
            stride: 1 pad: 1 } }
    layer { name: 'M/proj' type: 'Convolution' bottom: 'M/pool' top: 'M/proj' convolution_param { num_output: 16
            kernel_size: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'M/relu4' type: 'ReLU' bottom: 'M/proj' top: 'M/proj' }
    layer { name: 'M/out' type: 'Concat' bottom: 'M/1x1' bottom: 'M/3x3' bottom: 'M/proj' top: 'M/out' }
  )";
  const auto module = [&](const std::string& name, const std::string& in) {
    std::string text = branch;
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"'IN'", "'" + in + "'"}, {"M/", name + "/"}})
      for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
    return text;
  };
  const std::string text = R"(
    force_backward: true
    state { phase: TRAIN }
    layer { name: 'data' type: 'Input' top: 'data' top: 'target'
            input_param { shape { dim: 2 dim: 16 dim: 10 dim: 10 } shape { dim: 2 dim: 10 } } }
    layer { name: 'stem' type: 'Convolution' bottom: 'data' top: 'stem' convolution_param { num_output: 32
            kernel_size: 3 pad: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'stem_relu' type: 'ReLU' bottom: 'stem' top: 'stem' }
  )" + module("a", "stem") +
                           module("b", "a/out") +
                           R"(
    layer { name: 'fc' type: 'InnerProduct' bottom: 'b/out' top: 'fc' inner_product_param { num_output: 10
            weight_filler { type: 'xavier' } } }
    layer { name: 'loss' type: 'EuclideanLoss' bottom: 'fc' bottom: 'target' top: 'loss' }
  )";
  const auto build = [&](bool plan) {
    return Bfloat16TrainingNet(text, plan, {"Convolution", "Pooling", "Concat"}, [](Net& net) {
      uint64_t seed = 9;
      for (Blob* input : net.input_blobs()) test::FillGaussian(input, 0.f, 1.f, seed++);
    });
  };
  InEachLayout(build, [&](Net& net, Net& float_net) {
    // Module a's output group: its branches, its Concat, the Split's copies, b's pooling; the stem's output too (its
    // readers: a's convolutions and a's pooling, through the Split). b's output, which the InnerProduct reads, is
    // float.
    for (const char* name : {"stem", "a/1x1", "a/3x3", "a/proj", "a/out", "b/pool", "a/pool", "a/3x3r"})
      EXPECT_EQ(ElementTypeName(net.blob_by_name(name)->data_type()), ElementTypeName(ElementType::kBfloat16)) << name;
    for (const char* name : {"b/out", "b/1x1", "fc"}) EXPECT_TRUE(net.blob_by_name(name)->quantization().floats());
    // The branches' output gradients, which the Concats write and the convolutions read in bf16, are bf16.
    for (const char* name : {"a/1x1", "a/3x3", "a/proj", "b/1x1", "b/3x3", "b/proj", "a/3x3r"})
      EXPECT_EQ(ElementTypeName(net.blob_by_name(name)->diff_type()), ElementTypeName(ElementType::kBfloat16)) << name;
    size_t tops = 0;
    for (const PlanStep& step : net.plan()) tops += step.tops.size();
    EXPECT_EQ(CompareStepTops(&net, &float_net, true).size(), tops);  // every step's tops
    net.ClearParamDiffs();
    float_net.ClearParamDiffs();
    EXPECT_EQ(net.ForwardBackward(), float_net.ForwardBackward());
    for (const char* layer : {"stem", "a/1x1", "a/3x3r", "a/3x3", "a/proj", "b/1x1", "b/3x3", "b/proj", "fc"})
      for (size_t i = 0; i < net.layer_by_name(layer)->params().size(); ++i) {
        SCOPED_TRACE(std::string(layer) + " " + std::to_string(i));
        const std::vector<float> mine = test::DiffOf(*net.layer_by_name(layer)->params()[i]);
        const std::vector<float> theirs = test::DiffOf(*float_net.layer_by_name(layer)->params()[i]);
        double difference = 0, norm = 0;
        for (size_t k = 0; k < mine.size(); ++k) {
          difference += (mine[k] - theirs[k]) * static_cast<double>(mine[k] - theirs[k]);
          norm += theirs[k] * static_cast<double>(theirs[k]);
        }
        EXPECT_GT(norm, 0.0);
        // A tie moves one position's gradient to a neighbour of equal value: a small part of the whole.
        EXPECT_LE(std::sqrt(difference), 0.05 * std::sqrt(norm));
      }
    // Each Concat's backward, checked as it runs (the memory plan reuses its gradients' memory afterwards): a branch's
    // bf16 gradient is its channels of the output's float gradient, rounded.
    net.Forward();
    int concats = 0;
    for (size_t step = net.plan().size(); step-- > 0;) {
      net.BackwardStep(step);
      const PlanStep& join = net.plan()[step];
      if (std::string(net.layers()[join.layer]->type()) != "Concat") continue;
      ++concats;
      const Blob& out = *net.blobs()[join.tops[0]];
      ASSERT_EQ(ElementTypeName(out.diff_type()), ElementTypeName(ElementType::kFloat32));
      const std::vector<float> joined = PlainDiffs(out);
      const int positions = out.count(2);
      int first = 0;
      for (int id : join.bottoms) {
        const Blob& part = *net.blobs()[id];
        SCOPED_TRACE(net.blob_names()[id]);
        EXPECT_EQ(ElementTypeName(part.diff_type()), ElementTypeName(ElementType::kBfloat16));
        const std::vector<float> gradient = PlainDiffs(part);
        for (int n = 0; n < part.shape(0); ++n)
          for (int c = 0; c < part.shape(1); ++c)
            for (int p = 0; p < positions; ++p) {
              const float whole = joined[(static_cast<size_t>(n) * out.shape(1) + first + c) * positions + p];
              ASSERT_EQ(gradient[(static_cast<size_t>(n) * part.shape(1) + c) * positions + p],
                        FromBfloat16(ToBfloat16(whole)))
                  << "at " << n << ", " << c << ", " << p;
            }
        first += part.shape(1);
      }
    }
    EXPECT_EQ(concats, 2);
  });
}

}  // namespace
}  // namespace crema

#endif  // CREMA_USE_ONEDNN
