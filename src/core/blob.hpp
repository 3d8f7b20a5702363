// Blob: an N-d float tensor with its gradient ("diff"), both held in SyncedMemory; the data may be planned in another
// element type (core/element_type.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/common.hpp"
#include "core/context.hpp"
#include "core/element_type.hpp"
#include "core/layout.hpp"
#include "core/synced_memory.hpp"

namespace crema {

class DerivedCopy;

// A blob owns its storage, or views part of another blob's (a Flatten top, a Split copy, a shared parameter,
// later a slot of a planned arena). An owner grows its storage when a reshape needs more; a view never does:
// reshaping a view beyond the memory it sees is an error, since the storage belongs to someone else.
class Blob {
 public:
  // Caffe's limit on the number of axes, kept so BlobProto shapes mean the same thing.
  static constexpr int kMaxAxes = 32;

  Blob() = default;
  explicit Blob(const std::vector<int>& shape) { Reshape(shape); }
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;

  // Changes the shape. An owner's memory grows when needed and is kept when the blob shrinks; values are not
  // kept meaningful across a reshape that changes the count. A view throws when the shape does not fit.
  void Reshape(const std::vector<int>& shape);
  void ReshapeLike(const Blob& other) { Reshape(other.shape()); }

  const std::vector<int>& shape() const { return shape_; }
  // Size of one axis; negative axes count from the end.
  int shape(int axis) const { return shape_[CanonicalAxisIndex(axis)]; }
  int num_axes() const { return static_cast<int>(shape_.size()); }
  int count() const { return count_; }
  // Product of the sizes of axes [start, end).
  int count(int start_axis, int end_axis) const;
  int count(int start_axis) const { return count(start_axis, num_axes()); }
  // Maps an axis in [-num_axes, num_axes) to [0, num_axes); throws on anything else.
  int CanonicalAxisIndex(int axis) const;
  // "64 1 28 28 (50176)"
  std::string shape_string() const;

  // How the values lie in memory (core/layout.hpp): plain unless the net's plan keeps this blob, between two
  // engines that prefer it, in another layout. Data and diff share it; a reshape keeps it.
  Layout layout() const { return layout_; }
  void set_layout(Layout layout) { layout_ = layout; }

  // What the data's elements are (core/element_type.hpp): 32-bit floats, unless the net's plan keeps this blob, between
  // two steps that compute in 8-bit integers, as the integers (value = q / scale), or between two steps that compute
  // in bfloat16 or float16, as those 16 bits. The diff stays float (or bf16, below). A reshape keeps it; storage is
  // sized for it (data_floats).
  ElementType data_type() const { return quantization_.type; }
  const Quantization& quantization() const { return quantization_; }
  void set_quantization(const Quantization& quantization);
  // The floats of memory the data takes: count() for floats, a half or a quarter of it (rounded up) for 16-bit floats
  // or 8-bit integers.
  size_t data_floats() const { return FloatsFor(count_); }
  // The data as bytes, in whatever type it has (the engines that read and write 8-bit and 16-bit blobs).
  const void* cpu_bytes() const { return data_.read(Device::kCPU); }
  void* mutable_cpu_bytes() { return data_.write(Device::kCPU); }
  const void* bytes_on(Device device) const { return data_.read(device); }
  void* mutable_bytes_on(Device device) { return data_.write(device); }
  // What the diff's elements are: 32-bit floats, unless the net's plan keeps this blob's gradient, between the step
  // that writes it (the blob's reader, in backward) and the one that reads it (the blob's writer), as bf16 where both
  // round it so. A reshape keeps it; storage is sized for it (diff_floats); the float accessors refuse another type.
  ElementType diff_type() const { return diff_type_; }
  void set_diff_type(ElementType type);
  size_t diff_floats() const { return FloatsFor(count_, diff_type_); }
  const void* cpu_diff_bytes() const { return diff_.read(Device::kCPU); }
  void* mutable_cpu_diff_bytes() { return diff_.write(Device::kCPU); }

  // The legacy 4-d view (missing axes read as 1).
  int num() const { return LegacyShape(0); }
  int channels() const { return LegacyShape(1); }
  int height() const { return LegacyShape(2); }
  int width() const { return LegacyShape(3); }
  int LegacyShape(int index) const;
  int offset(int n, int c = 0, int h = 0, int w = 0) const;
  int offset(const std::vector<int>& indices) const;

  const float* cpu_data() const { return Floats(data_.read(Device::kCPU)); }
  const float* cpu_diff() const { return DiffFloats(diff_.read(Device::kCPU)); }
  float* mutable_cpu_data() { return Floats(data_.write(Device::kCPU)); }
  float* mutable_cpu_diff() { return DiffFloats(diff_.write(Device::kCPU)); }
  const float* gpu_data() const { return Floats(data_.read(Device::kGPU)); }
  const float* gpu_diff() const { return DiffFloats(diff_.read(Device::kGPU)); }
  float* mutable_gpu_data() { return Floats(data_.write(Device::kGPU)); }
  float* mutable_gpu_diff() { return DiffFloats(diff_.write(Device::kGPU)); }
  // The same on the device a context names: code written once for both devices reads pointers this way.
  const float* data_on(Device device) const { return Floats(data_.read(device)); }
  const float* diff_on(Device device) const { return DiffFloats(diff_.read(device)); }
  float* mutable_data_on(Device device) { return Floats(data_.write(device)); }
  float* mutable_diff_on(Device device) { return DiffFloats(diff_.write(device)); }
  float data_at(int n, int c = 0, int h = 0, int w = 0) const { return cpu_data()[offset(n, c, h, w)]; }

  // The storage behind data and diff, and where in it this blob starts (in floats).
  const std::shared_ptr<SyncedMemory>& data() const { return data_.memory; }
  const std::shared_ptr<SyncedMemory>& diff() const { return diff_.memory; }
  size_t data_offset() const { return data_.offset; }
  size_t diff_offset() const { return diff_.offset; }
  bool data_is_view() const { return data_.is_view; }
  bool diff_is_view() const { return diff_.is_view; }
  // Changes whenever the data may have been written (SyncedMemory::version; any write to the storage it views
  // counts, and a fresh storage never repeats a stamp); 0 before the data has storage.
  uint64_t data_version() const { return data_.memory ? data_.memory->version() : 0; }

  // Makes this blob's data (diff) a view of `source`'s: the same memory from the same place. This blob's
  // count must fit in what `source` sees. Used for parameter sharing, test nets' weights and the plan's views.
  void ShareData(const Blob& source);
  void ShareDiff(const Blob& source);
  // Makes this blob a view of `source` as a whole: its data (and diff, when `with_diff`) and its shape. The
  // net makes a layer's declared top views this way before the layer reshapes them. Without `with_diff` the diff
  // stays this blob's own (its memory, or the slot of a larger buffer it views while the count fits there).
  void ViewOf(const Blob& source, bool with_diff);
  // Makes this blob's data a view of `shape` floats of `memory` from float `offset` (a part of a larger
  // buffer). Throws when they do not fit.
  void ViewData(const std::shared_ptr<SyncedMemory>& memory, size_t offset, const std::vector<int>& shape);
  // Makes this blob's diff a view of count() floats of `memory` from float `offset`.
  void ViewDiff(const std::shared_ptr<SyncedMemory>& memory, size_t offset);
  // Gives this blob's data (diff, when `gradient`) memory of its own again, fresh (zeros); the memory plan
  // unbinds its views so.
  void OwnStorage(bool gradient);

  // Host conveniences for tests and set-up code; running nets go through the device math (math_functions).
  void set_data(float value);
  void set_diff(float value);

  // The copies engines derive from this blob's data (core/derived_copy.hpp) and keep: registered here, so that the
  // solver's update writes them as it writes the data. The blob holds them weakly: a copy its engine dropped is gone.
  void AddDerivedCopy(const std::shared_ptr<DerivedCopy>& copy);
  std::vector<std::shared_ptr<DerivedCopy>> DerivedCopies() const;
  // Reads values (and diff where stored) from a BlobProto; with reshape=false the shapes must match.
  void FromProto(const BlobProto& proto, bool reshape = true);
  void ToProto(BlobProto* proto, bool write_diff = false) const;
  // The shape stored in a BlobProto (its `shape`, or the legacy 4-d fields).
  static std::vector<int> ShapeOf(const BlobProto& proto);

 private:
  // One of data and diff: its storage, where this blob starts in it, and whether the storage is another's.
  struct Storage {
    std::shared_ptr<SyncedMemory> memory;
    size_t offset = 0;
    bool is_view = false;
    // Floats available from the offset on.
    size_t available() const;
    const float* read(Device device) const;
    float* write(Device device);
  };
  // Makes `storage` hold what `count_` values take (data_floats for the data, diff_floats for the diff): an owner
  // grows, a view must already fit (`what` names it in errors).
  void Fit(Storage* storage, const char* what);
  static size_t FloatsFor(int64_t count, ElementType type) {
    return type == ElementType::kFloat32 ? static_cast<size_t>(count)
                                         : static_cast<size_t>((count * ElementBytes(type) + 3) / 4);
  }
  size_t FloatsFor(int64_t count) const { return FloatsFor(count, quantization_.type); }
  size_t Needed(const Storage* storage) const { return storage == &data_ ? data_floats() : diff_floats(); }
  // The float accessors refuse data in another element type: a layer that reads floats never sees integers.
  template <typename T>
  T* Floats(T* data) const {
    if (!quantization_.floats()) RefuseFloatAccess();
    return data;
  }
  template <typename T>
  T* DiffFloats(T* diff) const {
    if (diff_type_ != ElementType::kFloat32) RefuseFloatAccess(true);
    return diff;
  }
  [[noreturn]] void RefuseFloatAccess(bool gradient = false) const;
  void Share(Storage* mine, const Storage& theirs, const Blob& source, const char* what);

  std::vector<int> shape_;
  int count_ = 0;
  Layout layout_ = Layout::kPlain;
  Quantization quantization_;
  ElementType diff_type_ = ElementType::kFloat32;
  Storage data_;
  Storage diff_;
  std::vector<std::weak_ptr<DerivedCopy>> derived_copies_;
};

std::string ShapeString(const std::vector<int>& shape);
// A schema BlobShape as a shape vector (checks each dimension fits an int).
std::vector<int> ShapeFromProto(const BlobShape& shape);

// The blob's values in plain row-major order (N x C x H x W for images), reordered when the plan keeps the blob in
// another layout (see core/layout.hpp): what files and comparisons read.
std::vector<float> PlainValues(const Blob& blob);
// Its gradient likewise (floats, or bf16 values where the plan keeps it in bf16).
std::vector<float> PlainDiffs(const Blob& blob);

}  // namespace crema
