// Shared test helpers: random blobs, error messages, temporary directories, LMDB data sets, and the one numeric
// gradient checker every layer test uses.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "core/random.hpp"
#include "layers/layer.hpp"

namespace crema {
namespace test {

// Fills data with N(mean, stddev) values from a fixed-seed stream.
void FillGaussian(Blob* blob, float mean = 0.f, float stddev = 1.f, uint64_t seed = 1701);
void FillUniform(Blob* blob, float low, float high, uint64_t seed = 1701);

// A blob's values (data or diff) read on the host, and the sum of their absolute values.
std::vector<float> DataOf(const Blob& blob);
std::vector<float> DiffOf(const Blob& blob);
double AbsSum(const std::vector<float>& values);

// Parses a LayerParameter (or any message) from prototxt text; fails the test on a syntax error.
LayerParameter ParseLayer(const std::string& text);
// Parses a NetParameter from prototxt text; throws crema::Error (naming line and column) on a syntax error.
NetParameter ParseNet(const std::string& text);

// The message of the crema::Error that `action` throws. When it throws none, records a test failure and returns "",
// so a missing error is reported as such instead of only as a message that lacks every expected part.
std::string ErrorMessage(const std::function<void()>& action);
// Expects `statement` to throw a crema::Error whose message contains every one of `parts`.
void ExpectErrorContaining(const std::function<void()>& statement, const std::vector<std::string>& parts);

// A fresh directory under /tmp, removed with everything in it when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Where Debian's dataset-fashion-mnist package puts the data set.
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
// Writes `count` random single-channel Datums of size height x width with labels in [0, classes).
void WriteRandomDatums(const std::string& db_path, int count, int height, int width, int classes, uint64_t seed);
// Runs a shell command; returns its exit status, with stdout and stderr in *output.
int RunCommand(const std::string& command, std::string* output);
// The bytes of a file ("" when it cannot be read).
std::string FileBytes(const std::string& path);

// Owns a list of blobs and exposes them as the raw-pointer vectors layers take.
struct BlobList {
  std::vector<std::unique_ptr<Blob>> owned;
  std::vector<Blob*> pointers;
  Blob* Add(const std::vector<int>& shape);
};

// Central-difference gradient checking.
//
// The objective is a random projection of every top, E = sum_t sum_i w_ti * top_t[i], with w drawn once, so
// one backward pass gives the analytic gradient with respect to every input, and each input element needs two
// forward passes for its numeric gradient. Loss layers are covered by the same rule (their top is a scalar).
// Inputs within kink_range of `kink` are skipped: there the function is not differentiable (ReLU at 0).
class GradientChecker {
 public:
  GradientChecker(float stepsize = 1e-2f, float threshold = 1e-3f, uint64_t seed = 1701, float kink = 0.f,
                  float kink_range = -1.f)
      : stepsize_(stepsize), threshold_(threshold), seed_(seed), kink_(kink), kink_range_(kink_range) {}

  // Checks the gradient of every bottom (or only `check_bottom` when >= 0; -2 checks parameters only) and of
  // every parameter blob the layer computes a gradient for (param_propagate_down). The layer must be set up already.
  void CheckGradient(Layer* layer, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                     int check_bottom = -1);

 private:
  double Objective(Layer* layer, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  float stepsize_, threshold_;
  uint64_t seed_;
  float kink_, kink_range_;
  std::vector<std::vector<float>> weights_;
};

}  // namespace test
}  // namespace crema
