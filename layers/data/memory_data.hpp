// MemoryDataLayer ("MemoryData"): hands the net batches of items that the program holds in memory, given to
// the layer through Reset (a C++ API; there is nothing to read from disk).
//
// memory_data_param: batch_size, channels, height, width (each must be positive).
// Tops: data {batch_size, channels, height, width} and label {batch_size}.
//
// Reset(data, labels, n) copies n items (n * channels * height * width floats, n labels); n must be a positive
// multiple of batch_size. Each forward pass returns the next batch_size items, and after the last item the
// first one follows again. set_batch_size changes the batch size (the items held must still divide into it).
//
// Runtime state: the position of the next item (records_read). Reset starts again at the first item, so a
// program that resumes a solver calls Reset with the same items first, and restoring then continues exactly
// where the saved run stood.
//
// Differences from Caffe: the items are copied, so the caller may free its arrays after Reset (Caffe keeps the
// caller's pointers). As in Caffe, transform_param is not applied to the raw float arrays (a transform_param
// is accepted and ignored, with a warning); Caffe's AddDatumVector / AddMatVector are not provided. Under data
// parallelism every replica reads its own layer's items: the program feeds each replica its share.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class MemoryDataLayer : public HostDataLayer {
 public:
  using HostDataLayer::HostDataLayer;

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  const char* type() const override { return "MemoryData"; }
  int ExactNumTopBlobs() const override { return 2; }

  // Copies n items: data holds n * channels * height * width floats, labels n floats. Throws (naming the layer)
  // when a pointer is null or n is not a positive multiple of the batch size. The next batch starts at item 0.
  void Reset(const float* data, const float* labels, int n);
  // Changes the batch size; the tops take the new size on the next forward pass.
  void set_batch_size(int batch_size);

  int batch_size() const { return batch_size_; }
  int channels() const { return channels_; }
  int height() const { return height_; }
  int width() const { return width_; }
  // The number of items held (0 before Reset).
  int items() const { return items_; }

  void SaveRuntimeState(LayerRuntimeState* state) const override;
  void RestoreRuntimeState(const LayerRuntimeState& state) override;
  // The items it was given (Reset copies them).
  std::vector<HeldBuffer> HeldBuffers() const override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Batches are copied on the host; the next layer's gpu_data() copies them over.

 private:
  int batch_size_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  int items_ = 0;
  // The item the next batch starts at.
  int position_ = 0;
  std::vector<float> data_;
  std::vector<float> labels_;
};

}  // namespace crema
