// HDF5DataLayer ("HDF5Data"): reads batches of rows from HDF5 files. Top i is the dataset of the same name as
// the top ("data", "label", ...) in each file; a dataset's first axis counts the items (rows), the rest is the
// shape of one item, so top i has shape {batch_size, dims of the dataset after the first}. Values are read as
// floats, whatever numeric type the file stores.
//
// hdf5_data_param: source (a text file naming one .h5 file per line; blank lines are skipped, surrounding
// spaces trimmed; a relative path not found as given is looked up beside the list file), batch_size,
// shuffle (false). Every file is opened at set-up and must hold every top's dataset with the same rows and the
// same item shape as the first file's; errors name the list line, the file, the dataset and the shapes.
//
// Batches run across file boundaries: after the last row of a file comes the first of the next, after the
// last file the first again. With shuffle, the order of the files is drawn from the layer's random stream at
// set-up and again at every pass over the list, and the order of each file's rows whenever the layer enters
// that file. Only the file being read is held in memory.
//
// Runtime state (exact resume): the file order, the file and row of the next item, the row order of that file
// (cursor_key, as text), the items read (records_read) and the random stream.
//
// Data parallelism: on replica r of N, each batch is part r of a global batch of N * batch_size consecutive
// items, as for Data.
//
// Differences from Caffe: items are read synchronously (as Caffe's HDF5Data does); shuffle reshuffles the row
// order on entering each file also when the list has one file (as Caffe does); every file is checked at
// set-up rather than when reached; Caffe's multi-GPU split takes every N-th item instead of consecutive parts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.hpp"

namespace crema {

class HDF5DataLayer : public HostDataLayer {
 public:
  using HostDataLayer::HostDataLayer;

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  const char* type() const override { return "HDF5Data"; }
  int MinTopBlobs() const override { return 1; }

  void SaveRuntimeState(LayerRuntimeState* state) const override;
  // Throws naming the layer when the state does not fit the files of the list.
  void RestoreRuntimeState(const LayerRuntimeState& state) override;
  // The datasets of the file loaded now.
  std::vector<HeldBuffer> HeldBuffers() const override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 private:
  // Starts reading the file at file_position_ (row 0, a fresh row order when shuffling).
  void EnterFile();
  // Moves the cursor one item on, to the next file (and the next pass) where needed.
  void Advance();
  // Loads the file `file` (an index into files_) unless it is loaded already.
  void Load(int file);

  std::vector<std::string> files_;
  std::vector<int> list_lines_;  // the line of the list that named each file
  std::vector<int64_t> rows_;
  std::vector<std::string> datasets_;
  std::vector<std::vector<int>> item_shapes_;  // per top, the dims after the first
  std::vector<size_t> item_sizes_;
  int batch_size_ = 0;
  bool shuffle_ = false;
  Replica replica_;

  // The cursor: the next item is row row_order_[row_] (row_ when not shuffling) of file file_order_[file_position_].
  std::vector<int> file_order_;
  int file_position_ = 0;
  std::vector<int64_t> row_order_;
  int64_t row_ = 0;
  uint64_t records_read_ = 0;

  int loaded_file_ = -1;
  std::vector<std::vector<float>> loaded_;  // per top, every value of the loaded file's dataset
};

}  // namespace crema
