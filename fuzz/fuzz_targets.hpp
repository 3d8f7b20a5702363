// The fuzz targets (issue 12; docs/reliability.md, "Fuzzing"): each takes one input, as bytes, through what a
// user's file of that kind goes through, and says whether crema accepted it or refused it with a crema::Error.
// Anything else is a bug: a crash, a sanitizer's report, an exception of another kind (which escapes, so that
// libFuzzer reports it), an allocation beyond libFuzzer's limits or a hang. The libFuzzer programs
// (fuzz/fuzz_entry.cpp, built by `make sanitize`, run by `make fuzz`) and the regression test
// (tests/test_fuzz_targets.cpp, in every build) call the same functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace crema {
class Net;
namespace fuzz {

enum class Outcome {
  kAccepted,  // crema took the input
  kRefused,   // crema refused it with a crema::Error: a clear message, as a user would see
  kSkipped,   // outside the target's reach: a net with a layer that writes files, an HDF5 solver state
};

struct Target {
  const char* name;  // fuzz_<name> is the libFuzzer program; tests/fuzz_regressions/<name>/ its crash inputs
  const char* what;  // in words
  Outcome (*run)(const uint8_t* data, size_t size);
};

// net_prototxt: prototxt text -> NetParameter (crema's parser) -> the net built (passes, layers set up, plan) -> one
//   forward and backward pass where that is cheap (a bound on its work).
// solver_prototxt: prototxt text -> SolverParameter -> the solver built over its inline net or a small one, trained
//   for at most 3 iterations, snapshots in a folder of the fuzzer's own (inputs naming files to read are skipped).
// caffemodel: binary NetParameter -> weights copied into a fixed small net (V0/V1 files upgraded on the way), which
//   then runs forward.
// datum: binary Datum -> decoded and transformed as a Data layer does, under four transformation settings.
// solverstate: a .solverstate file -> restored into an SGD and an Adam solver of a fixed small net.
// formula: an Expression layer's formula text -> parsed, differentiated, its value and gradients run on a few values.
// onnx: an ONNX model file -> parsed, imported onto layers (crema import), the net built with the weights and run
//   forward where that is cheap.
const std::vector<Target>& Targets();
// The target of that name; throws std::invalid_argument listing the names.
const Target& TargetNamed(const std::string& name);

// A bound on the work of one pass of a net: for each step, its tops' values times how many values each is computed
// from (one from each bottom for per-element layers, a convolution's weights for one output channel, a pooling's
// window; all of the bottoms' values and parameters for the rest), plus its bottoms and parameters once. The
// net_prototxt target runs a net forward and backward where this is at most kLargestPassWork (2^25).
double PassWorkBound(const Net& net);
constexpr double kLargestPassWork = 33554432.0;

// Once per process, before any target runs: logging quiet (FATAL only), and host blobs capped at 256 MiB
// (CREMA_HOST_MEMORY_LIMIT, unless the environment sets it), so that a net of huge blobs is refused by crema
// rather than reported by libFuzzer's memory limit. Idempotent.
void SetUp();

// Writes each target's seed corpus to `folder`/<name>/ (the nets of examples/ found under `source_dir`; weights,
// records and solver states made by crema itself) and a libFuzzer dictionary for the prototxt target,
// `folder`/net_prototxt.dict (the schema's field and enum value names, the registered layer types). Returns
// how many seeds each target got, in Targets() order.
std::vector<int> WriteSeeds(const std::string& source_dir, const std::string& folder);

}  // namespace fuzz
}  // namespace crema
