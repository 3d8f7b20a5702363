// Shared test helpers: random blobs, error messages, temporary directories, LMDB data sets, and the one numeric
// gradient checker every layer test uses.
#pragma once

#include <glog/logging.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "core/random.hpp"
#include "layers/layer.hpp"

namespace crema {
namespace test {

// The warnings glog logs (from any thread) while it lives.
class LoggedWarnings : public google::LogSink {
 public:
  LoggedWarnings() { google::AddLogSink(this); }
  ~LoggedWarnings() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity severity, const char* full_filename, const char* base_filename, int line,
            const google::LogMessageTime& time, const char* message, size_t message_length) override {
    if (severity != google::GLOG_WARNING) return;
    std::lock_guard<std::mutex> lock(mutex_);
    lines_.emplace_back(message, message_length);
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

// The source tree (examples, docs) and the folder of the built tools: the build's own paths, or the
// environment's CREMA_SOURCE_DIR and CREMA_TOOLS_DIR where set, so that the tests run from a copy of the build
// on another machine (a bundle unpacked beside another checkout).
std::string SourceDir();
std::string ToolsDir();

// True in a build under AddressSanitizer (make sanitize), whose shadow memory takes terabytes of address space:
// a test that limits the address space (ulimit -v) cannot run there.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// Fills data with N(mean, stddev) values from a fixed-seed stream.
void FillGaussian(Blob* blob, float mean = 0.f, float stddev = 1.f, uint64_t seed = 1701);
void FillUniform(Blob* blob, float low, float high, uint64_t seed = 1701);

// A blob's values (data or diff) read on the host, and the sum of their absolute values.
std::vector<float> DataOf(const Blob& blob);
std::vector<float> DiffOf(const Blob& blob);
double AbsSum(const std::vector<float>& values);
// Every value of a blob's data replaced by its magnitude (a bound on a product's rounding is the product of the
// magnitudes).
void TakeAbsolute(Blob* blob);

// One layer set up on its own bottom and top (the precision tests' twins).
struct SingleLayer {
  std::unique_ptr<Layer> layer;
  Blob bottom, top;
  std::vector<Blob*> bottoms() { return {&bottom}; }
  std::vector<Blob*> tops() { return {&top}; }
};
// `param` made with `engine` on `context` for a bottom of `shape` (filled from a fixed seed), set up, with the
// parameters of `like` where given.
std::unique_ptr<SingleLayer> MakeSingleLayer(const LayerParameter& param, const std::vector<int>& shape,
                                             std::shared_ptr<Context> context, const std::string& engine,
                                             const SingleLayer* like = nullptr);

// A layer computing in half precision (`precision`, made by `make_half` with the parameters of the float32 layer it is
// given) against its float32 twin (`make_float`, with the parameters of `like` where given): forward within the float32
// product of the rounded input and weights (`sums` of the products' magnitudes for the sums' order, and the result's
// own rounding where `rounded_results`), and every gradient against central differences of the twin within the bound
// the two factors' rounding gives; and somewhere beyond float32's error, so that the type did run (test_util.cpp).
void CheckHalfPrecisionLayer(const std::function<std::unique_ptr<SingleLayer>(const SingleLayer* like)>& make_float,
                             const std::function<std::unique_ptr<SingleLayer>(const SingleLayer& like)>& make_half,
                             Precision precision, double sums, bool rounded_results);

// A layer made through the registry as a net makes it, for bottoms of `shapes`, with the engine forced to
// `engine` (the registry's refusal, an Error, when that engine does not take the layer).
std::unique_ptr<Layer> CreateWithEngine(const LayerParameter& param, const std::vector<std::vector<int>>& shapes,
                                        const std::string& engine);

// Parses a LayerParameter (or any message) from prototxt text; fails the test on a syntax error.
LayerParameter ParseLayer(const std::string& text);
// Parses a NetParameter from prototxt text; throws crema::Error (naming line and column) on a syntax error.
NetParameter ParseNet(const std::string& text);

// The message of the crema::Error that `action` throws. When it throws none, records a test failure and returns "",
// so a missing error is reported as such instead of only as a message that lacks every expected part.
std::string ErrorMessage(const std::function<void()>& action);
// Expects `statement` to throw a crema::Error whose message contains every one of `parts`.
void ExpectErrorContaining(const std::function<void()>& statement, const std::vector<std::string>& parts);

// The environment variable `name` set to `value` while the object lives (unset when it goes away).
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnvironment() { unsetenv(name_); }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* name_;
};

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
// The folder the tests read Fashion-MNIST from: FASHION_MNIST_DIR where set (as
// data/fashion_mnist/get_fashion_mnist.sh reads it; a machine without the package, such as one the
// bundle of docs/bundle.md runs on), else kFashionMnistDir.
std::string FashionMnistDir();
// Whether its four gzipped IDX files are there. Tests that need them skip without (CREMA_SKIP_WITHOUT_FASHION_MNIST).
bool FashionMnistAvailable();
// Writes `count` random single-channel Datums of size height x width with labels in [0, classes).
void WriteRandomDatums(const std::string& db_path, int count, int height, int width, int classes, uint64_t seed);
// Writes `text` to `path` as it is (a prototxt, a list, a solver file).
void WriteText(const std::string& path, const std::string& text);

// The bad-input tests' small training net 'Small': DummyData 'data' of 4 x 1 x 12 x 12 (drawn by `data_filler`)
// with labels of 1, Convolution 'conv1' (`conv_outputs` outputs, kernel 5), InnerProduct 'ip1' (10 outputs) and
// SoftmaxWithLoss 'loss'. `header` goes after the name (net-level fields such as debug_info).
std::string SmallNet(const std::string& data_filler = "type: 'gaussian' std: 1", const std::string& header = "",
                     int conv_outputs = 4);

// Runs a shell command; returns its exit status, with stdout and stderr in *output.
int RunCommand(const std::string& command, std::string* output);
// The bytes of a file ("" when it cannot be read).
std::string FileBytes(const std::string& path);

// Bad input, as a user meets it (issue 12's promise, checked in one place): runs the shell command `command`,
// whose first word after any VARIABLE=value settings is a tool (usually ToolsDir() + "/crema"), and expects exit
// status 1 (no signal, no core); on stderr a line starting "<tool>: error: " that, with any lines after it, is the end of stderr and holds every
// one of `parts`; and no "Check failed", "terminate called" or "Aborted" anywhere. Returns the message (the
// error line and the lines after it). Where the environment variable CREMA_RELIABILITY_TABLE names a file, a
// row is appended to it: `area`, `what` (the bad input, in words), the command and the message, with temporary
// folders and the tools folder left out; scripts/reliability_table.py turns the rows into docs/reliability.md.
std::string ExpectBadInput(const std::string& area, const std::string& what, const std::string& command,
                           const std::vector<std::string>& parts);

// Slices of Debian's Fashion-MNIST in LMDBs under a temporary directory (the first `train_count` training and
// `test_count` test images), and example files pointed at them, for tests that train on real data quickly.
class FashionMnistSlices {
 public:
  // Fails the test (naming the package to install) when the data set is missing.
  FashionMnistSlices(int train_count, int test_count);
  std::string train_db() const { return dir_.file("train_lmdb"); }
  std::string test_db() const { return dir_.file("test_lmdb"); }
  // Prototxt text with the examples' data paths (data/fashion_mnist/fashion_mnist_{train,test}_lmdb) replaced
  // by the slices.
  std::string PointAt(const std::string& text) const;
  // The solver examples/<solver_path> with its net (read from the file it names) pointed at the slices, on the
  // CPU, with no snapshots (snapshot_prefix in the temporary directory).
  SolverParameter ExampleSolver(const std::string& solver_path) const;

 private:
  TempDir dir_;
};

// A net that reads the LMDB `source` (1-channel 8 x 8 Datums, labels in [0, 4)) with random crops and mirrors
// and has a Dropout layer: every source of randomness and every cursor a resume must restore.
std::string ResumeNet(const std::string& source);
// The resume tests' solver: SGD with momentum, weight decay and the "inv" policy, seeded, on the CPU, training the net
// `net_text` for `max_iter` iterations and snapshotting every `snapshot` under `prefix`.
SolverParameter ResumeSolver(const std::string& net_text, const std::string& prefix, int max_iter, int snapshot);

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

// Per-element ("neuron") layers: one bottom, one top of the bottom's shape, in place allowed.

// Fills a blob's data: FillGaussian or FillUniform with their fixed seed, or anything a test needs.
using BlobFiller = std::function<void(Blob*)>;
BlobFiller Gaussian(float stddev = 1.f);
BlobFiller Uniform(float low, float high);

// A layer made from prototxt text (or a parsed parameter) by LayerRegistry::Global() on a fresh CPU context,
// as a net makes it; not set up.
std::unique_ptr<Layer> MakeLayer(const LayerParameter& param, const std::vector<int>& bottom_shape = {1});
std::unique_ptr<Layer> MakeLayer(const std::string& text, const std::vector<int>& bottom_shape = {1});

// How far a top element y may be from its reference r = reference(x): |y - r| may be up to the largest of
// `absolute`, `relative` * |r| and `relative_to_input` * |x|. All 0 (the default) asks for equality.
struct Tolerance {
  double absolute = 0, relative = 0, relative_to_input = 0;
};

// Sets `layer` up on a bottom of `shape` filled by `fill`, expects a top of the same shape, runs forward and
// expects every top element within `tolerance` of reference(its bottom element), computed in double. Returns
// the top's values.
std::vector<float> ExpectForwardMatches(Layer* layer, const std::function<double(double)>& reference,
                                        Tolerance tolerance = {}, const BlobFiller& fill = Gaussian(),
                                        const std::vector<int>& shape = {2, 3, 4, 5});
std::vector<float> ExpectForwardMatches(const std::string& text, const std::function<double(double)>& reference,
                                        Tolerance tolerance = {}, const BlobFiller& fill = Gaussian(),
                                        const std::vector<int>& shape = {2, 3, 4, 5});

// Sets `layer` up on a fresh bottom of `shape` filled by `fill` and checks the gradients of the bottom and of
// every parameter with `checker`.
void CheckLayerGradient(Layer* layer, const BlobFiller& fill = Gaussian(), GradientChecker checker = {},
                        const std::vector<int>& shape = {2, 3, 4});
void CheckLayerGradient(const std::string& text, const BlobFiller& fill = Gaussian(), GradientChecker checker = {},
                        const std::vector<int>& shape = {2, 3, 4});

// Runs `separate` out of place and `in_place` in place (two fresh layers of the same parameters) on the same
// input (`fill` on `shape`) and the same top gradient. In place the bottom's data is overwritten by the forward
// pass and its diff by the backward pass; expects the same parameters after SetUp, the same top, and the same
// bottom and parameter gradients (parameter diffs are zeroed before the backward passes).
void ExpectInPlaceMatchesOutOfPlace(Layer* separate, Layer* in_place, const BlobFiller& fill = Gaussian(),
                                    const std::vector<int>& shape = {3, 4, 5});
void ExpectInPlaceMatchesOutOfPlace(const std::string& text, const BlobFiller& fill = Gaussian(),
                                    const std::vector<int>& shape = {3, 4, 5});

// The top's data and the bottom's gradient (empty without a backward pass) of one run of a layer.
struct ElementRun {
  std::vector<float> y, dx;
};
// Sets `layer` up on a bottom of shape {x.size()} holding `x`, runs forward and, when `dy` is given, backward
// with every element of the top's gradient set to `dy`.
ElementRun RunOnValues(Layer* layer, const std::vector<float>& x, std::optional<float> dy = std::nullopt);

// Expects setting up the layer of `text` on a bottom of `shape` (out of place, or in place when `in_place`) to
// throw a crema::Error whose message contains every one of `parts`.
void ExpectSetUpError(const std::string& text, const std::vector<std::string>& parts, bool in_place = false,
                      const std::vector<int>& shape = {4});
void ExpectSetUpError(const LayerParameter& param, const std::vector<std::string>& parts, bool in_place = false,
                      const std::vector<int>& shape = {4});

}  // namespace test
}  // namespace crema

// Skips the current test with a message where Fashion-MNIST is missing.
#define CREMA_SKIP_WITHOUT_FASHION_MNIST()                                                                     \
  if (!::crema::test::FashionMnistAvailable()) {                                                               \
    GTEST_SKIP() << "Fashion-MNIST is missing from " << ::crema::test::FashionMnistDir()                       \
                 << ": install Debian's dataset-fashion-mnist package, or set FASHION_MNIST_DIR to its files"; \
  }

// Skips the current test with a message where no CUDA device can run it (CI, the developers' machines).
#define CREMA_SKIP_WITHOUT_GPU()                                                                       \
  if (::crema::Context::gpu_count() == 0) {                                                            \
    GTEST_SKIP() << (::crema::Context::built_with_cuda() ? "no CUDA device is visible on this machine" \
                                                         : "this build has no CUDA (CPU_ONLY)");       \
  }

// EXPECT_CONTAINS(text, part): `text` holds `part`; the failure shows the whole text.
#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << "missing \"" << (needle) << "\" in:\n" << (haystack)
