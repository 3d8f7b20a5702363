#include "layers/vision/pooling_lanes.hpp"

#include <algorithm>

#include "core/common.hpp"
#include "core/threads.hpp"
#include "core/vector_clones.hpp"

namespace crema {

namespace {

// The vector width the loops are written for: a 16-channel block, or channels-last's channels 16 at a time.
constexpr int kWidest = 16;

// The loops below take core/vector_clones.hpp's vector types, each clone at its own width.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// Vectors of values in floats or bfloat16 (uint16_t: compared as the floats they stand for, stored as they came, so a
// maximum is the bf16 value of the floats' maximum; one value at a time: ValueOf, StoredAs).
// (Vectors pass by reference: one returned by value from a template instantiated at the end of the file draws -Wpsabi
// outside the region that silences it.)
template <typename Floats>
CREMA_ALWAYS_INLINE void LoadValues(const float* p, Floats* v) {
  *v = Load<Floats>(p);
}
template <typename Floats>
CREMA_ALWAYS_INLINE void LoadValues(const uint16_t* p, Floats* v) {
  constexpr int L = sizeof(Floats) / sizeof(float);
  // Widened a lane at a time: the vectoriser makes that one zero-extension and a shift, where GCC 12's
  // __builtin_convertvector of 16 halves to ints took two half-width extensions and the shuffles to join them (the
  // bf16 pooling ran slower than the float one).
  uint32_t bits[L];
  for (int l = 0; l < L; ++l) bits[l] = static_cast<uint32_t>(p[l]) << 16;
  *v = Load<Floats>(bits);
}
template <int L>
CREMA_ALWAYS_INLINE void StoreValues(float* p, const typename Lanes<L>::Floats& v) {
  Store(p, v);
}
template <int L>
CREMA_ALWAYS_INLINE void StoreValues(uint16_t* p, const typename Lanes<L>::Floats& v) {
  // A bf16 value's float has its low half zero: the high half is the value, exactly.
  const typename Lanes<L>::UInts bits = Load<typename Lanes<L>::UInts>(&v) >> 16;
  Store(p, __builtin_convertvector(bits, typename Lanes<L>::Halves));
}

// One output row `oy` of `groups` groups of lanes, L apart (channels-last's channels, 16 at a time, each position's
// all at once: a group at a time, the rows were read once per group), or of one (a channel block): `in_first` and
// `out_first` at the first group's first value, `arg_first` laid out as `out_first`. L lanes a group, all the channels'
// (vectors), or `last_active` < L of them in the last group (a channels-last tail: one lane at a time).
template <int L, typename T>
CREMA_ALWAYS_INLINE void ForwardRow(const PoolingWindows& w, int oy, const T* in_first, int in_stride, T* out_first,
                                    uint8_t* arg_first, int out_stride, int groups, int last_active) {
  using Floats = typename Lanes<L>::Floats;
  using Ints = typename Lanes<L>::Ints;
  using Bytes = typename Lanes<L>::Bytes;
  const int y0 = oy * w.stride_h - w.pad_h;
  const int ys = std::max(y0, 0), ye = std::min(y0 + w.kernel_h, w.height);
  for (int ox = 0; ox < w.pooled_w; ++ox) {
    // The window and the output's place, the same for every group.
    const int x0 = ox * w.stride_w - w.pad_w;
    const int xs = std::max(x0, 0), xe = std::min(x0 + w.kernel_w, w.width);
    const int first_at = (ys - y0) * w.kernel_w + (xs - x0);
    const long long o = static_cast<long long>(oy * w.pooled_w + ox) * out_stride;
    for (int g = 0; g < groups; ++g) {
      const int active = g + 1 == groups ? last_active : L;
      const T* in = in_first + g * L;
      T* out = out_first + g * L;
      uint8_t* arg = arg_first == nullptr ? nullptr : arg_first + g * L;
      const T* first = in + (static_cast<long long>(ys) * w.width + xs) * in_stride;
      if (active == L) {
        Floats best;
        LoadValues(first, &best);
        Ints at = first_at - Ints{};
        for (int y = ys; y < ye; ++y) {
          const T* row = in + static_cast<long long>(y) * w.width * in_stride;
          for (int x = xs; x < xe; ++x) {
            Floats v;
            LoadValues(row + static_cast<long long>(x) * in_stride, &v);
            const Ints greater = v > best;
            best = greater ? v : best;
            at = greater ? (y - y0) * w.kernel_w + (x - x0) - Ints{} : at;
          }
        }
        StoreValues<L>(out + o, best);
        if (arg != nullptr) Store(arg + o, __builtin_convertvector(at, Bytes));
        continue;
      }
      for (int l = 0; l < active; ++l) {
        float best = ValueOf(first[l]);
        int at = first_at;
        for (int y = ys; y < ye; ++y) {
          for (int x = xs; x < xe; ++x) {
            const float v = ValueOf(in[(static_cast<long long>(y) * w.width + x) * in_stride + l]);
            if (v > best) {
              best = v;
              at = (y - y0) * w.kernel_w + (x - x0);
            }
          }
        }
        out[o + l] = StoredAs(best, out);
        if (arg != nullptr) arg[o + l] = static_cast<uint8_t>(at);
      }
    }
  }
}

// Output gradients as a backward reads them: as they lie, or (`kRounded`, the bf16 rule's) as bf16 values (floats
// rounded to bf16; bf16 values as they are).
template <bool kRounded>
CREMA_ALWAYS_INLINE float GradientOf(float g) {
  return kRounded ? Bfloat16ValueOf(g) : g;
}
template <bool kRounded>
CREMA_ALWAYS_INLINE float GradientOf(uint16_t g) {
  return FromBfloat16(g);
}
// L floats' bf16 bits (StoredAs's rounding, lane by lane: Bfloat16BitsOf), in the low halves of L ints.
template <int L>
CREMA_ALWAYS_INLINE void RoundedBits(const typename Lanes<L>::Floats& v, typename Lanes<L>::UInts* out) {
  Bfloat16BitsOf(Load<typename Lanes<L>::UInts>(&v), out);
}
template <typename Floats, bool kRounded>
CREMA_ALWAYS_INLINE void LoadGradients(const float* p, Floats* v) {
  constexpr int L = sizeof(Floats) / sizeof(float);
  *v = Load<Floats>(p);
  if (!kRounded) return;
  typename Lanes<L>::UInts rounded;
  RoundedBits<L>(*v, &rounded);
  rounded <<= 16;
  *v = Load<Floats>(&rounded);
}
template <typename Floats, bool>
CREMA_ALWAYS_INLINE void LoadGradients(const uint16_t* p, Floats* v) {
  LoadValues(p, v);
}
// Input gradients stored as their blob holds them: floats as they are, bf16 rounded (ToBfloat16).
template <int L>
CREMA_ALWAYS_INLINE void StoreGradients(float* p, const typename Lanes<L>::Floats& v) {
  Store(p, v);
}
template <int L>
CREMA_ALWAYS_INLINE void StoreGradients(uint16_t* p, const typename Lanes<L>::Floats& v) {
  typename Lanes<L>::UInts rounded;
  RoundedBits<L>(v, &rounded);
  Store(p, __builtin_convertvector(rounded, typename Lanes<L>::Halves));
}

// One input row `y` of one group of lanes: each input's gradient, gathered from the outputs whose windows hold it
// and whose maximum it was, in output order; the output gradients read as GradientOf<kRounded> reads them.
template <int L, bool kRounded = false, typename TopDiff = float, typename BottomDiff = float>
CREMA_ALWAYS_INLINE void BackwardRow(const PoolingWindows& w, int y, const TopDiff* top_diff, const uint8_t* arg,
                                     int out_stride, BottomDiff* bottom_diff, int in_stride, int active) {
  using Floats = typename Lanes<L>::Floats;
  using Ints = typename Lanes<L>::Ints;
  int ph_first = 0, ph_last = 0;
  PoolingWindows::Covering(y, w.pad_h, w.kernel_h, w.stride_h, w.pooled_h, &ph_first, &ph_last);
  for (int x = 0; x < w.width; ++x) {
    int pw_first = 0, pw_last = 0;
    PoolingWindows::Covering(x, w.pad_w, w.kernel_w, w.stride_w, w.pooled_w, &pw_first, &pw_last);
    BottomDiff* d = bottom_diff + (static_cast<long long>(y) * w.width + x) * in_stride;
    if (active == L) {
      Floats total = {};
      for (int ph = ph_first; ph < ph_last; ++ph) {
        const int ky = y - (ph * w.stride_h - w.pad_h);
        for (int pw = pw_first; pw < pw_last; ++pw) {
          const int k = ky * w.kernel_w + (x - (pw * w.stride_w - w.pad_w));
          const long long o = static_cast<long long>(ph * w.pooled_w + pw) * out_stride;
          // Widened a lane at a time: the vectoriser makes that one zero-extension, where GCC 12's
          // __builtin_convertvector of bytes to ints extracts them one by one.
          int recorded[L];
          for (int l = 0; l < L; ++l) recorded[l] = arg[o + l];
          const Ints mine = Load<Ints>(recorded) == k;
          Floats g;
          LoadGradients<Floats, kRounded>(top_diff + o, &g);
          total += mine ? g : Floats{};
        }
      }
      StoreGradients<L>(d, total);
      continue;
    }
    for (int l = 0; l < active; ++l) {
      float total = 0.f;
      for (int ph = ph_first; ph < ph_last; ++ph) {
        const int ky = y - (ph * w.stride_h - w.pad_h);
        for (int pw = pw_first; pw < pw_last; ++pw) {
          const long long o = static_cast<long long>(ph * w.pooled_w + pw) * out_stride + l;
          if (arg[o] == ky * w.kernel_w + (x - (pw * w.stride_w - w.pad_w))) total += GradientOf<kRounded>(top_diff[o]);
        }
      }
      d[l] = StoredAs(total, d);
    }
  }
}

CREMA_VECTOR_CLONES void ForwardRows16(const PoolingWindows& w, int oy, const float* in, int in_stride, float* out,
                                       uint8_t* arg, int out_stride, int groups, int last_active) {
  ForwardRow<16>(w, oy, in, in_stride, out, arg, out_stride, groups, last_active);
}

CREMA_VECTOR_CLONES void ForwardRows8(const PoolingWindows& w, int oy, const float* in, int in_stride, float* out,
                                      uint8_t* arg, int out_stride, int, int) {
  ForwardRow<8>(w, oy, in, in_stride, out, arg, out_stride, 1, 8);
}

CREMA_VECTOR_CLONES void ForwardRows16(const PoolingWindows& w, int oy, const uint16_t* in, int in_stride,
                                       uint16_t* out, uint8_t* arg, int out_stride, int groups, int last_active) {
  ForwardRow<16>(w, oy, in, in_stride, out, arg, out_stride, groups, last_active);
}

CREMA_VECTOR_CLONES void ForwardRows8(const PoolingWindows& w, int oy, const uint16_t* in, int in_stride, uint16_t* out,
                                      uint8_t* arg, int out_stride, int, int) {
  ForwardRow<8>(w, oy, in, in_stride, out, arg, out_stride, 1, 8);
}

CREMA_VECTOR_CLONES void BackwardRows16(const PoolingWindows& w, int y, const float* top_diff, const uint8_t* arg,
                                        int out_stride, float* bottom_diff, int in_stride, int active) {
  BackwardRow<16>(w, y, top_diff, arg, out_stride, bottom_diff, in_stride, active);
}

CREMA_VECTOR_CLONES void BackwardRows8(const PoolingWindows& w, int y, const float* top_diff, const uint8_t* arg,
                                       int out_stride, float* bottom_diff, int in_stride) {
  BackwardRow<8>(w, y, top_diff, arg, out_stride, bottom_diff, in_stride, 8);
}

// The bf16 rule's rows (16 lanes: the CPUs that compute in bf16 have AVX-512), for each pair of gradient types.
CREMA_VECTOR_CLONES void RoundedBackwardRows16(const PoolingWindows& w, int y, const float* top_diff,
                                               const uint8_t* arg, int out_stride, float* bottom_diff, int in_stride,
                                               int active) {
  BackwardRow<16, true>(w, y, top_diff, arg, out_stride, bottom_diff, in_stride, active);
}
CREMA_VECTOR_CLONES void RoundedBackwardRows16(const PoolingWindows& w, int y, const uint16_t* top_diff,
                                               const uint8_t* arg, int out_stride, float* bottom_diff, int in_stride,
                                               int active) {
  BackwardRow<16, true>(w, y, top_diff, arg, out_stride, bottom_diff, in_stride, active);
}
CREMA_VECTOR_CLONES void RoundedBackwardRows16(const PoolingWindows& w, int y, const float* top_diff,
                                               const uint8_t* arg, int out_stride, uint16_t* bottom_diff, int in_stride,
                                               int active) {
  BackwardRow<16, true>(w, y, top_diff, arg, out_stride, bottom_diff, in_stride, active);
}
CREMA_VECTOR_CLONES void RoundedBackwardRows16(const PoolingWindows& w, int y, const uint16_t* top_diff,
                                               const uint8_t* arg, int out_stride, uint16_t* bottom_diff, int in_stride,
                                               int active) {
  BackwardRow<16, true>(w, y, top_diff, arg, out_stride, bottom_diff, in_stride, active);
}

// Runs row(n, group, r) for every image, group and row, split over OpenMP's threads where `elements` (the values
// written) are enough (core/threads.hpp). Every value is written by one call, so the split changes no bits.
template <typename Row>
void ForEachRow(int num, int groups, int rows, long long elements, Row row) {
  const long long items = static_cast<long long>(num) * groups * rows;
#pragma omp parallel for schedule(static) if (elements >= ParallelElementThreshold())
  for (long long item = 0; item < items; ++item) {
    const int r = static_cast<int>(item % rows);
    const long long rest = item / rows;
    row(static_cast<int>(rest / groups), static_cast<int>(rest % groups), r);
  }
}

}  // namespace

ChannelLanes::ChannelLanes(Layout layout, int channels, int positions) {
  image_stride = static_cast<long long>(channels) * positions;
  if (layout == Layout::kChannelsLast) {
    lanes = std::min(channels, kWidest);
    groups = (channels + kWidest - 1) / kWidest;
    last_lanes = channels - (groups - 1) * kWidest;
    group_stride = kWidest;
    position_stride = channels;
    return;
  }
  CREMA_CHECK(layout == Layout::kChannelBlocks8 || layout == Layout::kChannelBlocks16)
      << "pooling in lanes takes channel blocks or channels-last, not " << LayoutName(layout);
  lanes = last_lanes = ChannelBlock(layout, channels);
  CREMA_CHECK(channels % lanes == 0) << channels << " channels do not fill blocks of " << lanes;
  groups = channels / lanes;
  group_stride = static_cast<long long>(positions) * lanes;
  position_stride = lanes;
}

namespace {

template <typename T>
void ForwardInLanes(const PoolingWindows& w, Layout layout, int num, int channels, const T* bottom, T* top,
                    uint8_t* argmax) {
  CREMA_CHECK(w.kernel_h * w.kernel_w <= kMostWindowValues)
      << "a window of " << w.kernel_h << " x " << w.kernel_w << " values is more than a byte records";
  const ChannelLanes in(layout, channels, w.height * w.width), out(layout, channels, w.pooled_h * w.pooled_w);
  const bool eight = in.lanes == 8 && layout != Layout::kChannelsLast;
  // Channels-last: every group of a row in one call (the groups lie side by side at each position).
  const bool side_by_side = layout == Layout::kChannelsLast;
  ForEachRow(num, side_by_side ? 1 : in.groups, w.pooled_h, num * out.image_stride, [&](int n, int g, int oy) {
    const T* from = bottom + n * in.image_stride + g * in.group_stride;
    const long long at = n * out.image_stride + g * out.group_stride;
    const int active = g + 1 == in.groups ? in.last_lanes : in.lanes;
    uint8_t* record = argmax == nullptr ? nullptr : argmax + at;
    if (eight)
      ForwardRows8(w, oy, from, in.position_stride, top + at, record, out.position_stride, 1, 8);
    else if (side_by_side)
      ForwardRows16(w, oy, from, in.position_stride, top + at, record, out.position_stride, in.groups, in.last_lanes);
    else
      ForwardRows16(w, oy, from, in.position_stride, top + at, record, out.position_stride, 1, active);
  });
}

}  // namespace

void MaxPoolForwardInLanes(const PoolingWindows& w, Layout layout, int num, int channels, const float* bottom,
                           float* top, uint8_t* argmax) {
  ForwardInLanes(w, layout, num, channels, bottom, top, argmax);
}

void MaxPoolForwardInLanes(const PoolingWindows& w, Layout layout, int num, int channels, const uint16_t* bottom,
                           uint16_t* top, uint8_t* argmax) {
  ForwardInLanes(w, layout, num, channels, bottom, top, argmax);
}

void MaxPoolBackwardInLanes(const PoolingWindows& w, Layout layout, int num, int channels, const float* top_diff,
                            const uint8_t* argmax, float* bottom_diff) {
  const ChannelLanes in(layout, channels, w.height * w.width), out(layout, channels, w.pooled_h * w.pooled_w);
  const bool eight = in.lanes == 8 && layout != Layout::kChannelsLast;
  ForEachRow(num, in.groups, w.height, num * in.image_stride, [&](int n, int g, int y) {
    const long long at = n * out.image_stride + g * out.group_stride;
    float* to = bottom_diff + n * in.image_stride + g * in.group_stride;
    const int active = g + 1 == in.groups ? in.last_lanes : in.lanes;
    if (eight)
      BackwardRows8(w, y, top_diff + at, argmax + at, out.position_stride, to, in.position_stride);
    else
      BackwardRows16(w, y, top_diff + at, argmax + at, out.position_stride, to, in.position_stride, active);
  });
}

namespace {

template <typename TopDiff, typename BottomDiff>
void RoundedBackwardInLanes(const PoolingWindows& w, Layout layout, int num, int channels, const TopDiff* top_diff,
                            const uint8_t* argmax, BottomDiff* bottom_diff) {
  const ChannelLanes in(layout, channels, w.height * w.width), out(layout, channels, w.pooled_h * w.pooled_w);
  CREMA_CHECK(in.lanes == 16 || layout == Layout::kChannelsLast)
      << "the bf16 rule's pooling gradient takes 16 lanes, not " << in.lanes;
  ForEachRow(num, in.groups, w.height, num * in.image_stride, [&](int n, int g, int y) {
    const long long at = n * out.image_stride + g * out.group_stride;
    const int active = g + 1 == in.groups ? in.last_lanes : in.lanes;
    RoundedBackwardRows16(w, y, top_diff + at, argmax + at, out.position_stride,
                          bottom_diff + n * in.image_stride + g * in.group_stride, in.position_stride, active);
  });
}

}  // namespace

void MaxPoolBackwardInLanesBfloat16(const PoolingWindows& w, Layout layout, int num, int channels, const void* top_diff,
                                    bool top_bf16, const uint8_t* argmax, void* bottom_diff, bool bottom_bf16) {
  if (top_bf16 && bottom_bf16)
    RoundedBackwardInLanes(w, layout, num, channels, static_cast<const uint16_t*>(top_diff), argmax,
                           static_cast<uint16_t*>(bottom_diff));
  else if (top_bf16)
    RoundedBackwardInLanes(w, layout, num, channels, static_cast<const uint16_t*>(top_diff), argmax,
                           static_cast<float*>(bottom_diff));
  else if (bottom_bf16)
    RoundedBackwardInLanes(w, layout, num, channels, static_cast<const float*>(top_diff), argmax,
                           static_cast<uint16_t*>(bottom_diff));
  else
    RoundedBackwardInLanes(w, layout, num, channels, static_cast<const float*>(top_diff), argmax,
                           static_cast<float*>(bottom_diff));
}

#pragma GCC diagnostic pop

}  // namespace crema
