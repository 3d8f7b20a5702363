// A small wrapper over the HDF5 C library for the HDF5Data and HDF5Output layers: open or create a file, read
// the shape and the values of a numeric dataset (as floats, converted from the stored type), and append rows
// to a float dataset whose first axis grows. Every failure raises a crema::Error naming the file (and the
// dataset, where one is involved). HDF5's own printing of its error stack is turned off (for the process) the
// first time a file is opened, since crema reports the errors itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common.hpp"

namespace crema {

class Hdf5File {
 public:
  enum class Mode {
    kRead,       // an existing file, read-only
    kReadWrite,  // an existing file
    kCreate,     // a new file, replacing any file of that name
  };
  Hdf5File(const std::string& path, Mode mode);
  ~Hdf5File();
  Hdf5File(const Hdf5File&) = delete;
  Hdf5File& operator=(const Hdf5File&) = delete;

  const std::string& path() const { return path_; }
  bool HasDataset(const std::string& name) const;
  // The dims of dataset `name`; throws naming the file and the dataset when it is missing or not numeric
  // (integer or floating point).
  std::vector<int64_t> DatasetShape(const std::string& name) const;
  // Every value of dataset `name` as floats, in row-major order.
  std::vector<float> ReadFloats(const std::string& name) const;
  // Appends shape[0] rows of shape[1..] to the float dataset `name`, creating it (first axis unlimited) when the
  // file has none; throws naming the file, the dataset and both shapes when its trailing dims differ.
  void AppendFloats(const std::string& name, const std::vector<int>& shape, const float* values);
  // Throws as AppendFloats would when rows of `shape` cannot be appended to dataset `name` (fine when the
  // dataset does not exist yet), so that a caller appending to several datasets can check them all first.
  void CheckAppendable(const std::string& name, const std::vector<int>& shape) const;
  // Writes everything to disk.
  void Flush();

 private:
  std::string path_;
  int64_t file_ = -1;  // hid_t
};

}  // namespace crema
