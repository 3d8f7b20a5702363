// Feature extraction (the extract_features tool, Caffe's usage): runs a net that reads its own data (a Data layer
// in the TEST phase, say) for a number of forward passes and saves the values of some of its blobs, item by item:
//   into databases (LMDB or LevelDB), one per blob: one Datum per item, its values in float_data, its shape the
//     blob's legacy channels x height x width (so a blob of N x D features gives D x 1 x 1; a blob of more than 4
//     axes gives count/N x 1 x 1), keyed by the item's index as 10 zero-padded digits ("0000000042"), as Caffe's
//     tool keys them; no label is set;
//   or into HDF5 files: a float dataset named after each blob, of the blob's shape with its first axis the number
//     of items (N x dims), and, when the net has a blob named `label` that is not itself extracted, a `label`
//     dataset of the same items beside it. Several blobs may go into one file.
// Values are read in crema's plain row-major order, whatever layout the net's plan keeps a blob in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "net/net.hpp"

namespace crema {

enum class FeatureFormat { kLmdb, kLevelDb, kHdf5 };

// "lmdb", "leveldb" or "hdf5" (any case); throws naming the three otherwise.
FeatureFormat ParseFeatureFormat(const std::string& name);

struct FeatureExtraction {
  std::vector<std::string> blob_names;
  // One per blob: a database to create, or an HDF5 file to create (the same file may be named for several blobs).
  std::vector<std::string> outputs;
  FeatureFormat format = FeatureFormat::kLmdb;
  int mini_batches = 0;
};

// Runs the job on `net` (built, its weights loaded); returns the number of items written for each blob. Checks
// everything before the first forward pass: as many outputs as blobs, every blob in the net, no output that exists
// already (nothing is overwritten), no input the net leaves unfilled (an Input layer's top); errors name the blob,
// the file or the net.
std::vector<int64_t> ExtractFeatures(Net* net, const FeatureExtraction& job);

// The key of item `index` in a feature database: 10 zero-padded digits, as Caffe's extract_features writes them.
std::string FeatureKey(int64_t index);

}  // namespace crema
