#include "layers/data/image_data.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "io/image_io.hpp"

namespace crema {

namespace {

template <typename T>
void Shuffle(std::vector<T>* values, RandomStream* random) {
  for (size_t i = values->size(); i > 1; --i) std::swap((*values)[i - 1], (*values)[random->UniformInt(i)]);
}

// Parses "1,2,3" ("" is empty) into ints; false on anything else.
bool ParseInts(const std::string& text, std::vector<int>* values) {
  values->clear();
  if (text.empty()) return true;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    try {
      size_t used = 0;
      values->push_back(std::stoi(part, &used));
      if (used != part.size()) return false;
    } catch (const std::exception&) {
      return false;
    }
  }
  return true;
}

}  // namespace

TransformationParameter ImageDataLayer::MergedTransformParam() const {
  TransformationParameter transform = param_.transform_param();
  const ImageDataParameter& p = param_.image_data_param();
  auto deprecated = [this](const char* field) {
    LOG(WARNING) << describe() << ": image_data_param." << field << " is deprecated; use transform_param." << field;
  };
  if (p.has_scale() && !transform.has_scale()) {
    deprecated("scale");
    transform.set_scale(p.scale());
  }
  if (p.has_mean_file() && !transform.has_mean_file()) {
    deprecated("mean_file");
    transform.set_mean_file(p.mean_file());
  }
  if (p.has_crop_size() && !transform.has_crop_size()) {
    deprecated("crop_size");
    transform.set_crop_size(p.crop_size());
  }
  if (p.has_mirror() && !transform.has_mirror()) {
    deprecated("mirror");
    transform.set_mirror(p.mirror());
  }
  return transform;
}

void ImageDataLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ImageDataParameter& p = param_.image_data_param();
  const std::string& source = p.source();
  CREMA_CHECK(!source.empty()) << describe() << ": image_data_param.source is not set (a list of \"path label\" lines)";
  CREMA_CHECK(p.batch_size() > 0) << describe() << ": image_data_param.batch_size must be positive (it is "
                                  << p.batch_size() << ")";
  CREMA_CHECK((p.new_height() == 0) == (p.new_width() == 0))
      << describe() << ": image_data_param.new_height (" << p.new_height() << ") and new_width (" << p.new_width()
      << ") must both be set (resize) or both be 0";
  batch_size_ = static_cast<int>(p.batch_size());
  shuffle_ = p.shuffle();
  replica_ = context().replica();
  try {
    transformer_ = std::make_unique<DataTransformer>(MergedTransformParam(), phase());
  } catch (const Error& error) {
    CREMA_FAIL() << describe() << ": " << error.what();
  }

  // The list is read as convert_imageset reads it (io/image_set.hpp).
  try {
    lines_ = ReadImageList(source);
  } catch (const Error& error) {
    CREMA_FAIL() << describe() << ": image_data_param.source: " << error.what();
  }
  LOG(INFO) << describe() << ": " << lines_.size() << " images listed in '" << source << "'";

  order_.resize(lines_.size());
  std::iota(order_.begin(), order_.end(), 0);
  if (shuffle_) Shuffle(&order_, random());
  position_ = 0;
  records_read_ = 0;
  if (p.rand_skip() > 0) {
    const uint32_t skip = random()->UniformInt(p.rand_skip());  // 0 to rand_skip - 1
    LOG(INFO) << describe() << ": skipping the first " << skip << " images";
    for (uint32_t i = 0; i < skip; ++i) Advance();
  }

  // The image at the cursor fixes the top shapes (and finds configuration errors now).
  const Datum datum = CurrentDatum();
  std::vector<int> shape;
  try {
    shape = transformer_->InferBlobShape(datum);
  } catch (const Error& error) {
    const ImageListEntry& line = lines_[order_[position_]];
    CREMA_FAIL() << describe() << ": image '" << p.root_folder() + line.path << "' (line " << line.line << " of '"
                 << source << "'): " << error.what();
  }
  shape.insert(shape.begin(), batch_size_);
  top[0]->Reshape(shape);
  if (top.size() > 1) top[1]->Reshape({batch_size_});
  LOG(INFO) << describe() << ": output data size " << top[0]->shape_string();
}

Datum ImageDataLayer::CurrentDatum() const {
  const ImageDataParameter& p = param_.image_data_param();
  const ImageListEntry& line = lines_[order_[position_]];
  try {
    return ReadImageToDatum(p.root_folder() + line.path, line.label, static_cast<int>(p.new_height()),
                            static_cast<int>(p.new_width()), p.is_color() ? ImageColor::kColor : ImageColor::kGray);
  } catch (const Error& error) {
    CREMA_FAIL() << describe() << ": line " << line.line << " of '" << p.source() << "': " << error.what();
  }
  return Datum();
}

void ImageDataLayer::Advance() {
  ++records_read_;
  if (++position_ < static_cast<int>(order_.size())) return;
  position_ = 0;
  if (shuffle_) Shuffle(&order_, random());
}

void ImageDataLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CREMA_CHECK(transformer_ != nullptr && !lines_.empty()) << describe() << ": Forward before the layer was set up";
  for (int i = 0; i < replica_.rank * batch_size_; ++i) Advance();
  std::vector<int> item_shape;
  size_t item_size = 0;
  float* labels = nullptr;
  if (top.size() > 1) {
    if (top[1]->shape() != std::vector<int>{batch_size_}) top[1]->Reshape({batch_size_});
    labels = top[1]->mutable_cpu_data();
  }
  for (int i = 0; i < batch_size_; ++i) {
    const Datum datum = CurrentDatum();
    const ImageListEntry& line = lines_[order_[position_]];
    try {
      const std::vector<int> shape = transformer_->InferBlobShape(datum);
      if (i == 0) {
        item_shape = shape;
        item_size = static_cast<size_t>(shape[0]) * shape[1] * shape[2];
        std::vector<int> batch_shape = shape;
        batch_shape.insert(batch_shape.begin(), batch_size_);
        if (top[0]->shape() != batch_shape) top[0]->Reshape(batch_shape);
      } else {
        CREMA_CHECK(shape == item_shape) << "its shape " << ShapeString(shape) << " differs from that of the batch's "
                                         << "first image, " << ShapeString(item_shape)
                                         << "; the images of one batch must have the same size (set new_height and "
                                         << "new_width, or batch_size 1)";
      }
      transformer_->Transform(datum, top[0]->mutable_cpu_data() + i * item_size, random());
    } catch (const Error& error) {
      CREMA_FAIL() << describe() << ": image '" << param_.image_data_param().root_folder() + line.path << "' (line "
                   << line.line << " of '" << param_.image_data_param().source() << "'): " << error.what();
    }
    if (labels != nullptr) labels[i] = static_cast<float>(line.label);
    Advance();
  }
  for (int i = 0; i < (replica_.count - 1 - replica_.rank) * batch_size_; ++i) Advance();
}

void ImageDataLayer::SaveRuntimeState(LayerRuntimeState* state) const {
  CREMA_CHECK(!lines_.empty()) << describe() << ": cannot save the data cursor before the layer is set up";
  Layer::SaveRuntimeState(state);
  std::string order;
  if (shuffle_) {
    for (size_t i = 0; i < order_.size(); ++i) order += (i ? "," : "") + std::to_string(order_[i]);
  }
  state->set_cursor_key("order=" + order + ";position=" + std::to_string(position_));
  state->set_records_read(records_read_);
}

void ImageDataLayer::RestoreRuntimeState(const LayerRuntimeState& state) {
  CREMA_CHECK(!lines_.empty()) << describe() << ": cannot restore the data cursor before the layer is set up";
  CREMA_CHECK(!state.has_layer() || state.layer() == name())
      << describe() << ": the saved runtime state belongs to layer '" << state.layer() << "'";
  CREMA_CHECK(state.has_cursor_key()) << describe() << ": the saved runtime state has no data cursor (cursor_key)";
  auto bad = [&](const std::string& why) {
    CREMA_FAIL() << describe() << ": the saved data cursor '" << state.cursor_key() << "' does not fit the "
                 << lines_.size() << " lines of '" << param_.image_data_param().source() << "': " << why;
  };
  // "order=<line order, when shuffling>;position=<position>"
  const std::string& key = state.cursor_key();
  const size_t separator = key.find(";position=");
  if (key.rfind("order=", 0) != 0 || separator == std::string::npos) bad("cannot parse it");
  std::vector<int> order, position;
  if (!ParseInts(key.substr(6, separator - 6), &order) || !ParseInts(key.substr(separator + 10), &position) ||
      position.size() != 1) {
    bad("cannot parse it");
  }
  if (shuffle_) {
    std::vector<int> sorted = order, identity(lines_.size());
    std::sort(sorted.begin(), sorted.end());
    std::iota(identity.begin(), identity.end(), 0);
    if (sorted != identity) bad("the line order is not an order of the listed lines");
  } else {
    if (!order.empty()) bad("it was saved with shuffle, which is off now");
    order.resize(lines_.size());
    std::iota(order.begin(), order.end(), 0);
  }
  if (position[0] < 0 || position[0] >= static_cast<int>(lines_.size())) bad("the position is out of range");
  Layer::RestoreRuntimeState(state);
  order_ = order;
  position_ = position[0];
  records_read_ = state.records_read();
}

}  // namespace crema
