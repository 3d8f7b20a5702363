// A blob's data and gradient as their element type stores them, for loops written once for floats and bf16
// (core/vector_clones.hpp's ValueOf and StoredAs read and write either): each visitor calls `f` with a pointer to
// floats or to bf16 values (uint16_t), as the blob holds them. Blobs in 8-bit types are for the engines that read them
// as they lie, not for these.
#pragma once

#include <cstdint>

#include "core/blob.hpp"

namespace crema {

template <typename F>
void WithData(const Blob& blob, F f) {
  if (blob.data_type() == ElementType::kBfloat16) return f(static_cast<const uint16_t*>(blob.cpu_bytes()));
  f(blob.cpu_data());
}
template <typename F>
void WithMutableData(Blob* blob, F f) {
  if (blob->data_type() == ElementType::kBfloat16) return f(static_cast<uint16_t*>(blob->mutable_cpu_bytes()));
  f(blob->mutable_cpu_data());
}
template <typename F>
void WithDiff(const Blob& blob, F f) {
  if (blob.diff_type() == ElementType::kBfloat16) return f(static_cast<const uint16_t*>(blob.cpu_diff_bytes()));
  f(blob.cpu_diff());
}
// A null float pointer where not `wanted`.
template <typename F>
void WithMutableDiff(Blob* blob, F f, bool wanted = true) {
  if (!wanted) return f(static_cast<float*>(nullptr));
  if (blob->diff_type() == ElementType::kBfloat16) return f(static_cast<uint16_t*>(blob->mutable_cpu_diff_bytes()));
  f(blob->mutable_cpu_diff());
}

// GPU code's rules over a blob's data on device `d` (GPU code's 16-bit blobs, float16 or bf16: Blob::data_type):
// f(values, bfloat16) with a pointer to floats, or to 16-bit values and whether they are bf16 (as StoredValue and
// ToHalf take them).
template <typename F>
void WithMutableValuesOn(Blob* blob, Device d, F f) {
  if (IsHalfType(blob->data_type()))
    return f(static_cast<uint16_t*>(blob->mutable_bytes_on(d)), blob->data_type() == ElementType::kBfloat16);
  f(blob->mutable_data_on(d), false);
}

}  // namespace crema
