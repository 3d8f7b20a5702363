// Loops built once for each vector width an x86-64 CPU may have (AVX-512, AVX2 with FMA, else SSE2), the build that
// runs chosen when the program loads (GCC's target_clones): crema's binaries are built for the baseline x86-64, where
// a loop would otherwise vectorise for SSE2 only. CREMA_VECTOR_CLONES goes before such a function, and
// CREMA_ALWAYS_INLINE on the helpers it calls, so that each build inlines them at its own width. Other compilers
// (clang, in the sanitizer and fuzzing builds) and other CPUs get one plain build.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CREMA_VECTOR_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#define CREMA_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define CREMA_VECTOR_CLONES
#define CREMA_ALWAYS_INLINE inline
#endif

#include <cstdint>
#include <cstring>

#include "core/element_type.hpp"

namespace crema {

// GCC's vector types (clang reads them too): vectors of L floats, ints and bytes. A function built for a vector unit
// (a clone above, or one with its own target attribute) compiles them for it: a 16-float vector is one AVX-512
// register, two AVX2 ones, four SSE2 ones. The helpers that take or return them are always inlined into such
// functions, so that no vector crosses a call (-Wpsabi warns of the calls' ABI otherwise; the files that use them
// silence it around their loops).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float Floats16 __attribute__((vector_size(64)));
typedef int Ints16 __attribute__((vector_size(64)));
typedef uint8_t Bytes16 __attribute__((vector_size(16)));
typedef float Floats8 __attribute__((vector_size(32)));
typedef int Ints8 __attribute__((vector_size(32)));
typedef uint8_t Bytes8 __attribute__((vector_size(8)));
typedef float Floats4 __attribute__((vector_size(16)));
typedef uint16_t Halves16 __attribute__((vector_size(32)));  // bfloat16 values' bits
typedef uint16_t Halves8 __attribute__((vector_size(16)));
typedef uint32_t UInts16 __attribute__((vector_size(64)));
typedef uint32_t UInts8 __attribute__((vector_size(32)));

template <int L>
struct Lanes;
template <>
struct Lanes<16> {
  using Floats = Floats16;
  using Ints = Ints16;
  using Bytes = Bytes16;
  using Halves = Halves16;
  using UInts = UInts16;
};
template <>
struct Lanes<8> {
  using Floats = Floats8;
  using Ints = Ints8;
  using Bytes = Bytes8;
  using Halves = Halves8;
  using UInts = UInts8;
};
template <>
struct Lanes<4> {
  using Floats = Floats4;
};

// A vector from memory, and to it, at any alignment.
template <typename Vector, typename T>
CREMA_ALWAYS_INLINE Vector Load(const T* p) {
  Vector v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <typename Vector, typename T>
CREMA_ALWAYS_INLINE void Store(T* p, const Vector& v) {
  __builtin_memcpy(p, &v, sizeof v);
}
#pragma GCC diagnostic pop

// Loops written once for floats and bfloat16 (uint16_t, core/element_type.hpp): an element as the float it stands
// for, and a float as the element type stores it (bf16: ToBfloat16's rounding in a branch-free form the loops
// vectorize: a NaN keeping its upper half, made quiet, a denormal made zero). The pointer picks the type.
CREMA_ALWAYS_INLINE float ValueOf(float v) { return v; }
CREMA_ALWAYS_INLINE float ValueOf(uint16_t v) { return FromBfloat16(v); }
// That rounding of a float's bits: one uint32_t, or a vector of them lane by lane (the bf16 bits in each low half).
template <typename U>
CREMA_ALWAYS_INLINE void Bfloat16BitsOf(const U& bits, U* out) {
  const U rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const U quiet = (bits >> 16) | 0x40u;
  const U zero = (bits >> 16) & 0x8000u;
  *out = (bits & 0x7fffffffu) > 0x7f800000u ? quiet : ((bits & 0x7f800000u) == 0 ? zero : rounded);
}
CREMA_ALWAYS_INLINE float StoredAs(float value, const float*) { return value; }
CREMA_ALWAYS_INLINE uint16_t StoredAs(float value, const uint16_t*) {
  uint32_t bits, rounded;
  std::memcpy(&bits, &value, sizeof bits);
  Bfloat16BitsOf(bits, &rounded);
  return static_cast<uint16_t>(rounded);
}
// An element as a rule computing in bf16 reads it: the float rounded to bf16, a bf16 value as it is.
CREMA_ALWAYS_INLINE float Bfloat16ValueOf(float v) {
  return FromBfloat16(StoredAs(v, static_cast<uint16_t*>(nullptr)));
}
CREMA_ALWAYS_INLINE float Bfloat16ValueOf(uint16_t v) { return FromBfloat16(v); }

}  // namespace crema
