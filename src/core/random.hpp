// Random streams whose whole state can be saved and restored, so that a resumed run repeats the
// uninterrupted one exactly. The distributions are crema's own (not <random>'s, whose implementations
// differ between libraries and may cache values outside the engine state).
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace crema {

class RandomStream {
 public:
  explicit RandomStream(uint64_t seed = 5489u) : engine_(seed) {}
  // A seed derived from a base seed and a name, so that every layer gets its own reproducible stream.
  static uint64_t DeriveSeed(uint64_t base_seed, const std::string& name);

  void Seed(uint64_t seed) { engine_.seed(seed); }
  uint32_t NextUint32() { return static_cast<uint32_t>(engine_()); }
  // Uniform in [low, high).
  float Uniform(float low, float high);
  // Uniform integer in [0, n).
  uint32_t UniformInt(uint32_t n);
  float Gaussian(float mean, float stddev);
  bool Bernoulli(float p) { return Uniform(0.f, 1.f) < p; }

  std::string Save() const;
  // Throws crema::Error when `state` was not written by Save.
  void Restore(const std::string& state);

 private:
  std::mt19937 engine_;
};

}  // namespace crema
