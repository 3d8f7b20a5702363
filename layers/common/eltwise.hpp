// Eltwise: combines bottoms of one shape element by element into a top of that shape.
//   SUM:  y = sum_i coeff_i * x_i (coeff 1 for every bottom unless given); dx_i = coeff_i * dy.
//   PROD: y = prod_i x_i; dx_i = dy * prod_{j != i} x_j when stable_prod_grad (the default), else dy * y / x_i
//         (cheaper, but infinite or NaN where x_i is 0).
//   MAX:  y = max_i x_i; the index of the bottom that won each element is kept in the internal blob
//         "<layer>.argmax", and backward sends dy to that bottom only (0 to the others).
//
// Params (eltwise_param): operation (PROD, SUM (default), MAX), coeff (none, or one per bottom; an error with
// PROD and, as in Caffe, accepted but unused with MAX), stable_prod_grad (default true).
// Bottoms -> tops: 2..n -> 1.
// Runs on the CPU (a loop per bottom) and the GPU (the rules below; eltwise.cu compiles them).
// Differs from Caffe: MAX breaks ties towards the earliest bottom everywhere; Caffe's CPU code gives a tie
// between bottoms 0 and 1 to bottom 1 (later ties go to the earlier bottom in both).
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// One pass of forward reads up to kEltwiseGroup bottoms (their pointers travel in the kernel's arguments), so
// that two or three bottoms cost one read of each and one write of the top; more bottoms are taken in groups,
// each later group combining onto the top. Every combination runs in bottom order, the CPU's and the GPU's
// alike. The rules' loops over a group run kEltwiseGroup times and stop early, so that they unroll and read the
// pointer arrays at indices known at compile time: a kernel that indexes its arguments by a runtime value first
// copies them to slow local memory.
constexpr int kEltwiseGroup = 8;

struct EltwiseForwardRule {
  EltwiseParameter::EltwiseOp op;
  int bottoms;  // entries used in x and coeff
  int first;    // the index among all bottoms of x[0] (MAX's winner)
  bool onto;    // whether y (and winner) hold the earlier groups' result
  const float* x[kEltwiseGroup];
  float coeff[kEltwiseGroup];  // SUM
  float* y;
  float* winner;  // MAX: the index of the bottom that won
  // SUM with a ReLU fused for training (EltwiseLayer::AbsorbReLU), on the last group's pass: value > 0 ? value :
  // slope * value, as the CPU's fused loops.
  bool rectify = false;
  float slope = 0.f;
  CREMA_HOST_DEVICE void operator()(int k) const {
    float value, won = static_cast<float>(first);
    if (onto) {
      value = y[k];
      if (op == EltwiseParameter::MAX) won = winner[k];
    } else {
      value = op == EltwiseParameter::SUM ? coeff[0] * x[0][k] : x[0][k];
    }
    for (int b = 0; b < kEltwiseGroup; ++b) {
      if (b >= bottoms) break;
      if (b == 0 && !onto) continue;  // x[0] started the value
      const float v = x[b][k];
      if (op == EltwiseParameter::SUM) {
        value += coeff[b] * v;
      } else if (op == EltwiseParameter::PROD) {
        value *= v;
      } else if (v > value) {  // MAX: strictly greater, so a tie stays with the earlier bottom
        value = v;
        won = static_cast<float>(first + b);
      }
    }
    if (rectify) value = value > 0.f ? value : slope * value;
    y[k] = value;
    if (op == EltwiseParameter::MAX) winner[k] = won;
  }
};

// A SUM with a ReLU fused in GPU code computing in float16 or bf16 (EltwiseLayer::SumsInHalf), in one pass over at most
// kEltwiseGroup bottoms: each operand as its 16-bit value (as it lies, or a float rounded to it; float16, or bfloat16
// where `bfloat16`), the sum of coeff * operand in float in bottom order, the ReLU, and the top in 16 bits (rounded)
// or in floats, as it lies.
struct EltwiseHalfSumRule {
  int bottoms;
  const void* x[kEltwiseGroup];
  bool x_half[kEltwiseGroup];
  float coeff[kEltwiseGroup];
  void* y;
  bool y_half;
  bool bfloat16;
  float slope;
  CREMA_HOST_DEVICE void operator()(int k) const {
    float value = 0.f;
    for (int b = 0; b < kEltwiseGroup; ++b) {
      if (b >= bottoms) break;
      const float v = x_half[b] ? FromHalf(bfloat16, static_cast<const uint16_t*>(x[b])[k])
                                : RoundedToHalf(bfloat16, static_cast<const float*>(x[b])[k]);
      value = b == 0 ? coeff[0] * v : value + coeff[b] * v;
    }
    value = value > 0.f ? value : slope * value;
    if (y_half)
      static_cast<uint16_t*>(y)[k] = ToHalf(bfloat16, value);
    else
      static_cast<float*>(y)[k] = value;
  }
};

// One bottom's gradient for SUM (coeff * dy; with a ReLU fused, `rectified`, coeff times the ReLU's gradient from the
// output's sign, y > 0 ? dy : slope * dy, as the CPU's fused loops), MAX (dy where this bottom won) and PROD by
// division (dy * y / x).
struct EltwiseBackwardRule {
  EltwiseParameter::EltwiseOp op;
  float coeff;  // SUM
  float me;     // MAX: this bottom's index
  const float* dy;
  const float* y;       // PROD; SUM where rectified
  const float* x;       // PROD: this bottom's values
  const float* winner;  // MAX
  float* dx;
  bool rectified = false;
  float slope = 0.f;
  const uint16_t* y16 = nullptr;  // SUM where rectified: the output in 16 bits (y unused; bfloat16 or float16)
  bool bfloat16 = false;
  CREMA_HOST_DEVICE void operator()(int k) const {
    if (op == EltwiseParameter::SUM) {
      const bool positive = rectified && (y16 != nullptr ? FromHalf(bfloat16, y16[k]) > 0.f : y[k] > 0.f);
      dx[k] = rectified ? coeff * (positive ? dy[k] : slope * dy[k]) : coeff * dy[k];
    } else if (op == EltwiseParameter::MAX) {
      dx[k] = winner[k] == me ? dy[k] : 0.f;
    } else {
      dx[k] = dy[k] * y[k] / x[k];
    }
  }
};

// PROD's stable gradient of one bottom, dy times every other bottom, multiplied in bottom order: a pass takes
// a group of the others onto `from` (dy for the first group, dx itself after).
struct EltwiseProductGradientRule {
  int others;  // entries used in x
  const float* x[kEltwiseGroup];
  const float* from;
  float* dx;
  CREMA_HOST_DEVICE void operator()(int k) const {
    float value = from[k];
    for (int b = 0; b < kEltwiseGroup; ++b) {
      if (b >= others) break;
      value *= x[b][k];
    }
    dx[k] = value;
  }
};

class EltwiseLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Eltwise"; }
  // SUM's backward scales the top's gradient and MAX's routes it by the internal argmax: neither reads data;
  // PROD's reads the inputs and the product, and a SUM with a ReLU fused the sign of its output.
  bool BackwardReadsBottom(int) const override { return param_.eltwise_param().operation() == EltwiseParameter::PROD; }
  bool BackwardReadsTop(int) const override {
    return param_.eltwise_param().operation() == EltwiseParameter::PROD || relu_fused_;
  }
  // SUM of two bottoms with coefficients 1 (none given): what a producer of one of them may fuse (net/fold.hpp).
  bool ForwardIsSumOfTwo() const override;
  int MinBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // Training's fusion on the CPU (net/fuse.hpp): a SUM also runs the ReLU of slope `slope` (>= 0) in place after it,
  // whose step goes: forward writes ReLU(sum) in one pass over the bottoms, backward sends dy where the output is
  // positive (slope * dy elsewhere, ReLU's rule) times each coefficient to every bottom in one pass. The bottoms and
  // the top share one layout (an element's index is the same in each).
  void AbsorbReLU(float slope);
  bool absorbs_relu() const { return relu_fused_; }

  // Such a fused SUM in a layer computing in bf16 (Layer::requested_precision: the net's, or its own `precision`; on a
  // CPU with oneDNN's bf16 kernels, as the convolutions) adds
  // its operands rounded to bf16, as the convolutions reading its output would round it and as each operand lies when
  // planned in bf16 (a ResNet unit's output, its shortcut and its branch): it reads and writes bf16 blobs where the
  // plan keeps them so (plan_element_types), the same bits either way, and backward reads its output's signs from them.
  // `precision: FLOAT32` on the Eltwise keeps the residual sums in floats. Its backward then reads the output's
  // gradient rounded to bf16 (as it lies in bf16, or rounded from floats) and writes each operand's gradient, its
  // coefficient times that value where the output is positive (slope times it elsewhere), in floats or rounded to bf16
  // where the plan keeps it so.
  bool SumsInBfloat16() const;
  // Such a fused SUM in GPU code computing in float16 or bf16 (Layer::GpuCodePrecision), of at most kEltwiseGroup
  // bottoms, adds its operands rounded to that type too (EltwiseHalfSumRule), as the convolutions reading its output
  // round it: it reads and writes 16-bit blobs where the plan keeps them so, the same bits either way. Backward reads
  // the output's signs (from its 16 bits where it lies so, as a fused ReLU's backward does) and writes float gradients.
  bool SumsInHalf() const;
  Quantization ReadsQuantized(int bottom) const override;
  bool WritesQuantized(int top, ElementType type) const override;
  bool ReadsTopDiffInBfloat16(int, const std::vector<bool>&) const override { return SumsInBfloat16(); }
  bool WritesBottomDiffInBfloat16(int) const override { return SumsInBfloat16(); }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 protected:
  EltwiseParameter::EltwiseOp op_ = EltwiseParameter::SUM;
  std::vector<float> coeffs_;
  bool relu_fused_ = false;  // AbsorbReLU's
  float relu_slope_ = 0.f;
  // The fused SUM and ReLU's loops, over the threads.
  void SumReLUForward(const std::vector<Blob*>& bottom, Blob* top) const;
  void SumReLUBackward(const Blob& top, const std::vector<bool>& propagate_down,
                       const std::vector<Blob*>& bottom) const;
  // Its backward by the bf16 rule (SumsInBfloat16), with the output, its gradient and each operand's gradient in
  // floats or bf16.
  void RoundedSumReLUBackward(const Blob& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) const;

 private:
  Blob* argmax_ = nullptr;  // MAX only: the winning bottom of each element
};

}  // namespace crema
