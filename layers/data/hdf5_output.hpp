// HDF5OutputLayer ("HDF5Output"): writes its two bottoms to an HDF5 file: bottom 0 to the dataset "data",
// bottom 1 to the dataset "label", as 32-bit floats. Each forward pass appends the bottoms' rows (their first
// axis) to the datasets, whose first axis grows; the other axes must keep the shape of the first pass.
//
// hdf5_output_param: file_name (required). The file is created (replacing one of that name) at set-up; every
// forward pass reads it into memory, appends, and writes it back whole under a temporary name renamed over the
// file (io/hdf5.hpp), so after each pass it is complete and readable by any HDF5 reader, and a full disk leaves
// the previous pass's file. The cost: each pass rewrites everything written so far.
//
// Bottoms: data, label (the same number of rows). No tops, no gradient, no runtime state.
//
// Differences from Caffe: Caffe writes the datasets once and fails on a second forward pass; here every pass
// appends. The datasets are created on the first forward pass, so a file from a net that never ran forward
// holds none.
#pragma once

#include <string>
#include <vector>

#include "layers/layer.hpp"

namespace crema {

class HDF5OutputLayer : public Layer {
 public:
  using Layer::Layer;

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  const char* type() const override { return "HDF5Output"; }
  bool Replayable() const override { return false; }  // its forward writes a file
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 0; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

  const std::string& file_name() const { return file_name_; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}
  // The bottoms are read on the host.
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    Forward_cpu(bottom, top);
  }
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}

 private:
  std::string file_name_;
};

}  // namespace crema
