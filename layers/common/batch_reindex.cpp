#include "layers/common/batch_reindex.hpp"

#include <cmath>
#include <sstream>
#include <vector>

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"

namespace crema {

void BatchReindexLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& data = *bottom[0];
  const Blob& indices = *bottom[1];
  CREMA_CHECK(data.num_axes() >= 1) << describe() << ": the data (bottom 0) needs a batch axis, but is a scalar";
  CREMA_CHECK(indices.num_axes() == 1) << describe() << ": the indices (bottom 1) must be a vector, but have shape "
                                       << indices.shape_string();
  std::vector<int> shape = data.shape();
  shape[0] = indices.count();
  top[0]->Reshape(shape);
  // The GPU's backward: the positions sorted by the item they pick, built on the host, in the workspace.
  if (RunsGpuCode()) RequestWorkspace(static_cast<size_t>(data.shape(0)) + 1 + indices.count());
}

int BatchReindexLayer::Index(const Blob& data, const Blob& indices, int m) {
  const float value = indices.cpu_data()[m];
  // Truncated toward zero, the value must be an item: written so that NaN is not.
  CREMA_CHECK(value > -1.f && value < static_cast<float>(data.shape(0)))
      << describe() << ": index " << value << " at position " << m << " is not an item of the data (bottom 0, shape "
      << data.shape_string() << "): it must be in [0, " << data.shape(0) << ")";
  std::ostringstream named;
  named << "index " << value << " at position " << m << " of the indices (bottom 1)";
  NoteFractional(value, named.str());
  return LabelClass(value);
}

void BatchReindexLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int item = bottom[0]->count(1);
  for (int m = 0; m < bottom[1]->count(); ++m) {
    const int source = Index(*bottom[0], *bottom[1], m);
    cpu_copy(item, bottom[0]->cpu_data() + static_cast<size_t>(source) * item,
             top[0]->mutable_cpu_data() + static_cast<size_t>(m) * item);
  }
}

void BatchReindexLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": the indices (bottom 1) have no gradient";
  if (!propagate_down[0]) return;
  const int item = bottom[0]->count(1);
  float* data_diff = bottom[0]->mutable_cpu_diff();
  cpu_set(bottom[0]->count(), 0.f, data_diff);
  for (int m = 0; m < bottom[1]->count(); ++m) {
    const int target = Index(*bottom[0], *bottom[1], m);
    cpu_axpy(item, 1.f, top[0]->cpu_diff() + static_cast<size_t>(m) * item,
             data_diff + static_cast<size_t>(target) * item);
  }
}

void BatchReindexLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (int m = 0; m < bottom[1]->count(); ++m) Index(*bottom[0], *bottom[1], m);
  const Device d = device();
  for_each_element(context(), top[0]->count(),
                   BatchReindexForwardRule{bottom[0]->data_on(d), bottom[1]->data_on(d), top[0]->mutable_data_on(d),
                                           bottom[0]->count(1)});
}

void BatchReindexLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": the indices (bottom 1) have no gradient";
  if (!propagate_down[0]) return;
  const int items = bottom[0]->shape(0), count = bottom[1]->count();
  // Offsets and positions travel as floats, exact below 2^24.
  CREMA_CHECK(count < (1 << 24) && items < (1 << 24))
      << describe() << ": on the GPU the data (bottom 0, shape " << bottom[0]->shape_string() << ") and the indices ("
      << count << ") must hold fewer than 2^24 items each";
  // A counting sort of the positions by the item they pick, each item's in increasing order.
  std::vector<int> first(items + 1, 0);
  for (int m = 0; m < count; ++m) ++first[Index(*bottom[0], *bottom[1], m) + 1];
  for (int n = 0; n < items; ++n) first[n + 1] += first[n];
  std::vector<float> picks(static_cast<size_t>(items) + 1 + count);
  float* offsets = picks.data();
  float* positions = offsets + items + 1;
  for (int n = 0; n <= items; ++n) offsets[n] = static_cast<float>(first[n]);
  const float* indices = bottom[1]->cpu_data();
  for (int m = 0; m < count; ++m) positions[first[LabelClass(indices[m])]++] = static_cast<float>(m);
  float* list = workspace();
  upload(context(), static_cast<int>(picks.size()), picks.data(), list);
  const Device d = device();
  for_each_element(
      context(), bottom[0]->count(),
      BatchReindexBackwardRule{top[0]->diff_on(d), list, bottom[0]->mutable_diff_on(d), bottom[0]->count(1), items});
}

}  // namespace crema
