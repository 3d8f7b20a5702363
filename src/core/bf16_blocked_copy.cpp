#include "core/bf16_blocked_copy.hpp"

#include <algorithm>

#include "core/bf16_vectors.hpp"
#include "core/common.hpp"
#include "core/element_type.hpp"
#include "core/synced_memory.hpp"

namespace crema {

namespace {

// Rows [begin, end), inputs [input_begin, inputs), element by element.
void WriteElements(const PairBlockedLayout& layout, const float* values, int64_t begin, int64_t end,
                   int64_t input_begin, uint16_t* copy) {
  for (int64_t o = begin; o < end; ++o) {
    const float* row = values + o * layout.inputs;
    for (int64_t i = input_begin; i < layout.inputs; ++i) copy[layout.Offset(o, i)] = ToBfloat16(row[i]);
  }
}

#if CREMA_BF16_LOOPS
// The 16 x 16 words of `r` (r[k]: row k's words) transposed in place: r[t] becomes word t of each row.
// (The zero-masking forms over all lanes: GCC 12 warns of the plain ones' undefined pass-through operand.)
CREMA_BF16_INLINE __m512i Low32(__m512i a, __m512i b) { return _mm512_maskz_unpacklo_epi32(0xffff, a, b); }
CREMA_BF16_INLINE __m512i High32(__m512i a, __m512i b) { return _mm512_maskz_unpackhi_epi32(0xffff, a, b); }
CREMA_BF16_INLINE __m512i Low64(__m512i a, __m512i b) { return _mm512_maskz_unpacklo_epi64(0xff, a, b); }
CREMA_BF16_INLINE __m512i High64(__m512i a, __m512i b) { return _mm512_maskz_unpackhi_epi64(0xff, a, b); }
template <int kLanes>
CREMA_BF16_INLINE __m512i Lanes(__m512i a, __m512i b) {
  return _mm512_maskz_shuffle_i32x4(0xffff, a, b, kLanes);
}

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
#endif

}  // namespace

Bfloat16BlockedCopy::Bfloat16BlockedCopy(const PairBlockedLayout& layout) : layout_(layout) {
  CREMA_CHECK(layout.output_block > 0 && layout.pairs > 0 && layout.outputs > 0 && layout.inputs > 0)
      << "a blocked bf16 copy needs blocks and rows";
  memory_ = std::make_shared<SyncedMemory>(layout.bytes);
  data_ = static_cast<uint16_t*>(memory_->mutable_cpu_data());  // zeros: the padding stays so
}

Bfloat16BlockedCopy::~Bfloat16BlockedCopy() = default;

void Bfloat16BlockedCopy::WriteRows(const float* values, int64_t begin, int64_t end) {
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
