#include "solver/loss_scaling.hpp"

#include <glog/logging.h>

#include <cmath>

#include "core/common.hpp"

namespace crema {

namespace {

constexpr float kSmallest = 1.f / (1 << 24), kLargest = static_cast<float>(1 << 24);

bool PowerOfTwo(float value) {
  int exponent = 0;
  return std::isfinite(value) && value > 0 && std::frexp(value, &exponent) == 0.5f;
}

}  // namespace

LossScaling::LossScaling(float initial, int growth_interval) : growth_interval_(growth_interval) {
  CREMA_CHECK(std::isfinite(initial) && initial > 0)
      << "initial_loss_scale: " << initial << " is not a positive number";
  CREMA_CHECK(growth_interval > 0) << "loss_scale_growth_interval: " << growth_interval
                                   << " is not a positive number of iterations";
  int exponent = 0;
  std::frexp(initial, &exponent);  // initial = m * 2^exponent, m in [0.5, 1)
  scale_ = std::fmin(kLargest, std::fmax(1.f, std::ldexp(1.f, exponent - 1)));
}

void LossScaling::Restore(float scale, int steady_iterations, const std::string& where) {
  CREMA_CHECK(PowerOfTwo(scale) && scale >= kSmallest && scale <= kLargest)
      << where << ": loss_scale " << scale << " is not a power of two from 2^-24 to 2^24";
  CREMA_CHECK(steady_iterations >= 0) << where << ": loss_scale_steady_iterations " << steady_iterations
                                      << " is negative";
  scale_ = scale;
  steady_ = steady_iterations;
}

bool LossScaling::AfterBackward(bool finite, int iteration) {
  if (!finite) {
    const float halved = std::fmax(kSmallest, scale_ / 2);
    LOG(INFO) << "Iteration " << iteration << ": the gradients overflowed at loss scale " << scale_
              << "; no update, the scale is now " << halved;
    scale_ = halved;
    steady_ = 0;
    return false;
  }
  if (++steady_ >= growth_interval_) {
    steady_ = 0;
    if (scale_ < kLargest) {
      scale_ *= 2;
      LOG(INFO) << "Iteration " << iteration << ": " << growth_interval_
                << " iterations without an overflow; loss scale raised to " << scale_;
    }
  }
  return true;
}

}  // namespace crema
