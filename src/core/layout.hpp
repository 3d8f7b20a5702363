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

}  // namespace crema
