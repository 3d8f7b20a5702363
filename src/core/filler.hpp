// Parameter initialisation from a FillerParameter: constant, uniform, gaussian, positive_unitball, xavier,
// msra, bilinear.
#pragma once

#include <string>
#include <vector>

#include "core/blob.hpp"
#include "core/random.hpp"

namespace crema {

// Fills blob's data as `param` says. Throws crema::Error naming the filler type when it is unknown or its
// settings do not fit the blob. The random fillers take one 64-bit key from `random` per fill (two draws, whatever
// the blob's size; a sparse Gaussian two keys) and draw value i from (key, i) with Philox4x32-10 (core/philox.hpp),
// on every OpenMP thread: the same values for a seed whatever the thread count. Gaussian values are Box-Muller
// pairs (radius from 24 random bits, so at most 5.8 standard deviations from the mean); uniform ones have 24
// random bits.
void Fill(const FillerParameter& param, Blob* blob, RandomStream* random);

std::vector<std::string> KnownFillerTypes();

}  // namespace crema
