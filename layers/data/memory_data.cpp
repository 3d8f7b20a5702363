#include "layers/data/memory_data.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cstddef>

namespace crema {

void MemoryDataLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const MemoryDataParameter& p = param_.memory_data_param();
  auto positive = [this](const char* field, uint32_t value, bool given) {
    CREMA_CHECK(given && value > 0) << describe() << ": memory_data_param." << field << " must be positive"
                                    << (given ? " (it is " + std::to_string(value) + ")" : " (it is not set)");
    return static_cast<int>(value);
  };
  batch_size_ = positive("batch_size", p.batch_size(), p.has_batch_size());
  channels_ = positive("channels", p.channels(), p.has_channels());
  height_ = positive("height", p.height(), p.has_height());
  width_ = positive("width", p.width(), p.has_width());
  if (param_.has_transform_param()) {
    LOG(WARNING) << describe() << ": transform_param is not applied to the arrays given to MemoryData (as in Caffe)";
  }
  items_ = 0;
  position_ = 0;
  data_.clear();
  labels_.clear();
}

void MemoryDataLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  top[0]->Reshape({batch_size_, channels_, height_, width_});
  top[1]->Reshape({batch_size_});
}

void MemoryDataLayer::Reset(const float* data, const float* labels, int n) {
  CREMA_CHECK(data != nullptr && labels != nullptr) << describe() << ": Reset needs both a data and a label array";
  CREMA_CHECK(n > 0 && n % batch_size_ == 0) << describe() << ": Reset was given " << n << " items, which is not a "
                                             << "positive multiple of the batch size " << batch_size_;
  const size_t item_size = static_cast<size_t>(channels_) * height_ * width_;
  data_.assign(data, data + item_size * n);
  labels_.assign(labels, labels + n);
  items_ = n;
  position_ = 0;
}

void MemoryDataLayer::set_batch_size(int batch_size) {
  CREMA_CHECK(batch_size > 0) << describe() << ": the batch size must be positive (it is " << batch_size << ")";
  CREMA_CHECK(items_ == 0 || items_ % batch_size == 0)
      << describe() << ": the layer holds " << items_ << " items, which is not a multiple of the new batch size "
      << batch_size;
  batch_size_ = batch_size;
  position_ = items_ == 0 ? 0 : position_ % items_;
}

void MemoryDataLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CREMA_CHECK(items_ > 0) << describe() << ": no data; call Reset(data, labels, n) before the forward pass";
  if (top[0]->shape() != std::vector<int>{batch_size_, channels_, height_, width_} ||
      top[1]->shape() != std::vector<int>{batch_size_}) {
    Reshape(bottom, top);
  }
  const size_t item_size = static_cast<size_t>(channels_) * height_ * width_;
  float* out_data = top[0]->mutable_cpu_data();
  float* out_labels = top[1]->mutable_cpu_data();
  for (int i = 0; i < batch_size_; ++i) {
    const int item = (position_ + i) % items_;
    std::copy_n(data_.data() + item * item_size, item_size, out_data + i * item_size);
    out_labels[i] = labels_[item];
  }
  position_ = (position_ + batch_size_) % items_;
}

void MemoryDataLayer::SaveRuntimeState(LayerRuntimeState* state) const {
  Layer::SaveRuntimeState(state);
  state->set_records_read(static_cast<uint64_t>(position_));
}

void MemoryDataLayer::RestoreRuntimeState(const LayerRuntimeState& state) {
  CREMA_CHECK(!state.has_layer() || state.layer() == name())
      << describe() << ": the saved runtime state belongs to layer '" << state.layer() << "'";
  Layer::RestoreRuntimeState(state);
  const uint64_t position = state.records_read();
  CREMA_CHECK(items_ == 0 || position < static_cast<uint64_t>(items_))
      << describe() << ": the saved position, item " << position << ", is past the " << items_
      << " items the layer holds; Reset it with the data it was saved with";
  position_ = static_cast<int>(position);
}

std::vector<Layer::HeldBuffer> MemoryDataLayer::HeldBuffers() const {
  if (data_.empty() && labels_.empty()) return {};
  return {{"the " + std::to_string(items_) + " items given", sizeof(float) * (data_.size() + labels_.size()),
           Device::kCPU}};
}

}  // namespace crema
