// A small wrapper over the HDF5 C library for the HDF5Data and HDF5Output layers and for Caffe's HDF5 snapshots:
// open or create a file (read from disk, or built in memory and written atomically), read the shape and the values
// of a numeric dataset (as floats, converted from the stored type), append rows to a float dataset whose first
// axis grows, write whole float, int, string and byte datasets, and make and list groups. Names may be paths
// ("data/conv1/0"). Every failure raises a crema::Error naming the file (and the dataset or group, where one is
// involved). HDF5's own printing of its error stack is turned off (for the process) the first time a file is
// opened, since crema reports the errors itself.
//
// Files that are written are never written by HDF5 itself: they are built in memory (HDF5's core driver, no
// backing store) and Flush() writes the whole image with WriteStringToFileAtomically. A failure (a full disk,
// a missing folder) then raises the system's reason, leaves no partial file under the final name (an earlier
// file of that name stays as it was) and leaves HDF5 nothing half-written to trip over at exit: writing through
// HDF5's own file driver onto a full disk left a file handle that neither flushed nor closed, and HDF5's
// shutdown at exit crashed on it.
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
    kReadWrite,  // an existing file, read into memory; Flush() writes it back
    kCreate,     // a new, empty file in memory; Flush() writes it to `path`, replacing any file of that name
    kInMemory,   // a new file held in memory; `path` only names it in errors. Image() gives its bytes.
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
  // Writes the whole file to `path` atomically (kCreate, kReadWrite); throws naming the path and the system's
  // reason ("No space left on device") when it cannot, in which case the file at `path` is as it was before.
  // Until then nothing is on disk, so a file abandoned after an error (or never flushed) leaves nothing.
  void Flush();

  bool HasGroup(const std::string& name) const;
  // Creates group `name` and any missing groups on its path (so a layer named "inception/1x1" is a group
  // "1x1" inside a group "inception").
  void CreateGroup(const std::string& name);
  // The names of the links in group `name` ("/" for the root), in name order.
  std::vector<std::string> Members(const std::string& group) const;

  // Whole datasets, written once (a dataset of that name must not exist yet). Floats are stored as 32-bit IEEE
  // values in `shape` (no axes: a scalar); an int as a 32-bit integer of shape (1), as Caffe's solver states
  // hold "iter"; a string as a scalar, fixed-length, NUL-terminated string, as Caffe's "learned_net"; bytes as
  // unsigned 8-bit integers of shape (size).
  void WriteFloats(const std::string& name, const std::vector<int>& shape, const float* values);
  void WriteInt(const std::string& name, int value);
  void WriteString(const std::string& name, const std::string& value);
  void WriteBytes(const std::string& name, const std::string& bytes);
  // Reads what the writers above write; ReadInt takes any integer dataset of one element, ReadString fixed- and
  // variable-length strings. Each throws naming the file and the dataset when it is missing or of another kind.
  int ReadInt(const std::string& name) const;
  std::string ReadString(const std::string& name) const;
  std::string ReadBytes(const std::string& name) const;

  // The bytes of a kInMemory file, complete as a file on disk would be after closing it.
  std::string Image();

 private:
  std::string path_;
  Mode mode_;
  int64_t file_ = -1;  // hid_t
};

// Whether the file at `path` starts with HDF5's signature (at offset 0, or 512, 1024, 2048... where a user block
// precedes it), whatever its name. False when it cannot be read.
bool IsHdf5File(const std::string& path);

}  // namespace crema
