// MAX pooling over a blob whose channels lie side by side in memory (core/layout.hpp: channel blocks, or
// channels-last): a window's values for 8 or 16 channels are one vector, so every comparison is a vector's, where
// a plain blob's planes give one channel a value at a time. oneDNN's own pooling in 16-channel blocks took 2.3 ms for
// GoogLeNet's inception_4c pool at batch 10 (a million outputs, a 3 x 3 window each), several times the memory's time.
//
// The results are the native engine's (layers/vision/pooling.hpp), bit for bit: each window starts from its first
// value and takes a later one only where it is greater (the first of equal maxima wins; NaNs are never taken after
// the first value), and backward gathers each input's gradient from the outputs whose windows hold it, in output
// order, into 0. The record of each window's maximum is its position in the (unclipped) window, one byte an
// output, laid out as the top: windows of at most kMostWindowValues values.
#pragma once

#include <cstdint>

#include "core/layout.hpp"
#include "layers/vision/pooling.hpp"

namespace crema {

// The largest window whose positions a byte records.
constexpr int kMostWindowValues = 255;

// Where channel c of image n at spatial position s lies in a blob of `layout` (not plain) with `channels` channels
// and `positions` = H x W positions: the lanes that share a vector are a block's, or channels-last's 16 at a time.
struct ChannelLanes {
  ChannelLanes(Layout layout, int channels, int positions);
  int groups = 0;              // vectors of lanes per image
  int lanes = 0;               // lanes of a whole group (the last of channels-last's may have fewer)
  int last_lanes = 0;          // lanes of the last group
  long long image_stride = 0;  // floats between images
  long long group_stride = 0;  // floats between groups' first values
  int position_stride = 0;     // floats between a lane's values at neighbouring positions
};

// Forward: `top` (and `argmax`, bytes laid out as the top, unless null: no backward) from `bottom`, both in `layout`.
void MaxPoolForwardInLanes(const PoolingWindows& w, Layout layout, int num, int channels, const float* bottom,
                           float* top, uint8_t* argmax);
// The same over bfloat16 values (compared as the floats they stand for; the first of equal maxima wins as above), the
// top in bf16: the bf16 value of the float maximum.
void MaxPoolForwardInLanes(const PoolingWindows& w, Layout layout, int num, int channels, const uint16_t* bottom,
                           uint16_t* top, uint8_t* argmax);
// Backward: `bottom_diff` (overwritten) from `top_diff` and the forward's `argmax`.
void MaxPoolBackwardInLanes(const PoolingWindows& w, Layout layout, int num, int channels, const float* top_diff,
                            const uint8_t* argmax, float* bottom_diff);
// The bf16 rule's backward (a pooling computing in bf16): `top_diff` read as bf16 values (in bf16 where `top_bf16`,
// else floats rounded to bf16), each input's gradient their float sum as above, stored in bf16 where `bottom_bf16`
// (rounded to nearest even: ToBfloat16), else in floats. 16 lanes a group (AVX-512's blocks, or channels-last).
void MaxPoolBackwardInLanesBfloat16(const PoolingWindows& w, Layout layout, int num, int channels, const void* top_diff,
                                    bool top_bf16, const uint8_t* argmax, void* bottom_diff, bool bottom_bf16);

}  // namespace crema
