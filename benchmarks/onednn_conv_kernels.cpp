// oneDNN's own convolution kernels, each pass alone (forward, input gradient, weight gradient), on the shapes that
// dominate ResNet-50 (batch 8) and GoogLeNet (batch 10): float32 direct, float32 Winograd F(4x4, 3x3) where oneDNN
// has it (3 x 3, stride 1: the kernels crema's float32 training takes from 1024 output positions on), and bf16
// direct (the only bf16 kernels oneDNN 2.x has). What a bf16 pass can gain over crema's float32 one is bounded by the
// ratio of the last column to the best float32 one (docs/performance.md, "bf16 against float32: the kernels' bound").
// Blocked layout (nChw16c), the tensors filled, so that no pass reads untouched pages. Prints a Markdown table.
// Built by hand against the oneDNN the build uses (not part of the build):
//
//   g++ -O2 -o /tmp/conv_kernels benchmarks/onednn_conv_kernels.cpp -ldnnl && /tmp/conv_kernels [repetitions]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Type = memory::data_type;

struct Shape {
  const char* where;
  int batch, inputs, outputs, size, kernel;
};

// ResNet-50's 3 x 3 and 1 x 1 convolutions of stride 1 at each of its four sizes, and GoogLeNet's largest.
const Shape kShapes[] = {
    {"res2 3x3", 8, 64, 64, 56, 3},
    {"res3 3x3", 8, 128, 128, 28, 3},
    {"res4 3x3", 8, 256, 256, 14, 3},
    {"res5 3x3", 8, 512, 512, 7, 3},
    {"res2 1x1 expand", 8, 64, 256, 56, 1},
    {"res2 1x1 reduce", 8, 256, 64, 56, 1},
    {"res4 1x1 expand", 8, 256, 1024, 14, 1},
    {"GoogLeNet conv2/3x3", 10, 64, 192, 56, 3},
    {"GoogLeNet 3b/3x3", 10, 128, 192, 28, 3},
};

double Now() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

memory Filled(const memory::desc& desc, const dnnl::engine& engine) {
  memory m(desc, engine);
  std::memset(m.get_data_handle(), 0x3c, desc.get_size());  // 0x3c3c: about 0.0115 in bf16, 0.0115 in float
  return m;
}

// Mean milliseconds of `repetitions` calls after one untimed call.
double Time(const dnnl::primitive& primitive, const std::unordered_map<int, memory>& args, dnnl::stream& stream,
            int repetitions) {
  primitive.execute(stream, args);
  stream.wait();
  const double start = Now();
  for (int i = 0; i < repetitions; ++i) primitive.execute(stream, args);
  stream.wait();
  return (Now() - start) / repetitions;
}

struct Passes {
  double forward = 0, input_gradient = 0, weight_gradient = 0;
  double total() const { return forward + input_gradient + weight_gradient; }
};

// The three passes of one convolution in `type` by `algorithm`; false where oneDNN has no such kernels.
bool Measure(const Shape& s, Type type, dnnl::algorithm algorithm, int repetitions, Passes* out) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const int pad = s.kernel / 2;
  const memory::dims strides = {1, 1}, padding = {pad, pad};
  const memory::desc src({s.batch, s.inputs, s.size, s.size}, type, Tag::nChw16c);
  const memory::desc dst({s.batch, s.outputs, s.size, s.size}, type, Tag::nChw16c);
  const memory::desc weights({s.outputs, s.inputs, s.kernel, s.kernel}, type, Tag::any);
  const memory::desc weight_gradient({s.outputs, s.inputs, s.kernel, s.kernel}, Type::f32, Tag::any);
  const memory::desc bias({s.outputs}, Type::f32, Tag::x);
  try {
    const dnnl::convolution_forward::primitive_desc forward(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm, src, weights, bias, dst, strides,
                                        padding, padding),
        engine);
    const dnnl::convolution_backward_data::primitive_desc data(
        dnnl::convolution_backward_data::desc(algorithm, src, weights, dst, strides, padding, padding), engine,
        forward);
    const dnnl::convolution_backward_weights::primitive_desc gradient(
        dnnl::convolution_backward_weights::desc(algorithm, src, weight_gradient, bias, dst, strides, padding, padding),
        engine, forward);
    const memory x = Filled(src, engine), y = Filled(dst, engine), b = Filled(bias, engine);
    const memory w = Filled(forward.weights_desc(), engine), w_data = Filled(data.weights_desc(), engine);
    const memory dx = Filled(src, engine), dw = Filled(gradient.diff_weights_desc(), engine), db = Filled(bias, engine);
    out->forward =
        Time(dnnl::convolution_forward(forward),
             {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, y}}, stream, repetitions);
    out->input_gradient =
        Time(dnnl::convolution_backward_data(data),
             {{DNNL_ARG_DIFF_DST, y}, {DNNL_ARG_WEIGHTS, w_data}, {DNNL_ARG_DIFF_SRC, dx}}, stream, repetitions);
    out->weight_gradient =
        Time(dnnl::convolution_backward_weights(gradient),
             {{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_DST, y}, {DNNL_ARG_DIFF_WEIGHTS, dw}, {DNNL_ARG_DIFF_BIAS, db}}, stream,
             repetitions);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

std::string Cell(bool measured, const Passes& p) {
  if (!measured) return "-";
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f / %.2f / %.2f", p.forward, p.input_gradient, p.weight_gradient);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const int repetitions = argc > 1 ? std::atoi(argv[1]) : 10;
  std::printf("oneDNN %d.%d.%d, %d repetitions a pass; forward / input gradient / weight gradient in ms\n\n",
              dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch, repetitions);
  std::printf(
      "| convolution (batch, channels, size) | float32 direct | float32 Winograd | bf16 direct | "
      "bf16 vs float32 direct | bf16 vs float32's best |\n|---|---|---|---|---|---|\n");
  double best_float = 0, bf16_total = 0;
  for (const Shape& s : kShapes) {
    Passes direct, winograd, half;
    const bool has_direct = Measure(s, Type::f32, dnnl::algorithm::convolution_direct, repetitions, &direct);
    const bool has_winograd =
        s.kernel == 3 && Measure(s, Type::f32, dnnl::algorithm::convolution_winograd, repetitions, &winograd);
    const bool has_half = Measure(s, Type::bf16, dnnl::algorithm::convolution_direct, repetitions, &half);
    const double best = has_winograd && winograd.total() < direct.total() ? winograd.total() : direct.total();
    if (has_direct && has_half) {
      best_float += best;
      bf16_total += half.total();
    }
    char name[96];
    std::snprintf(name, sizeof(name), "%s (%d, %d -> %d, %dx%d)", s.where, s.batch, s.inputs, s.outputs, s.size,
                  s.size);
    std::printf("| %s | %s | %s | %s | %.2fx | %.2fx |\n", name, Cell(has_direct, direct).c_str(),
                Cell(has_winograd, winograd).c_str(), Cell(has_half, half).c_str(),
                has_half ? direct.total() / half.total() : 0.0, has_half ? best / half.total() : 0.0);
  }
  std::printf("\nAll shapes, three passes: float32's best %.1f ms, bf16 %.1f ms: %.2fx\n", best_float, bf16_total,
              best_float / bf16_total);
  return 0;
}
