#include "core/derived_copy.hpp"

#include <algorithm>
#include <vector>

#include "core/blob.hpp"
#include "core/math_functions.hpp"
#include "core/threads.hpp"

namespace crema {

bool DerivedCopy::IsCurrent(const Blob& blob) const {
  return version_ != 0 && version_ == blob.data_version() && storage_ == blob.data().get() &&
         offset_ == blob.data_offset();
}

void DerivedCopy::MarkCurrent(const Blob& blob) {
  version_ = blob.data_version();
  storage_ = blob.data().get();
  offset_ = blob.data_offset();
}

namespace {

// Rows in stretches of about this many values (a multiple of the copy's rows_together): a stretch of the data and of
// the diff, 256 KiB each, stays in a core's L2 cache from the step to the copy's write.
constexpr int64_t kStretchValues = int64_t{1} << 16;

int64_t StretchRows(const DerivedCopy& copy) {
  const int64_t together = std::max<int64_t>(1, copy.rows_together());
  const int64_t blocks = std::max<int64_t>(1, kStretchValues / std::max<int64_t>(1, copy.row_length() * together));
  return blocks * together;
}

// Runs stretch(begin, end) over the rows of `copy` in `rows` rows, in stretches split over OpenMP's threads.
template <typename Stretch>
void ForEachRowStretch(const DerivedCopy& copy, int64_t rows, const Stretch& stretch) {
  ForEachStretch(rows, StretchRows(copy), rows * copy.row_length() >= ParallelElementThreshold(), stretch);
}

int64_t RowsOf(const Blob& param, const DerivedCopy& copy) {
  CREMA_CHECK(copy.row_length() > 0 && param.count() % copy.row_length() == 0)
      << "a derived copy of rows of " << copy.row_length() << " values cannot cover a parameter of "
      << param.shape_string();
  return param.count() / copy.row_length();
}

}  // namespace

void WriteDerivedCopy(const Blob& param, DerivedCopy* copy) {
  const float* values = param.cpu_data();
  ForEachRowStretch(*copy, RowsOf(param, *copy),
                    [&](int64_t begin, int64_t end) { copy->WriteRows(values, begin, end); });
  copy->MarkCurrent(param);
}

void WriteDerivedCopies(Blob* param) {
  for (const std::shared_ptr<DerivedCopy>& copy : param->DerivedCopies()) WriteDerivedCopy(*param, copy.get());
}

void WriteWithStep(Context& context, Blob* param, const StretchUpdate& before) {
  CREMA_CHECK(!before || context.device() == Device::kCPU) << "the fused update runs on the host only";
  const std::vector<std::shared_ptr<DerivedCopy>> copies =
      context.device() == Device::kCPU ? param->DerivedCopies() : std::vector<std::shared_ptr<DerivedCopy>>();
  if (copies.empty() && !before) {
    axpy(context, param->count(), -1.f, param->diff_on(context.device()), param->mutable_data_on(context.device()));
    return;
  }
  const float* diff = param->cpu_diff();
  float* data = param->mutable_cpu_data();
  // The same bits as axpy(-1): -diff is exact, so each value is data - diff rounded once.
  const auto step = [&](int64_t begin, int64_t end) {
    if (before) before(begin, end);
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) data[i] -= diff[i];
  };
  if (copies.empty()) {
    ForEachStretch(param->count(), kStretchValues, param->count() >= ParallelElementThreshold(), step);
    return;
  }
  // The first copy's rows set the stretches, and every copy of the same rows (a 1x1 convolution's two: its forward's
  // and its input gradient's) is written stretch by stretch; another copy (of other rows) after the step, whole.
  DerivedCopy& first = *copies[0];
  const int64_t row = first.row_length();
  std::vector<DerivedCopy*> alike, apart;
  for (const std::shared_ptr<DerivedCopy>& copy : copies)
    (copy->row_length() == row && copy->rows_together() == first.rows_together() ? alike : apart).push_back(copy.get());
  ForEachRowStretch(first, RowsOf(*param, first), [&](int64_t begin, int64_t end) {
    step(begin * row, end * row);
    for (DerivedCopy* copy : alike) copy->WriteRows(data, begin, end);
  });
  for (DerivedCopy* copy : alike) copy->MarkCurrent(*param);
  for (DerivedCopy* copy : apart) WriteDerivedCopy(*param, copy);
}

}  // namespace crema
