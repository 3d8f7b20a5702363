// Concat: joins its bottoms along one axis, y = [x_0, x_1, ...]. Every other axis must have the same size in
// all bottoms; the top's size along the axis is the sum of theirs. Backward hands each bottom its own part
// of the top's gradient.
//
// Params (concat_param): axis (default 1; negative counts from the end), or the deprecated concat_dim
// (non-negative only; used when given, and then axis may not be given too).
// Bottoms -> tops: 1..n -> 1.
// Runs on the CPU (block copies) and the GPU (JoinAlongAxis and CutAlongAxis below, which Slice shares;
// concat.cu compiles their rules).
// Differs from Caffe: with a single bottom the values are copied rather than the top sharing the bottom's
// memory (the result is the same).
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// A whole blob and its parts along one axis (Concat's top and bottoms, Slice's bottom and tops), both seen as
// outer x (size along the axis * inner): per outer index the whole holds a block of each part in turn. One
// pass copies a group of up to kMaxParts parts lying side by side in the whole (their pointers travel in the
// kernel's arguments, so any number of parts costs one launch per group, not one per block): index i runs
// over the group's stretch of the whole, outer x span, and moves the one value it names.
constexpr int kMaxParts = 8;
struct AxisPartsGroup {
  int whole_block;           // values of the whole per outer index
  int offset;                // where the group's stretch starts in each block of the whole
  int span;                  // values of the stretch per outer index
  int parts;                 // parts in the group
  int start[kMaxParts + 1];  // where each part starts in the stretch; start[parts] == span
  // Value i of the stretch: the pointer of the part holding it, and where it lies in that part (*in_part). The
  // arrays are read at indices known at compile time only (a loop of constant count, unrolled), because a
  // kernel that indexes its arguments by a runtime value first copies them to slow local memory.
  template <typename Pointer>
  CREMA_HOST_DEVICE Pointer Locate(int i, const Pointer* pointers, long long* in_part) const {
    const int n = i / span, k = i % span;
    Pointer pointer = pointers[0];
    int begin = 0, end = start[1];
    for (int p = 1; p < kMaxParts; ++p) {
      // The last part starting at or before k holds it (a part of size 0 starts where the next does).
      if (p < parts && k >= start[p]) {
        pointer = pointers[p];
        begin = start[p];
        end = start[p + 1];
      }
    }
    *in_part = static_cast<long long>(n) * (end - begin) + k - begin;
    return pointer;
  }
  CREMA_HOST_DEVICE long long InWhole(int i) const {
    return static_cast<long long>(i / span) * whole_block + offset + i % span;
  }
};

// Parts into the whole (Concat's forward, Slice's backward), values of type T: floats, or 16-bit values (Concat's
// forward over blobs the plan keeps in 16 bits on the GPU).
template <typename T>
struct JoinPartsRule {
  AxisPartsGroup group;
  const T* part[kMaxParts];
  T* whole;
  CREMA_HOST_DEVICE void operator()(int i) const {
    long long in_part;
    const T* from = group.Locate(i, part, &in_part);
    whole[group.InWhole(i)] = from[in_part];
  }
};

// The whole into its parts (Slice's forward, Concat's backward); a part whose pointer is null is left out (a
// bottom that wants no gradient).
struct CutPartsRule {
  AxisPartsGroup group;
  const float* whole;
  float* part[kMaxParts];
  CREMA_HOST_DEVICE void operator()(int i) const {
    long long in_part;
    float* to = group.Locate(i, part, &in_part);
    if (to != nullptr) to[in_part] = whole[group.InWhole(i)];
  }
};

// On the context's device: `parts` (sizes[p] along the axis each) joined into `whole`, or `whole` cut into
// them, the blobs seen as outer x (size along the axis) x inner. JoinAlongAxis for T float and uint16_t.
template <typename T>
void JoinAlongAxis(Context& context, const std::vector<const T*>& parts, const std::vector<int>& sizes, int outer,
                   int inner, T* whole);
void CutAlongAxis(Context& context, const float* whole, const std::vector<float*>& parts, const std::vector<int>& sizes,
                  int outer, int inner);

class ConcatLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Concat"; }
  // Backward reads no data (it hands each bottom its part of the gradient).
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }
  int MinBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  // In GPU code its forward copies the values in the type they lie in: 16-bit ones between the GPU's half-precision
  // layers (plan_element_types; its backward cuts the float gradient as before).
  bool PassesQuantizationThrough() const override { return RunsGpuCode(); }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 protected:
  int axis_ = 1;
  int outer_ = 1;  // product of the axes before the concatenation axis
  int inner_ = 1;  // product of the axes after it
};

}  // namespace crema
