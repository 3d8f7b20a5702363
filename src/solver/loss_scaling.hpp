// Dynamic loss scaling (SolverParameter.loss_scaling): float16 keeps values from about 6e-8 (2^-24) to 65504, and small
// gradients underflow to zero in it. Backward therefore starts from the losses times a scale S (Net::set_loss_scale),
// which lifts every gradient by S; the solver divides them by S before the update. Where a gradient overflowed (an
// infinity or a NaN), the iteration updates nothing and S halves; after `growth_interval` iterations in a row without
// one, S doubles, so that it stays near the largest scale that does not overflow. S is a power of two, so that
// scaling and unscaling change no bits of a float32 gradient that neither overflows nor underflows.
#pragma once

#include <string>

namespace crema {

class LossScaling {
 public:
  // `initial` is rounded down to a power of two (at least 1); `growth_interval` iterations without an overflow double
  // it.
  LossScaling(float initial, int growth_interval);

  float scale() const { return scale_; }
  // Iterations since the scale last changed, each without an overflow.
  int steady_iterations() const { return steady_; }
  // Continues from a snapshot's values (SolverState.loss_scale, loss_scale_steady_iterations); throws naming `where`
  // when they are not a positive power of two and a count.
  void Restore(float scale, int steady_iterations, const std::string& where);

  // After iteration `iteration`'s backward, whose scaled gradients were all finite or not: whether to update. An
  // overflow halves the scale (never below 2^-24, where float16 gradients are gone anyway) and is logged with the
  // iteration; the growth_interval-th finite iteration in a row doubles it (up to 2^24), also logged.
  bool AfterBackward(bool finite, int iteration);

 private:
  float scale_;
  int growth_interval_;
  int steady_ = 0;
};

}  // namespace crema
