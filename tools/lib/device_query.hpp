// What `crema device_query` prints about a GPU: its properties as name/value lines, in Caffe's order where
// Caffe printed the same fact, then what matters to crema (free memory, the CUDA and cuDNN versions).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace crema {

using DeviceFacts = std::vector<std::pair<std::string, std::string>>;

// Throws crema::Error in a CPU-only build, where no CUDA device is visible, or when `gpu_id` does not exist.
DeviceFacts QueryGpu(int gpu_id);

}  // namespace crema
