#include "layers/data/window_data.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "io/image_io.hpp"
#include "io/proto_io.hpp"

namespace crema {

namespace {

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

// The whole of `text` as an int (or float); false when it is anything else.
bool ParseInt(const std::string& text, int* value) {
  try {
    size_t used = 0;
    *value = std::stoi(text, &used);
    return used == text.size();
  } catch (const std::exception&) {
    return false;
  }
}

bool ParseFloat(const std::string& text, float* value) {
  try {
    size_t used = 0;
    *value = std::stof(text, &used);
    return used == text.size();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

void WindowDataLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const WindowDataParameter& p = param_.window_data_param();
  const TransformationParameter& t = param_.transform_param();
  CREMA_CHECK(!p.source().empty()) << describe() << ": window_data_param.source is not set (a window file)";
  CREMA_CHECK(p.batch_size() > 0) << describe() << ": window_data_param.batch_size must be positive (it is "
                                  << p.batch_size() << ")";
  CREMA_CHECK(p.fg_fraction() >= 0.f && p.fg_fraction() <= 1.f)
      << describe() << ": window_data_param.fg_fraction must be in [0, 1] (it is " << p.fg_fraction() << ")";
  CREMA_CHECK(p.crop_mode() == "warp" || p.crop_mode() == "square")
      << describe() << ": window_data_param.crop_mode is '" << p.crop_mode() << "'; it must be \"warp\" or \"square\"";
  batch_size_ = static_cast<int>(p.batch_size());
  // Truncated, as Caffe does.
  num_foreground_ = static_cast<int>(static_cast<float>(batch_size_) * p.fg_fraction());
  crop_size_ = static_cast<int>(t.has_crop_size() ? t.crop_size() : p.crop_size());
  context_pad_ = static_cast<int>(p.context_pad());
  square_ = p.crop_mode() == "square";
  mirror_ = t.has_mirror() ? t.mirror() : p.mirror();
  scale_ = t.has_scale() ? t.scale() : p.scale();
  CREMA_CHECK(crop_size_ > 0) << describe() << ": transform_param.crop_size (or window_data_param.crop_size) must be "
                              << "set: it is the size of the warped windows";
  CREMA_CHECK(crop_size_ > 2 * context_pad_)
      << describe() << ": crop_size (" << crop_size_ << ") must be larger than twice window_data_param.context_pad ("
      << context_pad_ << ")";

  ReadWindowFile();
  CREMA_CHECK(num_foreground_ == 0 || !foreground_.empty())
      << describe() << ": each batch needs " << num_foreground_ << " foreground windows, but no window of '"
      << p.source() << "' has overlap >= fg_threshold (" << p.fg_threshold() << ")";
  CREMA_CHECK(num_foreground_ == batch_size_ || !background_.empty())
      << describe() << ": each batch needs " << batch_size_ - num_foreground_ << " background windows, but no "
      << "window of '" << p.source() << "' has overlap < bg_threshold (" << p.bg_threshold() << ")";
  LoadMean();

  random();  // the stream exists from the start, so that a state saved before the first batch holds it
  windows_drawn_ = 0;
  top[0]->Reshape({batch_size_, channels_, crop_size_, crop_size_});
  if (top.size() > 1) top[1]->Reshape({batch_size_});
  LOG(INFO) << describe() << ": " << images_.size() << " images, " << foreground_.size() << " foreground and "
            << background_.size() << " background windows; output data size " << top[0]->shape_string();
}

void WindowDataLayer::ReadWindowFile() {
  const WindowDataParameter& p = param_.window_data_param();
  const std::string& source = p.source();
  std::ifstream file(source);
  CREMA_CHECK(file) << describe() << ": cannot open window_data_param.source '" << source << "'";
  std::vector<std::pair<int, std::string>> lines;  // number, trimmed text; blank lines left out
  std::string text;
  for (int number = 1; std::getline(file, text); ++number) {
    text = Trim(text);
    if (!text.empty()) lines.emplace_back(number, text);
  }
  auto at = [&](int number) {
    std::ostringstream where;
    where << describe() << ": line " << number << " of window file '" << source << "'";
    return where.str();
  };

  images_.clear();
  foreground_.clear();
  background_.clear();
  channels_ = 0;
  std::map<int, int> per_class;
  size_t next = 0;
  // The next line, which must hold `what`.
  auto take = [&](const std::string& what) -> const std::pair<int, std::string>& {
    CREMA_CHECK(next < lines.size()) << describe() << ": window file '" << source << "' ends where " << what
                                     << " of image " << images_.size() << " was expected";
    return lines[next++];
  };
  auto take_int = [&](const std::string& what, int minimum) {
    const auto& line = take(what);
    int value = 0;
    CREMA_CHECK(ParseInt(line.second, &value) && value >= minimum)
        << at(line.first) << " (\"" << line.second << "\") should be " << what << ", an integer >= " << minimum;
    return value;
  };
  while (next < lines.size()) {
    const auto& header = lines[next++];
    std::istringstream fields(header.second);
    std::string hash, index, rest;
    fields >> hash >> index;
    int image_index = -1;
    CREMA_CHECK(hash == "#" && ParseInt(index, &image_index) && !(fields >> rest))
        << at(header.first) << " (\"" << header.second << "\") should be \"# <image_index>\"";
    CREMA_CHECK(image_index == static_cast<int>(images_.size()))
        << at(header.first) << ": image index " << image_index << " where " << images_.size()
        << " was expected (images are numbered 0, 1, 2, ... in order)";
    Image image;
    const auto& path = take("the image path");
    image.path = p.root_folder() + path.second;
    image.line = path.first;
    const int channels_line = next < lines.size() ? lines[next].first : 0;
    const int channels = take_int("the number of channels", 1);
    CREMA_CHECK(channels == 1 || channels == 3)
        << at(channels_line) << ": image " << image_index << " has " << channels << " channels; 1 or 3 are read";
    CREMA_CHECK(channels_ == 0 || channels == channels_)
        << at(channels_line) << ": image " << image_index << " has " << channels << " channels, the images before it "
        << channels_ << "; every image must have the same number";
    channels_ = channels;
    image.height = take_int("the image height", 1);
    image.width = take_int("the image width", 1);
    const int count = take_int("the number of windows", 0);
    for (int i = 0; i < count; ++i) {
      const auto& line = take("window " + std::to_string(i));
      std::istringstream in(line.second);
      std::vector<std::string> parts;
      for (std::string part; in >> part;) parts.push_back(part);
      Window window;
      float overlap = 0.f;
      CREMA_CHECK(parts.size() == 6 && ParseInt(parts[0], &window.label) && ParseFloat(parts[1], &overlap) &&
                  ParseInt(parts[2], &window.x1) && ParseInt(parts[3], &window.y1) && ParseInt(parts[4], &window.x2) &&
                  ParseInt(parts[5], &window.y2))
          << at(line.first) << " (\"" << line.second << "\") should be a window of image " << image_index
          << ": \"class_index overlap x1 y1 x2 y2\" (integers but the overlap)";
      CREMA_CHECK(0 <= window.x1 && window.x1 <= window.x2 && window.x2 < image.width && 0 <= window.y1 &&
                  window.y1 <= window.y2 && window.y2 < image.height)
          << at(line.first) << " (\"" << line.second << "\"): the window is empty or leaves image " << image_index
          << " (" << image.width << " wide, " << image.height << " high)";
      window.image = image_index;
      window.line = line.first;
      if (overlap >= p.fg_threshold()) {
        CREMA_CHECK(window.label > 0) << at(line.first) << " (\"" << line.second << "\"): a foreground window "
                                      << "(overlap >= fg_threshold) must have a positive class; 0 is background";
        foreground_.push_back(window);
        ++per_class[window.label];
      } else if (overlap < p.bg_threshold()) {
        window.label = 0;
        background_.push_back(window);
        ++per_class[0];
      }
    }
    if (p.cache_images()) {
      try {
        image.encoded = ReadFileToString(image.path);
      } catch (const Error& error) {
        CREMA_FAIL() << at(image.line) << ": " << error.what();
      }
    }
    images_.push_back(std::move(image));
  }
  CREMA_CHECK(!images_.empty()) << describe() << ": window file '" << source << "' lists no images";
  for (const auto& [label, count] : per_class) LOG(INFO) << describe() << ": class " << label << ": " << count;
}

void WindowDataLayer::LoadMean() {
  const WindowDataParameter& p = param_.window_data_param();
  const TransformationParameter& t = param_.transform_param();
  const bool has_mean_file = t.has_mean_file() || p.has_mean_file();
  const std::string mean_file = t.has_mean_file() ? t.mean_file() : p.mean_file();
  CREMA_CHECK(!(has_mean_file && t.mean_value_size() > 0))
      << describe() << ": give a mean_file or transform_param.mean_value, not both";
  mean_.clear();
  mean_is_image_ = false;
  if (t.mean_value_size() > 0) {
    CREMA_CHECK(t.mean_value_size() == 1 || t.mean_value_size() == channels_)
        << describe() << ": transform_param.mean_value is given " << t.mean_value_size() << " times, but the images "
        << "have " << channels_ << " channel(s); give one value for all channels or one per channel";
    for (int c = 0; c < channels_; ++c) mean_.push_back(t.mean_value(t.mean_value_size() == 1 ? 0 : c));
    return;
  }
  if (!has_mean_file) return;
  BlobProto proto;
  try {
    ReadProtoFromBinaryFile(mean_file, &proto);
  } catch (const Error& error) {
    CREMA_FAIL() << describe() << ": " << error.what();
  }
  const std::vector<int> shape = Blob::ShapeOf(proto);
  CREMA_CHECK(((shape.size() == 4 && shape[0] == 1) || shape.size() == 3) && shape[shape.size() - 3] == channels_ &&
              shape[shape.size() - 2] >= crop_size_ && shape.back() >= crop_size_)
      << describe() << ": mean file '" << mean_file << "' holds a blob of shape " << ShapeString(shape)
      << "; it must be 1x" << channels_ << "xHxW with H and W at least crop_size (" << crop_size_ << ")";
  mean_height_ = shape[shape.size() - 2];
  mean_width_ = shape.back();
  const int64_t count = int64_t{channels_} * mean_height_ * mean_width_;
  if (proto.double_data_size() > 0) {
    CREMA_CHECK(proto.double_data_size() == count) << describe() << ": mean file '" << mean_file << "' holds "
                                                   << proto.double_data_size() << " values, not " << count;
    mean_.assign(proto.double_data().begin(), proto.double_data().end());
  } else {
    CREMA_CHECK(proto.data_size() == count)
        << describe() << ": mean file '" << mean_file << "' holds " << proto.data_size() << " values, not " << count;
    mean_.assign(proto.data().begin(), proto.data().end());
  }
  mean_is_image_ = true;
}

void WindowDataLayer::WriteWindow(const Window& window, bool mirror, float* out) const {
  const Image& image = images_[window.image];
  const std::string& source = param_.window_data_param().source();
  auto where = [&]() {
    std::ostringstream text;
    text << describe() << ": image '" << image.path << "' (line " << image.line << " of window file '" << source
         << "')";
    return text.str();
  };
  const ImageColor color = channels_ == 3 ? ImageColor::kColor : ImageColor::kGray;
  Datum datum;
  try {
    if (!image.encoded.empty()) {
      Datum encoded;
      encoded.set_encoded(true);
      encoded.set_data(image.encoded);
      datum = DecodeDatum(encoded, color);
    } else {
      datum = ReadImageToDatum(image.path, 0, 0, 0, color);
    }
  } catch (const Error& error) {
    CREMA_FAIL() << where() << ": " << error.what();
  }
  CREMA_CHECK(datum.height() == image.height && datum.width() == image.width)
      << where() << " is " << datum.height() << " high and " << datum.width() << " wide, but the window file says "
      << image.height << " and " << image.width;

  // The region to read (inclusive corners), the size it is resized to and where that lands in the output.
  int x1 = window.x1, y1 = window.y1, x2 = window.x2, y2 = window.y2;
  int out_height = crop_size_, out_width = crop_size_, pad_top = 0, pad_left = 0;
  if (context_pad_ > 0 || square_) {
    // Enlarge the window about its centre so that, warped to crop_size, context_pad pixels surround it.
    const float context_scale = static_cast<float>(crop_size_) / static_cast<float>(crop_size_ - 2 * context_pad_);
    float half_height = static_cast<float>(y2 - y1 + 1) / 2.f;
    float half_width = static_cast<float>(x2 - x1 + 1) / 2.f;
    const float center_x = static_cast<float>(x1) + half_width;
    const float center_y = static_cast<float>(y1) + half_height;
    if (square_) half_height = half_width = std::max(half_height, half_width);
    x1 = static_cast<int>(std::round(center_x - half_width * context_scale));
    x2 = static_cast<int>(std::round(center_x + half_width * context_scale));
    y1 = static_cast<int>(std::round(center_y - half_height * context_scale));
    y2 = static_cast<int>(std::round(center_y + half_height * context_scale));
    // Clip it to the image, remembering how far it went beyond each side.
    const int full_height = y2 - y1 + 1, full_width = x2 - x1 + 1;
    const int beyond_left = std::max(0, -x1), beyond_top = std::max(0, -y1);
    const int beyond_right = std::max(0, x2 - image.width + 1), beyond_bottom = std::max(0, y2 - image.height + 1);
    x1 += beyond_left;
    y1 += beyond_top;
    x2 -= beyond_right;
    y2 -= beyond_bottom;
    // The clipped region is scaled as the whole enlarged one would be; the parts beyond the image stay 0.
    const float scale_x = static_cast<float>(crop_size_) / static_cast<float>(full_width);
    const float scale_y = static_cast<float>(crop_size_) / static_cast<float>(full_height);
    out_width = static_cast<int>(std::round(static_cast<float>(x2 - x1 + 1) * scale_x));
    out_height = static_cast<int>(std::round(static_cast<float>(y2 - y1 + 1) * scale_y));
    pad_top = static_cast<int>(std::round(static_cast<float>(beyond_top) * scale_y));
    // Mirrored, the padding on the right of the image lands on the left of the output.
    pad_left = static_cast<int>(std::round(static_cast<float>(mirror ? beyond_right : beyond_left) * scale_x));
    // Rounding may make the resized region and its padding overflow crop_size: trim the region.
    out_height = std::max(1, std::min(out_height, crop_size_ - pad_top));
    out_width = std::max(1, std::min(out_width, crop_size_ - pad_left));
    pad_top = std::min(pad_top, crop_size_ - out_height);
    pad_left = std::min(pad_left, crop_size_ - out_width);
  }
  Datum region;
  try {
    region = CropResizeDatum(datum, x1, y1, x2, y2, out_height, out_width, mirror);
  } catch (const Error& error) {
    CREMA_FAIL() << where() << ", window of line " << window.line << ": " << error.what();
  }

  const int crop = crop_size_;
  std::fill(out, out + static_cast<size_t>(channels_) * crop * crop, 0.f);
  const std::string& bytes = region.data();
  const int mean_top = (mean_height_ - crop) / 2, mean_left = (mean_width_ - crop) / 2;
  for (int c = 0; c < channels_; ++c) {
    for (int h = 0; h < out_height; ++h) {
      for (int w = 0; w < out_width; ++w) {
        const int row = h + pad_top, column = w + pad_left;
        float value = static_cast<float>(
            static_cast<unsigned char>(bytes[(static_cast<size_t>(c) * out_height + h) * out_width + w]));
        if (mean_is_image_) {
          value -= mean_[(static_cast<size_t>(c) * mean_height_ + row + mean_top) * mean_width_ + column + mean_left];
        } else if (!mean_.empty()) {
          value -= mean_[c];
        }
        out[(static_cast<size_t>(c) * crop + row) * crop + column] = value * scale_;
      }
    }
  }
}

void WindowDataLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CREMA_CHECK(!images_.empty()) << describe() << ": Forward before the layer was set up";
  const std::vector<int> shape = {batch_size_, channels_, crop_size_, crop_size_};
  if (top[0]->shape() != shape) top[0]->Reshape(shape);
  float* data = top[0]->mutable_cpu_data();
  float* labels = nullptr;
  if (top.size() > 1) {
    if (top[1]->shape() != std::vector<int>{batch_size_}) top[1]->Reshape({batch_size_});
    labels = top[1]->mutable_cpu_data();
  }
  const bool may_mirror = mirror_ && phase() == TRAIN;
  const size_t item_size = static_cast<size_t>(channels_) * crop_size_ * crop_size_;
  // Background windows first, then foreground, as in Caffe.
  for (int item = 0; item < batch_size_; ++item) {
    const bool foreground = item >= batch_size_ - num_foreground_;
    const std::vector<Window>& set = foreground ? foreground_ : background_;
    const Window& window = set[random()->UniformInt(static_cast<uint32_t>(set.size()))];
    const bool mirror = may_mirror && random()->UniformInt(2) == 1;
    WriteWindow(window, mirror, data + item * item_size);
    if (labels != nullptr) labels[item] = static_cast<float>(window.label);
    ++windows_drawn_;
  }
}

void WindowDataLayer::SaveRuntimeState(LayerRuntimeState* state) const {
  CREMA_CHECK(!images_.empty()) << describe() << ": cannot save the runtime state before the layer is set up";
  Layer::SaveRuntimeState(state);
  state->set_records_read(windows_drawn_);
}

void WindowDataLayer::RestoreRuntimeState(const LayerRuntimeState& state) {
  CREMA_CHECK(!images_.empty()) << describe() << ": cannot restore the runtime state before the layer is set up";
  CREMA_CHECK(!state.has_layer() || state.layer() == name())
      << describe() << ": the saved runtime state belongs to layer '" << state.layer() << "'";
  CREMA_CHECK(state.has_random_stream()) << describe() << ": the saved runtime state has no random stream";
  Layer::RestoreRuntimeState(state);
  windows_drawn_ = state.records_read();
}

}  // namespace crema
