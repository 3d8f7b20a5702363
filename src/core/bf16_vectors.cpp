#include "core/bf16_vectors.hpp"

#include "core/element_type.hpp"

namespace crema {

namespace {

#if CREMA_BF16_LOOPS
CREMA_BF16_TARGET void RoundToBfloat16Vectors(const float* from, long long count, uint16_t* to) {
  long long k = 0;
  for (; k + 16 <= count; k += 16) Store16(to + k, Load16(from + k));
  if (k < count) {
    const __mmask16 lanes = FirstLanes(count - k);
    Store16(to + k, Load16(from + k, lanes), lanes);
  }
}
#endif

}  // namespace

void RoundToBfloat16(const float* from, long long count, uint16_t* to) {
#if CREMA_BF16_LOOPS
  if (HasBfloat16Conversions()) return RoundToBfloat16Vectors(from, count, to);
#endif
  for (long long k = 0; k < count; ++k) to[k] = ToBfloat16(from[k]);
}

}  // namespace crema
