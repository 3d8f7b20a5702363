// The type of a blob's values as they lie in memory. crema computes in 32-bit floats, and every blob holds them
// unless the net's plan (plan_element_types, src/net/passes.hpp) keeps one in another type between the steps that
// write and read it in that type: an 8-bit inference step's output read only by 8-bit steps that would have
// quantized it the same way passes from one to the next as the integers themselves, a quarter of the bytes and no
// conversion; between the GPU's half-precision products a blob passes as their 16-bit operands (float16 or bf16).
// Layers that know nothing of it never see such a blob (Blob's float accessors refuse it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace crema {

enum class ElementType {
  kFloat32,   // every blob, unless planned otherwise
  kUInt8,     // q in [0, 255] standing for q / scale
  kInt8,      // q in [-128, 127] standing for q / scale
  kBfloat16,  // the upper half of a float32 (8 bits of exponent, 7 of mantissa), rounded to nearest even
  kFloat16,   // IEEE 754 binary16 (5 bits of exponent, 10 of mantissa), rounded to nearest even (ToFloat16)
};

size_t ElementBytes(ElementType type);
// "32-bit floats", "unsigned 8-bit integers", "signed 8-bit integers", "bfloat16", "float16"
std::string ElementTypeName(ElementType type);
// Whether values of `type` are 16-bit floats (bfloat16 or float16).
inline bool IsHalfType(ElementType type) { return type == ElementType::kBfloat16 || type == ElementType::kFloat16; }

// Marks a function both the C++ and the CUDA compiler compile for their devices (per-element rules,
// core/elementwise.hpp; the roundings below, which the GPU engines round their operands with, as the CPU's do).
#ifdef __CUDACC__
#define CREMA_HOST_DEVICE __host__ __device__
#else
#define CREMA_HOST_DEVICE
#endif

// A float's bits, and the float of some bits.
CREMA_HOST_DEVICE inline uint32_t FloatBits(float value) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}
CREMA_HOST_DEVICE inline float FloatOfBits(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

// A float rounded to bfloat16, and back. As AVX512_BF16's conversion (vcvtneps2bf16) and oneDNN's reorders on the
// CPUs that have it: to nearest, ties to even; a denormal float (below 2^-126 in magnitude) taken as zero of its
// sign; NaN stays NaN, made quiet. The GPU engines round their bf16 operands by this rule too.
CREMA_HOST_DEVICE inline uint16_t ToBfloat16(float value) {
  uint32_t bits = FloatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN, kept quiet
  if ((bits & 0x7f800000u) == 0) return static_cast<uint16_t>((bits >> 16) & 0x8000u);        // denormal or zero
  bits += 0x7fffu + ((bits >> 16) & 1u);  // to nearest, a tie to the even upper half
  return static_cast<uint16_t>(bits >> 16);
}
CREMA_HOST_DEVICE inline float FromBfloat16(uint16_t value) { return FloatOfBits(static_cast<uint32_t>(value) << 16); }

// A float rounded to IEEE 754 binary16 (float16: 5 bits of exponent, 10 of mantissa, largest finite 65504), and back:
// to nearest, ties to even, as the GPUs' conversion (cvt.rn.f16.f32) rounds; float16's subnormals (down to 2^-24)
// kept; a magnitude from 65520 on (halfway past 65504) becomes infinity; NaN stays NaN, made quiet.
CREMA_HOST_DEVICE inline uint16_t ToFloat16(float value) {
  const uint32_t bits = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));  // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // 65520 and beyond, infinity
  if (magnitude >= 0x38800000u) {
    // A normal float16 (from 2^-14): 13 mantissa bits dropped, rounded to nearest even; the exponent rebiased from
    // 127 to 15 (a carry out of the mantissa moves the exponent up, as it should).
    const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  // Below 2^-14: a multiple of 2^-24, the float's 24-bit significand shifted right, rounded to nearest even (a
  // float denormal, or anything below 2^-25, gives zero; 2^-25 itself is a tie, to the even zero).
  const uint32_t exponent = magnitude >> 23;
  if (exponent < 102) return sign;
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exponent;  // 14 to 24
  uint32_t result = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (result & 1u) != 0)) ++result;
  return static_cast<uint16_t>(sign | result);
}
CREMA_HOST_DEVICE inline float FromFloat16(uint16_t value) {
  const uint32_t sign = static_cast<uint32_t>(value & 0x8000u) << 16;
  const uint32_t exponent = (value >> 10) & 0x1fu, mantissa = value & 0x3ffu;
  if (exponent == 0x1fu) return FloatOfBits(sign | 0x7f800000u | (mantissa << 13));  // infinity, NaN
  if (exponent == 0) {
    // Zero or a subnormal: mantissa * 2^-24, exact in a float.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign != 0 ? -magnitude : magnitude;
  }
  return FloatOfBits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// The 16-bit value of a float as float16, or as bfloat16 where `bfloat16`, and back.
CREMA_HOST_DEVICE inline uint16_t ToHalf(bool bfloat16, float value) {
  return bfloat16 ? ToBfloat16(value) : ToFloat16(value);
}
CREMA_HOST_DEVICE inline float FromHalf(bool bfloat16, uint16_t value) {
  return bfloat16 ? FromBfloat16(value) : FromFloat16(value);
}
// A stored value as float32, for a rule written once over float and 16-bit storage: a float as it is, a 16-bit value
// (float16, or bfloat16 where `bfloat16`) widened.
CREMA_HOST_DEVICE inline float StoredValue(bool, float value) { return value; }
CREMA_HOST_DEVICE inline float StoredValue(bool bfloat16, uint16_t value) { return FromHalf(bfloat16, value); }
// And a float stored so: as it is in floats, rounded to 16 bits in 16-bit values.
CREMA_HOST_DEVICE inline void StoreValue(bool, float value, float* to) { *to = value; }
CREMA_HOST_DEVICE inline void StoreValue(bool bfloat16, float value, uint16_t* to) { *to = ToHalf(bfloat16, value); }
// A float as a 16-bit blob would hold it (float16, or bfloat16 where `bfloat16`), widened back: what a layer reading
// its input in 16 bits computes with where that input lies in floats.
CREMA_HOST_DEVICE inline float RoundedToHalf(bool bfloat16, float value) {
  return FromHalf(bfloat16, ToHalf(bfloat16, value));
}

// How a value is stored in an 8-bit type: q = round(value * scale), saturated to the type's range (kFloat32: as is;
// kBfloat16 and kFloat16: rounded to the 16-bit type, the scale 1). A layer that converts a bottom to a type says so
// (Layer::ReadsQuantized); two such readers of one blob agree when their Quantization are equal.
struct Quantization {
  ElementType type = ElementType::kFloat32;
  float scale = 1.f;
  bool integers() const { return type == ElementType::kUInt8 || type == ElementType::kInt8; }
  bool floats() const { return type == ElementType::kFloat32; }
  bool operator==(const Quantization& other) const { return type == other.type && scale == other.scale; }
  bool operator!=(const Quantization& other) const { return !(*this == other); }
};

// The type a layer's products (Convolution, InnerProduct and their gradients) compute in, the sums in float32 whatever
// it is (the schema's Precision: a solver's `precision`, a layer's own, crema's --precision). A layer's blobs, its
// parameters (the master weights the solver updates) and every other layer stay in float32.
enum class Precision { kFloat32, kBfloat16, kFloat16 };

// "float32", "bfloat16", "float16"
const char* PrecisionName(Precision precision);
// "fp32", "bf16" or "fp16" (the flag's words; the schema's FLOAT32, BFLOAT16 and FLOAT16 too) as a Precision; throws
// naming `where` and the words it takes.
Precision ParsePrecision(const std::string& text, const std::string& where);
// The 16-bit element type of a half precision (kFloat16 or kBfloat16): what the products' operands are stored as.
inline ElementType HalfElementType(Precision precision) {
  return precision == Precision::kBfloat16 ? ElementType::kBfloat16 : ElementType::kFloat16;
}

}  // namespace crema
