#include "core/blob.hpp"

#include <climits>
#include <cmath>
#include <cstdint>
#include <sstream>

namespace crema {

size_t ElementBytes(ElementType type) {
  switch (type) {
    case ElementType::kFloat32:
      return sizeof(float);
    case ElementType::kBfloat16:
    case ElementType::kFloat16:
      return sizeof(uint16_t);
    case ElementType::kUInt8:
    case ElementType::kInt8:
      return 1;
  }
  return 1;  // not reached: every type is named above
}

std::string ElementTypeName(ElementType type) {
  switch (type) {
    case ElementType::kFloat32:
      return "32-bit floats";
    case ElementType::kUInt8:
      return "unsigned 8-bit integers";
    case ElementType::kInt8:
      return "signed 8-bit integers";
    case ElementType::kBfloat16:
      return "bfloat16";
    case ElementType::kFloat16:
      return "float16";
  }
  return "unknown";
}

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFloat32:
      return "float32";
    case Precision::kBfloat16:
      return "bfloat16";
    case Precision::kFloat16:
      return "float16";
  }
  return "unknown";
}

Precision ParsePrecision(const std::string& text, const std::string& where) {
  if (text == "fp32" || text == "FLOAT32" || text == "float32") return Precision::kFloat32;
  if (text == "bf16" || text == "BFLOAT16" || text == "bfloat16") return Precision::kBfloat16;
  if (text == "fp16" || text == "FLOAT16" || text == "float16") return Precision::kFloat16;
  throw Error(where + ": '" + text + "' is no precision; use fp32, bf16 or fp16");
}

std::string LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kPlain:
      return "plain";
    case Layout::kChannelsLast:
      return "channels-last";
    case Layout::kChannelBlocks8:
      return "8-channel blocks";
    case Layout::kChannelBlocks16:
      return "16-channel blocks";
  }
  return "unknown";
}

std::string ShapeString(const std::vector<int>& shape) {
  std::ostringstream out;
  int64_t count = 1;
  bool overflow = false;  // a mistyped shape can exceed even 64 bits; the message must still be right
  for (int dim : shape) {
    out << dim << " ";
    overflow = overflow || __builtin_mul_overflow(count, static_cast<int64_t>(dim), &count);
  }
  if (overflow) {
    out << "(more than 2^63 values)";
  } else {
    out << "(" << count << ")";
  }
  return out.str();
}

void Blob::Reshape(const std::vector<int>& shape) {
  CREMA_CHECK(shape.size() <= static_cast<size_t>(kMaxAxes))
      << "a blob may have at most " << kMaxAxes << " axes, got " << shape.size();
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    CREMA_CHECK(shape[i] >= 0) << "blob shape " << ShapeString(shape) << " has a negative axis " << i;
    count *= shape[i];
    CREMA_CHECK(count <= INT_MAX) << "a blob of shape " << ShapeString(shape)
                                  << " would hold more than 2^31-1 values, the most a blob can index";
  }
  // A view is checked before anything changes, so a refused reshape leaves the blob as it was.
  for (const Storage* storage : {&data_, &diff_}) {
    CREMA_CHECK(!storage->is_view ||
                (storage == &data_ ? FloatsFor(count) : FloatsFor(count, diff_type_)) <= storage->available())
        << "cannot reshape a blob to " << ShapeString(shape) << ": its " << (storage == &data_ ? "data" : "diff")
        << " is a view of " << storage->available() << " values of another blob's memory, which it may not grow";
  }
  shape_ = shape;
  count_ = static_cast<int>(count);
  Fit(&data_, "data");
  Fit(&diff_, "diff");
}

size_t Blob::Storage::available() const {
  if (!memory) return 0;
  const size_t floats = memory->size() / sizeof(float);
  return floats > offset ? floats - offset : 0;
}

const float* Blob::Storage::read(Device device) const {
  if (!memory) return nullptr;
  const void* base = device == Device::kGPU ? memory->gpu_data() : memory->cpu_data();
  return static_cast<const float*>(base) + offset;
}

float* Blob::Storage::write(Device device) {
  if (!memory) return nullptr;
  void* base = device == Device::kGPU ? memory->mutable_gpu_data() : memory->mutable_cpu_data();
  return static_cast<float*>(base) + offset;
}

void Blob::Fit(Storage* storage, const char* what) {
  const size_t needed = Needed(storage);
  if (storage->memory && needed <= storage->available()) return;
  CREMA_CHECK(!storage->is_view) << "a blob of shape " << shape_string() << " views only " << storage->available()
                                 << " values of another blob's " << what;
  // An owner whose storage is too small (or shared by views the net will re-point) gets storage of its own.
  storage->memory = std::make_shared<SyncedMemory>(needed * sizeof(float));
  storage->offset = 0;
}

void Blob::Share(Storage* mine, const Storage& theirs, const Blob& source, const char* what) {
  CREMA_CHECK(Needed(mine) <= theirs.available())
      << "cannot share " << what << ": a blob of shape " << shape_string() << " does not fit in the "
      << theirs.available() << " values that the blob of shape " << source.shape_string() << " sees";
  *mine = Storage{theirs.memory, theirs.offset, true};
}

void Blob::ShareData(const Blob& source) { Share(&data_, source.data_, source, "data"); }
void Blob::ShareDiff(const Blob& source) { Share(&diff_, source.diff_, source, "diff"); }

void Blob::ViewOf(const Blob& source, bool with_diff) {
  shape_ = source.shape_;
  count_ = source.count_;
  quantization_ = source.quantization_;  // the same bytes, the same values
  data_ = Storage{source.data_.memory, source.data_.offset, true};
  if (with_diff) {
    diff_type_ = source.diff_type_;
    diff_ = Storage{source.diff_.memory, source.diff_.offset, true};
  } else {
    // The diff stays this blob's: its own memory, or a slot of some larger buffer (the memory plan's arena) while
    // the count fits there; never the source's.
    const bool sources = diff_.memory == source.diff_.memory && diff_.offset == source.diff_.offset;
    if (diff_.is_view && (sources || diff_floats() > diff_.available())) diff_ = Storage{};
    Fit(&diff_, "diff");
  }
}

void Blob::ViewData(const std::shared_ptr<SyncedMemory>& memory, size_t offset, const std::vector<int>& shape) {
  CREMA_CHECK(memory != nullptr) << "cannot view a missing buffer";
  const Storage view{memory, offset, true};
  int64_t count = 1;
  for (int dim : shape) count *= dim;
  CREMA_CHECK(count >= 0 && FloatsFor(count) <= view.available())
      << "a view of shape " << ShapeString(shape) << " from value " << offset << " does not fit in a buffer of "
      << memory->size() / sizeof(float) << " values";
  data_ = view;
  shape_ = shape;
  count_ = static_cast<int>(count);
  Fit(&diff_, "diff");
}

void Blob::ViewDiff(const std::shared_ptr<SyncedMemory>& memory, size_t offset) {
  CREMA_CHECK(memory != nullptr) << "cannot view a missing buffer";
  const Storage view{memory, offset, true};
  CREMA_CHECK(diff_floats() <= view.available())
      << "a view of shape " << shape_string() << " from value " << offset << " does not fit in a buffer of "
      << memory->size() / sizeof(float) << " values";
  diff_ = view;
}

void Blob::set_quantization(const Quantization& quantization) {
  CREMA_CHECK(!quantization.integers() || (std::isfinite(quantization.scale) && quantization.scale > 0.f))
      << "a blob of shape " << shape_string() << " cannot hold " << ElementTypeName(quantization.type) << " of scale "
      << quantization.scale << ": a scale is a positive number";
  quantization_ = quantization;
  if (!quantization_.integers()) quantization_.scale = 1.f;  // floats and the 16-bit floats have no scale
  Fit(&data_, "data");
}

void Blob::set_diff_type(ElementType type) {
  CREMA_CHECK(type == ElementType::kFloat32 || type == ElementType::kBfloat16)
      << "a blob's gradient holds 32-bit floats or bfloat16, not " << ElementTypeName(type);
  diff_type_ = type;
  Fit(&diff_, "diff");
}

void Blob::RefuseFloatAccess(bool gradient) const {
  throw Error("a blob of shape " + shape_string() + (gradient ? " holds its gradient in " : " holds ") +
              ElementTypeName(gradient ? diff_type_ : quantization_.type) +
              " (the net's plan passes it between two steps that read and write that type), not 32-bit floats; "
              "build the net with CREMA_ELEMENT_TYPES=float set to read it as floats");
}

void Blob::OwnStorage(bool gradient) {
  Storage& storage = gradient ? diff_ : data_;
  storage = Storage{};
  Fit(&storage, gradient ? "diff" : "data");
}

std::vector<int> ShapeFromProto(const BlobShape& shape) {
  std::vector<int> dims;
  for (int i = 0; i < shape.dim_size(); ++i) {
    CREMA_CHECK(shape.dim(i) >= 0 && shape.dim(i) <= INT_MAX)
        << "blob dimension " << shape.dim(i) << " is out of range";
    dims.push_back(static_cast<int>(shape.dim(i)));
  }
  return dims;
}

int Blob::count(int start_axis, int end_axis) const {
  CREMA_CHECK(start_axis >= 0 && start_axis <= end_axis && end_axis <= num_axes())
      << "axis range [" << start_axis << ", " << end_axis << ") is outside a blob of shape " << shape_string();
  int result = 1;
  for (int i = start_axis; i < end_axis; ++i) result *= shape_[i];
  return result;
}

int Blob::CanonicalAxisIndex(int axis) const {
  CREMA_CHECK(axis >= -num_axes() && axis < num_axes())
      << "axis " << axis << " is out of range for a blob of shape " << shape_string() << " (" << num_axes() << " axes)";
  return axis < 0 ? axis + num_axes() : axis;
}

std::string Blob::shape_string() const { return ShapeString(shape_); }

int Blob::LegacyShape(int index) const {
  CREMA_CHECK(num_axes() <= 4) << "the 4-d view is undefined for a blob of shape " << shape_string();
  if (index >= num_axes()) return 1;
  return shape_[index];
}

int Blob::offset(int n, int c, int h, int w) const { return ((n * channels() + c) * height() + h) * width() + w; }

int Blob::offset(const std::vector<int>& indices) const {
  int result = 0;
  for (int i = 0; i < num_axes(); ++i) {
    result *= shape_[i];
    if (i < static_cast<int>(indices.size())) result += indices[i];
  }
  return result;
}

void Blob::AddDerivedCopy(const std::shared_ptr<DerivedCopy>& copy) {
  // Forget the copies whose engines dropped them, and add this one once.
  std::vector<std::weak_ptr<DerivedCopy>> live;
  for (const std::weak_ptr<DerivedCopy>& held : derived_copies_) {
    const std::shared_ptr<DerivedCopy> kept = held.lock();
    if (kept && kept != copy) live.push_back(held);
  }
  live.push_back(copy);
  derived_copies_ = std::move(live);
}

std::vector<std::shared_ptr<DerivedCopy>> Blob::DerivedCopies() const {
  std::vector<std::shared_ptr<DerivedCopy>> live;
  for (const std::weak_ptr<DerivedCopy>& held : derived_copies_)
    if (std::shared_ptr<DerivedCopy> kept = held.lock()) live.push_back(std::move(kept));
  return live;
}

void Blob::set_data(float value) {
  float* data = mutable_cpu_data();
  for (int i = 0; i < count_; ++i) data[i] = value;
}

void Blob::set_diff(float value) {
  float* diff = mutable_cpu_diff();
  for (int i = 0; i < count_; ++i) diff[i] = value;
}

std::vector<int> Blob::ShapeOf(const BlobProto& proto) {
  std::vector<int> shape;
  if (proto.has_shape()) {
    shape = ShapeFromProto(proto.shape());
  } else if (proto.has_num() || proto.has_channels() || proto.has_height() || proto.has_width()) {
    shape = {proto.num(), proto.channels(), proto.height(), proto.width()};
  }
  return shape;
}

void Blob::FromProto(const BlobProto& proto, bool reshape) {
  const std::vector<int> stored = ShapeOf(proto);
  if (reshape) {
    Reshape(stored);
  } else {
    CREMA_CHECK(stored == shape_) << "stored blob has shape " << ShapeString(stored) << " but " << shape_string()
                                  << " is expected";
  }
  float* data = mutable_cpu_data();
  if (proto.double_data_size() > 0) {
    CREMA_CHECK(proto.double_data_size() == count_)
        << "stored blob of shape " << shape_string() << " holds " << proto.double_data_size() << " values";
    for (int i = 0; i < count_; ++i) data[i] = static_cast<float>(proto.double_data(i));
  } else {
    CREMA_CHECK(proto.data_size() == count_)
        << "stored blob of shape " << shape_string() << " holds " << proto.data_size() << " values";
    for (int i = 0; i < count_; ++i) data[i] = proto.data(i);
  }
  if (proto.double_diff_size() > 0) {
    CREMA_CHECK(proto.double_diff_size() == count_) << "stored diff does not match shape " << shape_string();
    float* diff = mutable_cpu_diff();
    for (int i = 0; i < count_; ++i) diff[i] = static_cast<float>(proto.double_diff(i));
  } else if (proto.diff_size() > 0) {
    CREMA_CHECK(proto.diff_size() == count_) << "stored diff does not match shape " << shape_string();
    float* diff = mutable_cpu_diff();
    for (int i = 0; i < count_; ++i) diff[i] = proto.diff(i);
  }
}

void Blob::ToProto(BlobProto* proto, bool write_diff) const {
  // Files hold plain values only; a blob in an engine's layout lives between two layers and is never written.
  CREMA_CHECK(layout_ == Layout::kPlain) << "a blob of shape " << shape_string() << " in the " << LayoutName(layout_)
                                         << " layout cannot be written to a file; only plain blobs are";
  proto->Clear();
  for (int dim : shape_) proto->mutable_shape()->add_dim(dim);
  if (count_ == 0) return;
  const float* data = cpu_data();
  proto->mutable_data()->Reserve(count_);
  for (int i = 0; i < count_; ++i) proto->add_data(data[i]);
  if (write_diff) {
    const float* diff = cpu_diff();
    proto->mutable_diff()->Reserve(count_);
    for (int i = 0; i < count_; ++i) proto->add_diff(diff[i]);
  }
}

namespace {

// The values of `blob`, in the order they lie, as floats (8-bit integers divided by their scale).
std::vector<float> StoredValues(const Blob& blob) {
  const Quantization& q = blob.quantization();
  const size_t count = static_cast<size_t>(blob.count());
  if (q.floats()) return std::vector<float>(blob.cpu_data(), blob.cpu_data() + count);
  std::vector<float> values(count);
  if (IsHalfType(q.type)) {
    const auto* stored = static_cast<const uint16_t*>(blob.cpu_bytes());
    for (size_t i = 0; i < count; ++i) values[i] = FromHalf(q.type == ElementType::kBfloat16, stored[i]);
    return values;
  }
  for (size_t i = 0; i < count; ++i) {
    const int stored = q.type == ElementType::kUInt8 ? static_cast<const uint8_t*>(blob.cpu_bytes())[i]
                                                     : static_cast<const int8_t*>(blob.cpu_bytes())[i];
    values[i] = static_cast<float>(stored) / q.scale;
  }
  return values;
}

// `stored`, values of `blob`'s shape in the order its layout keeps them, in plain row-major order.
std::vector<float> InPlainOrder(const Blob& blob, std::vector<float> stored) {
  if (blob.layout() == Layout::kPlain) return stored;
  const float* data = stored.data();
  CREMA_CHECK(blob.num_axes() == 4) << "a blob of shape " << blob.shape_string() << " is kept in "
                                    << LayoutName(blob.layout()) << ", which only 4-d blobs have";
  const int num = blob.shape(0), channels = blob.shape(1);
  const int positions = blob.shape(2) * blob.shape(3);
  const int block = ChannelBlock(blob.layout(), channels);
  std::vector<float> plain(blob.count());
  for (int n = 0; n < num; ++n)
    for (int c = 0; c < channels; ++c)
      for (int s = 0; s < positions; ++s)
        plain[(static_cast<size_t>(n) * channels + c) * positions + s] =
            data[((static_cast<size_t>(n) * (channels / block) + c / block) * positions + s) * block + c % block];
  return plain;
}

}  // namespace

std::vector<float> PlainValues(const Blob& blob) { return InPlainOrder(blob, StoredValues(blob)); }

std::vector<float> PlainDiffs(const Blob& blob) {
  const size_t count = static_cast<size_t>(blob.count());
  if (blob.diff_type() == ElementType::kFloat32)
    return InPlainOrder(blob, std::vector<float>(blob.cpu_diff(), blob.cpu_diff() + count));
  CREMA_CHECK(blob.diff_type() == ElementType::kBfloat16)
      << "a gradient in " << ElementTypeName(blob.diff_type()) << " has no values to read";
  std::vector<float> values(count);
  const auto* stored = static_cast<const uint16_t*>(blob.cpu_diff_bytes());
  for (size_t i = 0; i < count; ++i) values[i] = FromBfloat16(stored[i]);
  return InPlainOrder(blob, std::move(values));
}

}  // namespace crema
