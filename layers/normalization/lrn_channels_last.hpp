// Caffe's LRN across channels, forward, over a batch kept channels-last (each position's channels side by side), as
// crema's own loops: oneDNN 2.6's kernel for that layout took 2-3 times its channel-blocked one (GoogLeNet's norm
// layers at batch 10: 3.9 and 5.8 ms against 1.4 and 4.2), and 8-bit convolutions hand their float outputs over
// channels-last. y = x * (k + factor * (sum of the squares of the `size` channels around it))^-beta, the window
// clipped at the first and last channel; the squares summed in channel order. `y` holds floats, or, where
// `quantization` says so (a top the plan keeps in 8 bits, plan_element_types), round(y * scale) saturated to the
// type's range: the integers its 8-bit readers would have made of the floats; or, in bf16, y rounded as its bf16
// readers would have rounded it.
#pragma once

#include "core/element_type.hpp"

namespace crema {

void LRNAcrossChannelsLast(const float* x, void* y, const Quantization& quantization, long long positions, int channels,
                           int size, float k, float factor, float beta);

}  // namespace crema
