// How a blob's values lie in memory. crema's own layout, Caffe's, is row-major over the blob's shape (N x C x H x
// W for images): every layer reads and writes it, and it is the only one a net's inputs and outputs, files and
// tools ever see. Between two layers whose engines both prefer another arrangement (a run of oneDNN layers), the
// net's plan_layouts pass (src/net/passes.hpp) keeps the blob in that arrangement, data and gradient alike, so that
// nothing is reordered between them. Every layout here holds exactly count() values, with no padding, so sizes,
// the memory plan and elementwise rules are the same in all of them.
#pragma once

#include <string>

namespace crema {

enum class Layout {
  kPlain,            // row-major over the shape: NCHW (Caffe's, crema's)
  kChannelsLast,     // N x H x W x C
  kChannelBlocks8,   // N x C/8 x H x W x 8: channels in blocks of 8 (AVX2 kernels), C a multiple of 8
  kChannelBlocks16,  // N x C/16 x H x W x 16 (AVX-512 kernels), C a multiple of 16
};

// "plain", "channels-last", "8-channel blocks", "16-channel blocks"
std::string LayoutName(Layout layout);

// Every layout of a 4-d blob of C channels and S = H x W positions is N x C/b x S x b: the value of item n,
// channel c, position s lies at ((n * C/b + c / b) * S + s) * b + c % b, with b, the channel block, 1 when plain,
// C when channels-last, and 8 or 16 for the blocks. Scale's per-channel loops use this to read any layout.
inline int ChannelBlock(Layout layout, int channels) {
  switch (layout) {
    case Layout::kChannelsLast:
      return channels;
    case Layout::kChannelBlocks8:
      return 8;
    case Layout::kChannelBlocks16:
      return 16;
    case Layout::kPlain:
      break;
  }
  return 1;
}

}  // namespace crema
