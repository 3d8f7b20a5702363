#include "core/blob.hpp"

#include <climits>
#include <cmath>
#include <sstream>

#include "core/context.hpp"

namespace crema {

std::string ShapeString(const std::vector<int>& shape) {
  std::ostringstream out;
  int64_t count = 1;
  for (int dim : shape) {
    out << dim << " ";
    count *= dim;
  }
  out << "(" << count << ")";
  return out.str();
}

void Blob::Reshape(const std::vector<int>& shape) {
  CREMA_CHECK(shape.size() <= static_cast<size_t>(kMaxAxes))
      << "a blob may have at most " << kMaxAxes << " axes, got " << shape.size();
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    CREMA_CHECK(shape[i] >= 0) << "blob shape " << ShapeString(shape) << " has a negative axis " << i;
    count *= shape[i];
    CREMA_CHECK(count <= INT_MAX) << "blob shape " << ShapeString(shape) << " has more than 2^31-1 elements";
  }
  shape_ = shape;
  count_ = static_cast<int>(count);
  // Memory may have been shared from a smaller blob (ShareData/ShareDiff), so the buffers themselves are
  // measured, not a remembered capacity.
  const size_t bytes = static_cast<size_t>(count_) * sizeof(float);
  if (!data_ || data_->size() < bytes) data_ = std::make_shared<SyncedMemory>(bytes);
  if (!diff_ || diff_->size() < bytes) diff_ = std::make_shared<SyncedMemory>(bytes);
}

std::vector<int> ShapeFromProto(const BlobShape& shape) {
  std::vector<int> dims;
  for (int i = 0; i < shape.dim_size(); ++i) {
    CREMA_CHECK(shape.dim(i) >= 0 && shape.dim(i) <= INT_MAX) << "blob dimension " << shape.dim(i)
                                                               << " is out of range";
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
      << "axis " << axis << " is out of range for a blob of shape " << shape_string() << " ("
      << num_axes() << " axes)";
  return axis < 0 ? axis + num_axes() : axis;
}

std::string Blob::shape_string() const { return ShapeString(shape_); }

int Blob::LegacyShape(int index) const {
  CREMA_CHECK(num_axes() <= 4) << "the 4-d view is undefined for a blob of shape " << shape_string();
  if (index >= num_axes()) return 1;
  return shape_[index];
}

int Blob::offset(int n, int c, int h, int w) const {
  return ((n * channels() + c) * height() + h) * width() + w;
}

int Blob::offset(const std::vector<int>& indices) const {
  int result = 0;
  for (int i = 0; i < num_axes(); ++i) {
    result *= shape_[i];
    if (i < static_cast<int>(indices.size())) result += indices[i];
  }
  return result;
}

const float* Blob::cpu_data() const { return static_cast<const float*>(data_->cpu_data()); }
const float* Blob::cpu_diff() const { return static_cast<const float*>(diff_->cpu_data()); }
float* Blob::mutable_cpu_data() { return static_cast<float*>(data_->mutable_cpu_data()); }
float* Blob::mutable_cpu_diff() { return static_cast<float*>(diff_->mutable_cpu_data()); }
const float* Blob::gpu_data() const { return static_cast<const float*>(data_->gpu_data()); }
const float* Blob::gpu_diff() const { return static_cast<const float*>(diff_->gpu_data()); }
float* Blob::mutable_gpu_data() { return static_cast<float*>(data_->mutable_gpu_data()); }
float* Blob::mutable_gpu_diff() { return static_cast<float*>(diff_->mutable_gpu_data()); }

void Blob::ShareData(const Blob& other) {
  CREMA_CHECK(count_ == other.count()) << "cannot share data between blobs of shapes " << shape_string()
                                       << " and " << other.shape_string();
  data_ = other.data();
}

void Blob::ShareDiff(const Blob& other) {
  CREMA_CHECK(count_ == other.count()) << "cannot share diff between blobs of shapes " << shape_string()
                                       << " and " << other.shape_string();
  diff_ = other.diff();
}

// The GPU paths of these helpers arrive with the CUDA kernels; until then they run on the host copy, which
// SyncedMemory keeps correct either way.
void Blob::Update() {
  float* data = mutable_cpu_data();
  const float* diff = cpu_diff();
  for (int i = 0; i < count_; ++i) data[i] -= diff[i];
}

namespace {
double sum_abs(const float* values, int n) {
  double total = 0;
  for (int i = 0; i < n; ++i) total += std::fabs(values[i]);
  return total;
}
double sum_squares(const float* values, int n) {
  double total = 0;
  for (int i = 0; i < n; ++i) total += static_cast<double>(values[i]) * values[i];
  return total;
}
}  // namespace

double Blob::asum_data() const { return count_ ? sum_abs(cpu_data(), count_) : 0; }
double Blob::asum_diff() const { return count_ ? sum_abs(cpu_diff(), count_) : 0; }
double Blob::sumsq_data() const { return count_ ? sum_squares(cpu_data(), count_) : 0; }
double Blob::sumsq_diff() const { return count_ ? sum_squares(cpu_diff(), count_) : 0; }

void Blob::scale_diff(float factor) {
  float* diff = mutable_cpu_diff();
  for (int i = 0; i < count_; ++i) diff[i] *= factor;
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
    CREMA_CHECK(stored == shape_) << "stored blob has shape " << ShapeString(stored) << " but "
                                  << shape_string() << " is expected";
  }
  float* data = mutable_cpu_data();
  if (proto.double_data_size() > 0) {
    CREMA_CHECK(proto.double_data_size() == count_) << "stored blob of shape " << shape_string() << " holds "
                                                    << proto.double_data_size() << " values";
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

}  // namespace crema
