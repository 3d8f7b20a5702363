// Parameter initialisation from a FillerParameter: constant, uniform, gaussian, positive_unitball, xavier,
// msra, bilinear.
#pragma once

#include <string>
#include <vector>

#include "core/blob.hpp"
#include "core/random.hpp"

namespace crema {

// Fills blob's data as `param` says. Throws crema::Error naming the filler type when it is unknown or its
// settings do not fit the blob.
void Fill(const FillerParameter& param, Blob* blob, RandomStream* random);

std::vector<std::string> KnownFillerTypes();

}  // namespace crema
