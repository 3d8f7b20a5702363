#include "core/random.hpp"

#include <cmath>
#include <sstream>

#include "core/common.hpp"

namespace crema {

uint64_t RandomStream::DeriveSeed(uint64_t base_seed, const std::string& name) {
  // FNV-1a over the name, mixed with the base seed by a SplitMix64 finaliser.
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  uint64_t z = base_seed + 0x9e3779b97f4a7c15ull * (hash | 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) & 0xffffffffull;
}

float RandomStream::Uniform(float low, float high) {
  // 24 random bits give every float in [0, 1) on a uniform grid.
  const float unit = static_cast<float>(NextUint32() >> 8) * (1.0f / 16777216.0f);
  return low + (high - low) * unit;
}

uint32_t RandomStream::UniformInt(uint32_t n) {
  if (n <= 1) return 0;
  // Rejection sampling avoids the modulo bias.
  const uint32_t limit = UINT32_MAX - UINT32_MAX % n;
  uint32_t value;
  do {
    value = NextUint32();
  } while (value >= limit);
  return value % n;
}

float RandomStream::Gaussian(float mean, float stddev) {
  // Box-Muller without caching the second value, so the engine holds the whole state.
  double u1 = (static_cast<double>(NextUint32()) + 1.0) / 4294967297.0;
  double u2 = static_cast<double>(NextUint32()) / 4294967296.0;
  double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  return static_cast<float>(mean + stddev * z);
}

std::string RandomStream::Save() const {
  std::ostringstream out;
  out << engine_;
  return out.str();
}

void RandomStream::Restore(const std::string& state) {
  std::istringstream in(state);
  std::mt19937 engine;
  in >> engine;
  CREMA_CHECK(!in.fail()) << "cannot restore a random stream: the saved state is malformed";
  engine_ = engine;
}

}  // namespace crema
