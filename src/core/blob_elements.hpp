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

}  // namespace crema
