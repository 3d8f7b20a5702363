// The type of a blob's values as they lie in memory. crema computes in 32-bit floats, and every blob holds them
// unless the net's plan (plan_element_types, src/net/passes.hpp) keeps one in another type between the steps that
// write and read it in that type: an 8-bit inference step's output read only by 8-bit steps that would have
// quantized it the same way passes from one to the next as the integers themselves, a quarter of the bytes and no
// conversion. Layers that know nothing of it never see such a blob (Blob's float accessors refuse it).
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
};

size_t ElementBytes(ElementType type);
// "32-bit floats", "unsigned 8-bit integers", "signed 8-bit integers", "bfloat16"
std::string ElementTypeName(ElementType type);

// A float rounded to bfloat16, and back. As AVX512_BF16's conversion (vcvtneps2bf16) and oneDNN's reorders on the
// CPUs that have it: to nearest, ties to even; a denormal float (below 2^-126 in magnitude) taken as zero of its
// sign; NaN stays NaN, made quiet.
inline uint16_t ToBfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN, kept quiet
  if ((bits & 0x7f800000u) == 0) return static_cast<uint16_t>((bits >> 16) & 0x8000u);        // denormal or zero
  bits += 0x7fffu + ((bits >> 16) & 1u);  // to nearest, a tie to the even upper half
  return static_cast<uint16_t>(bits >> 16);
}
inline float FromBfloat16(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

// How a value is stored in an 8-bit type: q = round(value * scale), saturated to the type's range (kFloat32: as is;
// kBfloat16: rounded to bf16, the scale 1). A layer that converts a bottom to a type says so (Layer::ReadsQuantized);
// two such readers of one blob agree when their Quantization are equal.
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

}  // namespace crema
