// Blob: an N-d float tensor with its gradient ("diff"), both held in SyncedMemory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/common.hpp"
#include "core/synced_memory.hpp"

namespace crema {

class Blob {
 public:
  // Caffe's limit on the number of axes, kept so BlobProto shapes mean the same thing.
  static constexpr int kMaxAxes = 32;

  Blob() = default;
  explicit Blob(const std::vector<int>& shape) { Reshape(shape); }
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;

  // Changes the shape. Memory grows when needed and is kept when the blob shrinks; values are not kept
  // meaningful across a reshape that changes the count.
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

  // The legacy 4-d view (missing axes read as 1).
  int num() const { return LegacyShape(0); }
  int channels() const { return LegacyShape(1); }
  int height() const { return LegacyShape(2); }
  int width() const { return LegacyShape(3); }
  int LegacyShape(int index) const;
  int offset(int n, int c = 0, int h = 0, int w = 0) const;
  int offset(const std::vector<int>& indices) const;

  const float* cpu_data() const;
  const float* cpu_diff() const;
  float* mutable_cpu_data();
  float* mutable_cpu_diff();
  const float* gpu_data() const;
  const float* gpu_diff() const;
  float* mutable_gpu_data();
  float* mutable_gpu_diff();
  float data_at(int n, int c = 0, int h = 0, int w = 0) const { return cpu_data()[offset(n, c, h, w)]; }
  float diff_at(int n, int c = 0, int h = 0, int w = 0) const { return cpu_diff()[offset(n, c, h, w)]; }

  const std::shared_ptr<SyncedMemory>& data() const { return data_; }
  const std::shared_ptr<SyncedMemory>& diff() const { return diff_; }
  // Makes this blob use other's memory (shapes must have the same count). Used by in-place planning and
  // parameter sharing.
  void ShareData(const Blob& other);
  void ShareDiff(const Blob& other);

  // data -= diff, on the device where the data currently lives.
  void Update();
  // Sum of absolute values and of squares, of data and of diff.
  double asum_data() const;
  double asum_diff() const;
  double sumsq_data() const;
  double sumsq_diff() const;
  void scale_diff(float factor);
  void set_data(float value);
  void set_diff(float value);

  // Reads values (and diff where stored) from a BlobProto; with reshape=false the shapes must match.
  void FromProto(const BlobProto& proto, bool reshape = true);
  void ToProto(BlobProto* proto, bool write_diff = false) const;
  // The shape stored in a BlobProto (its `shape`, or the legacy 4-d fields).
  static std::vector<int> ShapeOf(const BlobProto& proto);
  bool ShapeEquals(const BlobProto& proto) const { return ShapeOf(proto) == shape_; }

 private:
  std::vector<int> shape_;
  int count_ = 0;
  std::shared_ptr<SyncedMemory> data_;
  std::shared_ptr<SyncedMemory> diff_;
};

std::string ShapeString(const std::vector<int>& shape);
// A schema BlobShape as a shape vector (checks each dimension fits an int).
std::vector<int> ShapeFromProto(const BlobShape& shape);

}  // namespace crema
