// The per-element rules of the solvers' updates, each written once as a functor that runs on the host
// (OpenMP) and on the GPU (update_rules.cu compiles their kernels): for_each_element(context, n, rule).
// A new update rule adds its functor here and one line in update_rules.cu (its kernel after the prologue:
// CREMA_GPU_ELEMENTWISE(crema::AfterPrologue<crema::NewRule>)).
//
// Each rule reads the regularised gradient from `diff`, advances its history and leaves in `diff` the step the
// solver subtracts; `rate` is the parameter's own rate (the solver's rate times its lr_mult). The arithmetic
// follows Caffe's order of operations, so float results stay close to Caffe's own.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>

#include "core/elementwise.hpp"

namespace crema {

// The gradient averaged over iter_size passes: diff *= factor (one product, as BLAS's scal).
struct ScaleBy {
  float* diff;
  float factor;
  CREMA_HOST_DEVICE void operator()(int i) const { diff[i] *= factor; }
};

// L2 weight decay: diff += decay * data.
struct L2Decay {
  const float* data;
  float* diff;
  float decay;
  CREMA_HOST_DEVICE void operator()(int i) const { diff[i] += decay * data[i]; }
};

// L1 weight decay: diff += decay * sign(data).
struct L1Decay {
  const float* data;
  float* diff;
  float decay;
  CREMA_HOST_DEVICE void operator()(int i) const {
    diff[i] += decay * static_cast<float>((data[i] > 0.f) - (data[i] < 0.f));
  }
};

// What a parameter's gradient goes through before the solver's rule reads it, value by value: the average over
// iter_size passes (where iter_size is not 1), then the L2 or L1 weight decay (where it is not 0), each written back
// to the gradient as a pass over the whole blob would write it. The choices are the same for every value, so a
// vectorised loop takes them once.
struct GradientPrologue {
  enum Decay { kNoDecay, kL2, kL1 };
  bool averages = false;
  ScaleBy average{nullptr, 1.f};
  Decay decays = kNoDecay;
  L2Decay l2{nullptr, nullptr, 0.f};
  L1Decay l1{nullptr, nullptr, 0.f};
  CREMA_HOST_DEVICE void operator()(int i) const {
    if (averages) average(i);
    if (decays == kL2) {
      l2(i);
    } else if (decays == kL1) {
      l1(i);
    }
  }
};

// A solver's rule after the prologue, value by value: the whole update of a value but the step (data -= diff).
template <typename Rule>
struct AfterPrologue {
  GradientPrologue prologue;
  Rule rule;
  CREMA_HOST_DEVICE void operator()(int i) const {
    prologue(i);
    rule(i);
  }
};

// One parameter's update rule (a solver's, UpdateRuleFor, after the prologue the solver gives it: set_prologue), over
// all its values on the solver's device (Run: one pass, one kernel on a GPU) or over a range of them on the host
// (RunRange: the fused update's stretches, Solver::ApplyUpdate). The same functor either way, so the same arithmetic
// value by value.
class UpdateRule {
 public:
  virtual ~UpdateRule() = default;
  virtual void Run(Context& context, int count) const = 0;
  virtual void RunRange(int64_t begin, int64_t end) const = 0;
  void set_prologue(const GradientPrologue& prologue) { prologue_ = prologue; }

 protected:
  GradientPrologue prologue_;
};

template <typename Rule>
class UpdateRuleOf final : public UpdateRule {
 public:
  explicit UpdateRuleOf(const Rule& rule) : rule_(rule) {}
  void Run(Context& context, int count) const override {
    for_each_element(context, count, AfterPrologue<Rule>{prologue_, rule_});
  }
  // Vectorised: a rule reads and writes value i of each of its arrays alone, and the arrays are distinct blobs (the
  // compiler cannot know that, and kept the loop scalar: the whole update took as long in one pass as in four). The
  // functor is copied into registers: stores through its pointers cannot change it.
  void RunRange(int64_t begin, int64_t end) const override {
    const AfterPrologue<Rule> update{prologue_, rule_};
    const int first = static_cast<int>(begin), last = static_cast<int>(end);
#pragma omp simd
    for (int i = first; i < last; ++i) update(i);
  }

 private:
  Rule rule_;
};

template <typename Rule>
std::unique_ptr<UpdateRule> MakeUpdateRule(const Rule& rule) {
  return std::make_unique<UpdateRuleOf<Rule>>(rule);
}

// SGD with momentum: velocity = momentum * velocity + rate * diff; the step to subtract (diff) = velocity.
struct SgdMomentum {
  float* velocity;
  float* diff;
  float momentum;
  float rate;
  CREMA_HOST_DEVICE void operator()(int i) const {
    velocity[i] = momentum * velocity[i] + rate * diff[i];
    diff[i] = velocity[i];
  }
};

// Nesterov's accelerated gradient in Caffe's form: the velocity advances as in SGD, and the step looks ahead
// along it: step = (1 + momentum) * velocity - momentum * previous velocity.
struct NesterovUpdate {
  float* velocity;
  float* diff;
  float momentum;
  float rate;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float previous = velocity[i];
    velocity[i] = momentum * previous + rate * diff[i];
    diff[i] = (1.f + momentum) * velocity[i] - momentum * previous;
  }
};

// AdaGrad: the history sums every squared gradient; step = rate * g / (sqrt(history) + delta).
struct AdaGradUpdate {
  float* history;
  float* diff;
  float delta;
  float rate;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float gradient = diff[i];
    history[i] += gradient * gradient;
    diff[i] = rate * (gradient / (sqrtf(history[i]) + delta));
  }
};

// RMSProp: the history is a decaying mean of squared gradients,
// history = decay * history + (1 - decay) * g^2; step = rate * g / (sqrt(history) + delta).
struct RMSPropUpdate {
  float* history;
  float* diff;
  float decay;
  float delta;
  float rate;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float gradient = diff[i];
    history[i] = (1.f - decay) * (gradient * gradient) + decay * history[i];
    diff[i] = rate * (gradient / (sqrtf(history[i]) + delta));
  }
};

// AdaDelta: decaying means of squared gradients and of squared updates (decay = the solver's momentum); the
// update is the gradient scaled by the ratio of their roots, so its unit is the weights' own:
// update = g * sqrt((update_history + delta) / (gradient_history + delta)); step = rate * update.
struct AdaDeltaUpdate {
  float* gradient_history;
  float* update_history;
  float* diff;
  float decay;
  float delta;
  float rate;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float gradient = diff[i];
    gradient_history[i] = (1.f - decay) * (gradient * gradient) + decay * gradient_history[i];
    const float update = gradient * sqrtf((update_history[i] + delta) / (gradient_history[i] + delta));
    update_history[i] = (1.f - decay) * (update * update) + decay * update_history[i];
    diff[i] = rate * update;
  }
};

// Adam: decaying means of the gradient (beta1) and of its square (beta2);
// step = corrected_rate * mean / (sqrt(mean_square) + delta), where the caller folds Adam's bias correction
// sqrt(1 - beta2^t) / (1 - beta1^t), t = iteration + 1, into corrected_rate.
struct AdamUpdate {
  float* mean;
  float* mean_square;
  float* diff;
  float beta1;
  float beta2;
  float delta;
  float corrected_rate;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float gradient = diff[i];
    mean[i] = (1.f - beta1) * gradient + beta1 * mean[i];
    mean_square[i] = (1.f - beta2) * (gradient * gradient) + beta2 * mean_square[i];
    diff[i] = corrected_rate * (mean[i] / (sqrtf(mean_square[i]) + delta));
  }
};

}  // namespace crema
