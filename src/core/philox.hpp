// Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011): a
// counter-based generator. Value i of a stream is a pure function of (key, i), so a rule can draw its own
// numbers element by element, on the CPU's threads or the GPU's, and both devices draw the same ones. Dropout
// draws its masks so: one 64-bit key per pass from the layer's saved random stream, then one value per unit.
#pragma once

#include <cstdint>

#include "core/elementwise.hpp"

namespace crema {

struct Philox4x32 {
  uint32_t v[4];
};

CREMA_HOST_DEVICE inline Philox4x32 Philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53u, kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // the golden ratio and sqrt(3) - 1, in 32 bits
  for (int round = 0; round < 10; ++round) {
    const uint64_t product0 = static_cast<uint64_t>(kMultiplier0) * counter.v[0];
    const uint64_t product1 = static_cast<uint64_t>(kMultiplier1) * counter.v[2];
    const uint32_t high0 = static_cast<uint32_t>(product0 >> 32), low0 = static_cast<uint32_t>(product0);
    const uint32_t high1 = static_cast<uint32_t>(product1 >> 32), low1 = static_cast<uint32_t>(product1);
    counter = {{high1 ^ counter.v[1] ^ key0, low1, high0 ^ counter.v[3] ^ key1, low0}};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

// A uniform float in [0, 1) from value `index` of the stream `key`: 24 random bits, so every value is exact.
CREMA_HOST_DEVICE inline float PhiloxUniform(uint64_t key, uint32_t index) {
  const Philox4x32 bits =
      Philox4x32_10({{index, 0u, 0u, 0u}}, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  return static_cast<float>(bits.v[0] >> 8) * (1.f / 16777216.f);
}

}  // namespace crema
