#include "core/bf16_blocked_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/bf16_vectors.hpp"
#include "core/common.hpp"
#include "core/element_type.hpp"
#include "core/synced_memory.hpp"

namespace crema {

namespace {

// The parameter's rows [begin, end), their values from `column_begin` on, element by element: row o's input i, or in a
// transposed copy row i's output o.
void WriteElements(const PairBlockedLayout& layout, const float* values, int64_t begin, int64_t end,
                   int64_t column_begin, uint16_t* copy) {
  const int64_t length = layout.transposed ? layout.outputs : layout.inputs;
  for (int64_t r = begin; r < end; ++r) {
    const float* row = values + r * length;
    for (int64_t c = column_begin; c < length; ++c)
      copy[layout.transposed ? layout.Offset(c, r) : layout.Offset(r, c)] = ToBfloat16(row[c]);
  }
}

#if CREMA_BF16_LOOPS
// A transposed copy's rows [begin, end) (pairs of the layout's inputs, begin even), outputs [0, whole) (a multiple of
// 16): each pair's 16 outputs rounded by one conversion, its two rows' words interleaved into one cache line, a row
// past the inputs zero. Streamed past the caches, as WriteVectors.
CREMA_BF16_TARGET void WriteTransposedVectors(const PairBlockedLayout& layout, const float* values, int64_t begin,
                                              int64_t end, int64_t whole, uint16_t* copy) {
  alignas(64) static const uint16_t order[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(reinterpret_cast<const __m512i*>(order));
  for (int64_t i = begin; i < end; i += 2) {
    const float* first = values + i * layout.outputs;
    const bool second = i + 1 < layout.inputs;
    for (int64_t o = 0; o < whole; o += 16) {
      const __m512 a = _mm512_loadu_ps(first + o);
      const __m512 b = second ? _mm512_loadu_ps(first + layout.outputs + o) : _mm512_setzero_ps();
      // Words 0-15 the first row's, 16-31 the second's; interleaved: output k's pair at words 2k and 2k + 1.
      const __m512i words = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));
      _mm512_stream_si512(reinterpret_cast<__m512i*>(copy + layout.Offset(o, i)),
                          _mm512_maskz_permutexvar_epi16(0xffffffffu, interleave, words));
    }
  }
  _mm_sfence();
}

// Unpacks and lane shuffles (the zero-masking forms over all lanes: GCC 12 warns of the plain ones' undefined
// pass-through operand).
CREMA_BF16_INLINE __m512i Low32(__m512i a, __m512i b) { return _mm512_maskz_unpacklo_epi32(0xffff, a, b); }
CREMA_BF16_INLINE __m512i High32(__m512i a, __m512i b) { return _mm512_maskz_unpackhi_epi32(0xffff, a, b); }
CREMA_BF16_INLINE __m512i Low64(__m512i a, __m512i b) { return _mm512_maskz_unpacklo_epi64(0xff, a, b); }
CREMA_BF16_INLINE __m512i High64(__m512i a, __m512i b) { return _mm512_maskz_unpackhi_epi64(0xff, a, b); }
template <int kLanes>
CREMA_BF16_INLINE __m512i Lanes(__m512i a, __m512i b) {
  return _mm512_maskz_shuffle_i32x4(0xffff, a, b, kLanes);
}

// The 16 x 16 words of `r` (r[k]: row k's words) transposed in place: r[t] becomes word t of each row.
CREMA_BF16_INLINE void Transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = Low32(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = High32(r[2 * k], r[2 * k + 1]);
  }
  // u[4g + j]: rows 4g..4g+3, words j, j+4, j+8, j+12 (one per 128-bit lane).
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = Low64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = High64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = Low64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = High64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i low_rows_even = Lanes<0x88>(u[j], u[4 + j]);        // words j, j+8: rows 0-7
    const __m512i low_rows_odd = Lanes<0xdd>(u[j], u[4 + j]);         // words j+4, j+12
    const __m512i high_rows_even = Lanes<0x88>(u[8 + j], u[12 + j]);  // rows 8-15
    const __m512i high_rows_odd = Lanes<0xdd>(u[8 + j], u[12 + j]);
    r[j] = Lanes<0x88>(low_rows_even, high_rows_even);
    r[j + 8] = Lanes<0xdd>(low_rows_even, high_rows_even);
    r[j + 4] = Lanes<0x88>(low_rows_odd, high_rows_odd);
    r[j + 12] = Lanes<0xdd>(low_rows_odd, high_rows_odd);
  }
}

// Rows [begin, end) (whole groups of 16 in one output block), inputs [0, whole) (a multiple of 32): each group's 32
// inputs rounded into 16 pair words per row, transposed, each pair's 16 outputs stored together. Streamed past the
// caches: the copy is read next by a later pass, not by this core now.
CREMA_BF16_TARGET void WriteVectors(const PairBlockedLayout& layout, const float* values, int64_t begin, int64_t end,
                                    int64_t whole, uint16_t* copy) {
  for (int64_t o = begin; o < end; o += 16) {
    const float* rows = values + o * layout.inputs;
    for (int64_t i = 0; i < whole; i += 32) {
      __m512i r[16];
      for (int k = 0; k < 16; ++k) {
        const float* at = rows + k * layout.inputs + i;
        r[k] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(at + 16), _mm512_loadu_ps(at)));
      }
      Transpose16(r);
      for (int t = 0; t < 16; ++t)
        _mm512_stream_si512(reinterpret_cast<__m512i*>(copy + layout.Offset(o, i + 2 * t)), r[t]);
    }
  }
  _mm_sfence();
}

// Up to this many rows of the input gradient at a time: an accumulator a row, in AVX-512's 32 registers.
constexpr int kGradientRows = 16;
// The rows and the pairs in a block InputGradient takes (its sums so far are kept on the stack: 32 KiB).
constexpr int64_t kMostGradientRows = 32, kMostPairs = 16;
// Output blocks read together: an input block's piece of each lies an output block's stride apart (a multiple of 4
// KiB: CaffeNet's fc6, 1.15 MiB), so all map to the same sets of the L1 and L2 caches; a few of them stay there while
// each group of rows and each of the block's pairs passes over them, and the next few are fetched meanwhile (the
// hardware's prefetchers do not follow such strides: without it fc6's input gradient took 5.4 ms, with it 2.8; 4 at
// a time measured best, against 2, 8, 12 and 16, on a Zen 5).
constexpr int64_t kOutputBlocksTogether = 4;

// Sums so far, by pair and row: 16 lanes each, the pair's first input's in the low 8, the second's in the high 8.
using PartialSums = float[kMostPairs][kMostGradientRows][16];

// The 32 bf16 of a pair's 16 outputs (output k's two inputs at 2k and 2k + 1) rearranged: the first input's 16
// outputs, then the second's (element t * 16 + k from 2k + t), so that a 32-bit word pairs two outputs of one input.
CREMA_BF16_INLINE __m512i ByInput(__m512i words) {
  alignas(64) static const uint16_t order[32] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30,
                                                 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
  return _mm512_maskz_permutexvar_epi16(0xffffffffu, _mm512_load_si512(reinterpret_cast<const __m512i*>(order)), words);
}

// Output blocks [first, last) of input block `block`, for `count` rows from `row` (a template argument, so that the
// accumulators stay in registers): for each pair of the block, the weights of 16 outputs at a time rearranged by input
// (ByInput) and multiplied pairwise (vdpbf16ps: two outputs a lane) by the output gradient's 16 values rounded to bf16
// (`dy`: each row's 16 a chunk, twice over, in 64 bytes), added to the pair's sums in `partial` (zeros where first is
// 0).
template <int count>
CREMA_BF16_TARGET void AddOutputBlocks(const PairBlockedLayout& layout, const uint16_t* copy, const uint16_t* dy,
                                       int64_t chunks, int64_t row, int64_t block, int64_t pairs, int64_t first,
                                       int64_t last, PartialSums& partial) {
  const int64_t output_blocks = (layout.outputs + layout.output_block - 1) / layout.output_block;
  for (int64_t pair = 0; pair < pairs; ++pair) {
    __m512 sums[count];
    for (int r = 0; r < count; ++r) sums[r] = first == 0 ? _mm512_setzero_ps() : _mm512_load_ps(partial[pair][row + r]);
    for (int64_t ob = first; ob < last; ++ob) {
      const uint16_t* words =
          copy + ob * layout.output_block_stride + block * layout.input_block_stride + pair * 2 * layout.output_block;
      for (int64_t c = 0; c < layout.output_block; c += 16) {
        const int64_t chunk = (ob * layout.output_block + c) / 16;
        if (chunk >= chunks) break;
        // The next group's line of this pair, on the group's first pass.
        if (row == 0 && ob + kOutputBlocksTogether < output_blocks)
          _mm_prefetch(
              reinterpret_cast<const char*>(words + kOutputBlocksTogether * layout.output_block_stride + 2 * c),
              _MM_HINT_T1);
        const __m512bh w =
            reinterpret_cast<__m512bh>(ByInput(_mm512_load_si512(reinterpret_cast<const __m512i*>(words + 2 * c))));
        for (int r = 0; r < count; ++r) {
          const __m512i g = _mm512_load_si512(reinterpret_cast<const __m512i*>(dy + ((row + r) * chunks + chunk) * 32));
          sums[r] = _mm512_dpbf16_ps(sums[r], w, reinterpret_cast<__m512bh>(g));
        }
      }
    }
    for (int r = 0; r < count; ++r) _mm512_store_ps(partial[pair][row + r], sums[r]);
  }
}

template <int... counts>
void AddOutputBlocksOfRows(std::integer_sequence<int, counts...>, int count, const PairBlockedLayout& layout,
                           const uint16_t* copy, const uint16_t* dy, int64_t chunks, int64_t row, int64_t block,
                           int64_t pairs, int64_t first, int64_t last, PartialSums& partial) {
  ((count == counts + 1 ? AddOutputBlocks<counts + 1>(layout, copy, dy, chunks, row, block, pairs, first, last, partial)
                        : void()),
   ...);
}

// The sum of 8 lanes from `from`, in one fixed order.
float EightLaneSum(const float* from) {
  return ((from[0] + from[4]) + (from[2] + from[6])) + ((from[1] + from[5]) + (from[3] + from[7]));
}

// Input block `block`'s inputs of all `rows` rows: the output blocks kOutputBlocksTogether at a time, each group
// passed over by the rows in groups as even as kGradientRows allows; then each input's 8 lanes added.
CREMA_BF16_TARGET void GradientOfBlock(const PairBlockedLayout& layout, const uint16_t* copy, const uint16_t* dy,
                                       int64_t chunks, int64_t rows, int64_t block, float* dx) {
  const int64_t output_blocks = (layout.outputs + layout.output_block - 1) / layout.output_block;
  const int64_t pairs = std::min(layout.pairs, (layout.inputs - block * 2 * layout.pairs + 1) / 2);  // not padding
  const int64_t groups = (rows + kGradientRows - 1) / kGradientRows, group = (rows + groups - 1) / groups;
  alignas(64) PartialSums partial;
  for (int64_t first = 0; first < output_blocks; first += kOutputBlocksTogether) {
    const int64_t last = std::min(output_blocks, first + kOutputBlocksTogether);
    for (int64_t row = 0; row < rows; row += group)
      AddOutputBlocksOfRows(std::make_integer_sequence<int, kGradientRows>(),
                            static_cast<int>(std::min(group, rows - row)), layout, copy, dy, chunks, row, block, pairs,
                            first, last, partial);
  }
  for (int64_t pair = 0; pair < pairs; ++pair) {
    const int64_t input = block * 2 * layout.pairs + 2 * pair;
    for (int64_t r = 0; r < rows; ++r) {
      float* out = dx + r * layout.inputs + input;
      out[0] = EightLaneSum(partial[pair][r]);
      if (input + 1 < layout.inputs) out[1] = EightLaneSum(partial[pair][r] + 8);
    }
  }
}

// The output gradient's rows rounded to bf16 in chunks of 16 outputs, each chunk twice over (64 bytes), 0 past the
// outputs.
CREMA_BF16_TARGET void RoundGradientChunks(const float* dy, int64_t rows, int64_t outputs, int64_t chunks,
                                           uint16_t* rounded) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const __mmask16 lanes = FirstLanes(outputs - chunk * 16);
      const __m256i half = Rounded(_mm512_maskz_loadu_ps(lanes, dy + r * outputs + chunk * 16));
      __m256i* to = reinterpret_cast<__m256i*>(rounded + (r * chunks + chunk) * 32);
      _mm256_store_si256(to, half);
      _mm256_store_si256(to + 1, half);
    }
}
#endif

}  // namespace

bool Bfloat16BlockedCopy::InputGradient(const float* output_gradient, int64_t rows, float* input_gradient) const {
#if CREMA_BF16_LOOPS
  if (layout_.transposed || !HasBfloat16Conversions() || layout_.output_block % 16 != 0 ||
      layout_.output_block_stride % 32 != 0 || layout_.input_block_stride % 32 != 0 || rows > kMostGradientRows ||
      layout_.pairs > kMostPairs)
    return false;
  const int64_t blocks = (layout_.inputs + 2 * layout_.pairs - 1) / (2 * layout_.pairs);
  const int64_t chunks = (layout_.outputs + 15) / 16;
  // The rounded output gradient, 64-byte aligned (kept from call to call, a buffer a thread).
  thread_local std::vector<uint16_t> rounding;
  rounding.resize(static_cast<size_t>(rows * chunks * 32 + 32));
  uint16_t* rounded = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(rounding.data()) + 63) / 64 * 64);
  RoundGradientChunks(output_gradient, rows, layout_.outputs, chunks, rounded);
  const bool threaded = blocks > 1 && rows * layout_.inputs * layout_.outputs >= (int64_t{1} << 16);
#pragma omp parallel for if (threaded) schedule(static)
  for (int64_t block = 0; block < blocks; ++block)
    GradientOfBlock(layout_, data_, rounded, chunks, rows, block, input_gradient);
  return true;
#else
  (void)output_gradient;
  (void)rows;
  (void)input_gradient;
  return false;
#endif
}

Bfloat16BlockedCopy::Bfloat16BlockedCopy(const PairBlockedLayout& layout) : layout_(layout) {
  CREMA_CHECK(layout.output_block > 0 && layout.pairs > 0 && layout.outputs > 0 && layout.inputs > 0)
      << "a blocked bf16 copy needs blocks and rows";
  memory_ = std::make_shared<SyncedMemory>(layout.bytes);
  data_ = static_cast<uint16_t*>(memory_->mutable_cpu_data());  // zeros: the padding stays so
}

Bfloat16BlockedCopy::~Bfloat16BlockedCopy() = default;

void Bfloat16BlockedCopy::WriteRows(const float* values, int64_t begin, int64_t end) {
  if (layout_.transposed) {
    int64_t whole = 0;  // outputs [0, whole) go in vectors, each pair of rows from an even one
#if CREMA_BF16_LOOPS
    if (HasBfloat16Conversions() && layout_.output_block % 16 == 0 && begin % 2 == 0 &&
        layout_.output_block_stride % 32 == 0 && layout_.input_block_stride % 32 == 0) {
      whole = layout_.outputs / 16 * 16;
      if (whole > 0) WriteTransposedVectors(layout_, values, begin, end, whole, data_);
    }
#endif
    WriteElements(layout_, values, begin, end, whole, data_);  // the outputs past the vectors' columns
    return;
  }
  int64_t vector_end = begin;  // rows [begin, vector_end) and inputs [0, whole) go in vectors
  int64_t whole = 0;
#if CREMA_BF16_LOOPS
  // Vectors where a group of 16 outputs lies in one block and each pair's 16 words fill an aligned cache line.
  if (HasBfloat16Conversions() && layout_.output_block % 16 == 0 && begin % 16 == 0 &&
      layout_.output_block_stride % 32 == 0 && layout_.input_block_stride % 32 == 0) {
    vector_end = begin + (end - begin) / 16 * 16;
    whole = layout_.inputs / 32 * 32;
    if (whole > 0 && vector_end > begin) WriteVectors(layout_, values, begin, vector_end, whole, data_);
  }
#endif
  if (whole == 0) vector_end = begin;
  WriteElements(layout_, values, begin, vector_end, whole, data_);  // the inputs past the vectors' columns
  WriteElements(layout_, values, vector_end, end, 0, data_);        // the rows past the vectors' groups
}

}  // namespace crema
