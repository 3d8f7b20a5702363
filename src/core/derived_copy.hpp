// A copy derived from a parameter's values, value by value, that an engine reads instead of them: a fully connected
// layer computing in bf16 reads its weights rounded to bf16 in oneDNN's blocked layout. Made by the engine alone, such
// a copy costs a pass over the float weights after every update (CaffeNet's fc6: 151 MB read, 75 MB written, against a
// bf16 forward that reads the 75 MB once). The solver's update writes the weights anyway: it writes each stretch of
// rows of the copy right after that stretch of the weights, while they are in the caches (WriteWithStep), and marks
// the copy current; the engine then reads it as it lies. Whoever else writes the values (a snapshot restored, a test
// setting them) changes the blob's data_version, and the engine makes the copy itself (IsCurrent false).
//
// An engine keeps its copy (a shared_ptr) and registers it with the parameter's blob (Blob::AddDerivedCopy, a weak
// reference); a copy of another layout or size is registered anew, and one the engine dropped is forgotten.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace crema {

class Blob;
class Context;

class DerivedCopy {
 public:
  virtual ~DerivedCopy() = default;
  // The values as rows of row_length() floats (a fully connected layer's: one output's weights); rows_together() rows
  // are written at once (a block of the layout): WriteRows's ranges start at multiples of it.
  virtual int64_t row_length() const = 0;
  virtual int64_t rows_together() const = 0;
  // Writes the copy's part for rows [begin, end) of `values` (the parameter's data, from its first value). Ranges that
  // do not overlap may be written at once on several threads.
  virtual void WriteRows(const float* values, int64_t begin, int64_t end) = 0;

  // Whether the copy holds `blob`'s data as it is now (its data_version and storage since the copy was last marked).
  bool IsCurrent(const Blob& blob) const;
  void MarkCurrent(const Blob& blob);

 private:
  uint64_t version_ = 0;           // the blob's data_version when marked (0: never)
  const void* storage_ = nullptr;  // and where its data lay: the storage, and the blob's offset in it
  size_t offset_ = 0;
};

// Writes every copy registered with `param` from its data as it is, and marks them current (split over OpenMP's
// threads in stretches of rows). What an engine does when its copy is stale, and what `crema time` does where the
// solver's update would.
void WriteDerivedCopies(Blob* param);
void WriteDerivedCopy(const Blob& param, DerivedCopy* copy);

// The solver's step: data -= diff for `param`. On the host, with `before` (the rest of the solver's update, over the
// values [begin, end): the gradient made into the step) run on each stretch of values first, and the copies registered
// with `param` written stretch by stretch right after their stretch of the data, then marked current: the update's
// passes over the weights, gradients and histories made one pass, each stretch (some 256 KiB of values) in one core's
// L2 cache from the first to the last. Without either, the plain axpy (on the GPU always: `before` must be empty).
using StretchUpdate = std::function<void(int64_t begin, int64_t end)>;
void WriteWithStep(Context& context, Blob* param, const StretchUpdate& before = nullptr);

}  // namespace crema
