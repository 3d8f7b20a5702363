// Things every crema source file uses: the schema's types, the error type, and the checks that raise it.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

#include "proto/crema.pb.h"

namespace crema {

// The schema keeps Caffe's package name for compatibility; inside crema its messages are plain names.
using namespace ::caffe;  // NOLINT(google-build-using-namespace)

// Every problem caused by input (a prototxt, a file, a shape, a flag) is reported as a crema::Error whose
// message names what is at fault. Tools catch it, print it and exit with a non-zero status; nothing aborts.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Collects a message with operator<< and throws it as an Error when the statement ends.
class ErrorBuilder {
 public:
  ErrorBuilder() = default;
  ErrorBuilder(const ErrorBuilder&) = delete;
  ErrorBuilder& operator=(const ErrorBuilder&) = delete;
  ~ErrorBuilder() noexcept(false) { throw Error(stream_.str()); }
  template <typename T>
  ErrorBuilder& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

}  // namespace crema

// CREMA_CHECK(cond) << "what went wrong, naming the layer/field/file";  throws crema::Error when !cond.
// (A `while` rather than an `if`, so the macro cannot capture a following `else`; the builder throws, so the
// loop body runs at most once.)
#define CREMA_CHECK(condition) \
  while (!(condition)) ::crema::ErrorBuilder()
// CREMA_FAIL() << "message";  always throws crema::Error.
#define CREMA_FAIL() ::crema::ErrorBuilder()
