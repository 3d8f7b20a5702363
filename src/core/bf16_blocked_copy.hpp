// A parameter's rows rounded to bf16 in a blocked layout of pairs (core/derived_copy.hpp): the layout oneDNN's bf16
// matrix kernels read a fully connected layer's weights in (brgemm's "AB8b64a2b" on a Zen 5: blocks of 64 outputs by
// 16 inputs, each output's inputs in pairs, a pair a 32-bit word). Output o's input i lies at element
//   (o / output_block) * output_block_stride + (i / (2 * pairs)) * input_block_stride
//     + ((i % (2 * pairs)) / 2) * (2 * output_block) + (o % output_block) * 2 + i % 2,
// and what the padded blocks hold past the outputs and inputs there are stays 0. Rounded as ToBfloat16
// (core/element_type.hpp): to nearest, ties to even, denormals as 0, NaN kept quiet; written in AVX512_BF16 where the
// CPU has it (16 outputs by 32 inputs at a time: each output's 32 floats rounded into 16 words, the 16 x 16 words
// transposed, each pair's 16 outputs stored as one cache line), element by element elsewhere, with the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/derived_copy.hpp"

namespace crema {

class SyncedMemory;

// `transposed`: the copy of the parameter's transpose, its rows the layout's inputs and its columns the layout's
// outputs (a 1x1 convolution's weights for its input gradient, "BAcd8a16b2a" on a Zen 5: blocks of 16 inputs by 16
// outputs, each input's outputs in pairs); Offset still takes the layout's (output, input).
struct PairBlockedLayout {
  int64_t outputs = 0, inputs = 0;                          // the rows and each row's values
  bool transposed = false;
  int64_t output_block = 0;                                 // outputs in a block
  int64_t pairs = 0;                                        // input pairs in a block (2 * pairs inputs)
  int64_t output_block_stride = 0, input_block_stride = 0;  // in elements
  size_t bytes = 0;                                         // the whole copy, padding included
  // The element of output o's input i.
  int64_t Offset(int64_t o, int64_t i) const {
    return (o / output_block) * output_block_stride + (i / (2 * pairs)) * input_block_stride +
           ((i % (2 * pairs)) / 2) * (2 * output_block) + (o % output_block) * 2 + i % 2;
  }
};

class Bfloat16BlockedCopy : public DerivedCopy {
 public:
  // Zeros, aligned to a cache line, `layout.bytes` of them.
  explicit Bfloat16BlockedCopy(const PairBlockedLayout& layout);
  ~Bfloat16BlockedCopy() override;
  Bfloat16BlockedCopy(const Bfloat16BlockedCopy&) = delete;
  Bfloat16BlockedCopy& operator=(const Bfloat16BlockedCopy&) = delete;

  // The parameter's rows: the layout's outputs, or (transposed) its inputs, a block's pairs of them at once.
  int64_t row_length() const override { return layout_.transposed ? layout_.outputs : layout_.inputs; }
  int64_t rows_together() const override { return layout_.transposed ? 2 * layout_.pairs : layout_.output_block; }
  void WriteRows(const float* values, int64_t begin, int64_t end) override;

  // The input gradient of a fully connected layer over these weights: input_gradient (rows x inputs) =
  // output_gradient (rows x outputs) times the weights, both float32 and plain, the output gradient rounded to bf16
  // (ToBfloat16), the weights as this copy holds them, the products summed in float32 (vdpbf16ps: two outputs a step
  // in each of 8 lanes an input, the lanes then added in one fixed order: the same bits on any number of threads).
  // Where the CPU has AVX512_BF16 (HasBfloat16Conversions): reads the copy once, in its own layout (oneDNN's bf16
  // kernel for the input gradient of a few rows took twice the forward's time, over the same weights); false elsewhere
  // and for more than 32 rows (where oneDNN's kernels are bound by arithmetic, not by reading the weights), with
  // nothing written. False for a transposed copy.
  bool InputGradient(const float* output_gradient, int64_t rows, float* input_gradient) const;

  const PairBlockedLayout& layout() const { return layout_; }
  uint16_t* data() const { return data_; }
  size_t bytes() const { return layout_.bytes; }

 private:
  PairBlockedLayout layout_;
  std::shared_ptr<SyncedMemory> memory_;  // counted with the blobs' memory
  uint16_t* data_ = nullptr;
};

}  // namespace crema
