// The fuzz targets (fuzz/fuzz_targets.hpp) in every build: their seeds are inputs crema accepts, damaged seeds
// are refused with a crema::Error, and every input a fuzzer once crashed on (tests/fuzz_regressions/<target>/,
// one file each, named after what it broke) runs through its target again. Under `make sanitize` this is the
// regression test of each crash fixed: the sanitizers see the same code paths libFuzzer did.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "fuzz/fuzz_targets.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

using fuzz::Outcome;

Outcome RunOn(const fuzz::Target& target, const std::string& bytes) {
  return target.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

const char* Describe(Outcome outcome) {
  switch (outcome) {
    case Outcome::kAccepted:
      return "accepted";
    case Outcome::kRefused:
      return "refused";
    case Outcome::kSkipped:
      return "skipped";
  }
  return "?";
}

// Every file of a folder, in name order.
std::vector<std::filesystem::path> FilesIn(const std::string& folder) {
  std::vector<std::filesystem::path> files;
  if (!std::filesystem::is_directory(folder)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

class FuzzTargetsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fuzz::SetUp();
    seeds_ = new test::TempDir();
    counts_ = fuzz::WriteSeeds(test::SourceDir(), seeds_->path());
  }
  static void TearDownTestSuite() {
    delete seeds_;
    seeds_ = nullptr;
  }
  static std::string SeedFolder(const std::string& target) { return seeds_->path() + "/" + target; }

  static test::TempDir* seeds_;
  static std::vector<int> counts_;
};
test::TempDir* FuzzTargetsTest::seeds_ = nullptr;
std::vector<int> FuzzTargetsTest::counts_;

TEST_F(FuzzTargetsTest, EveryTargetHasSeeds) {
  ASSERT_EQ(counts_.size(), fuzz::Targets().size());
  for (size_t t = 0; t < counts_.size(); ++t) {
    const std::string name = fuzz::Targets()[t].name;
    EXPECT_EQ(static_cast<int>(FilesIn(SeedFolder(name)).size()), counts_[t]) << name;
    EXPECT_GE(counts_[t], 2) << name;
  }
  // Every net of examples/ is a seed: 30 or so nets, and no solver among them.
  const std::vector<std::filesystem::path> nets = FilesIn(SeedFolder("net_prototxt"));
  EXPECT_GE(nets.size(), 25u);
  for (const auto& net : nets) {
    const std::string name = net.filename().string();
    if (name.rfind("fuzz_", 0) != 0) {
      EXPECT_EQ(name.find("solver"), std::string::npos) << net;
    }
  }
  const std::string dictionary = test::FileBytes(seeds_->path() + "/net_prototxt.dict");
  for (const char* word : {"\"convolution_param\"", "\"kernel_size\"", "\"Convolution\"", "\"MAX\"", "\"TRAIN\""})
    EXPECT_NE(dictionary.find(word), std::string::npos) << word;
}

// Weights, records and states crema made itself go through whole, and so do the nets of examples/ as the seeds
// have them (made small, their data layers DummyData ones), but for the siamese net: its Slice leaves the second
// image no channels (the seed's images have one), and the convolution of those shares weights with the first's.
// Most of the nets are cheap enough for the target to run them forward and backward too.
TEST_F(FuzzTargetsTest, SeedsAreAccepted) {
  int nets = 0, run = 0;
  for (const fuzz::Target& target : fuzz::Targets()) {
    for (const auto& seed : FilesIn(SeedFolder(target.name))) {
      const Outcome outcome = RunOn(target, test::FileBytes(seed));
      const std::string file = seed.filename().string();
      if (std::string(target.name) == "net_prototxt" && file == "siamese_mnist_siamese_train_test.prototxt") {
        EXPECT_EQ(Describe(outcome), std::string("refused")) << file;
        continue;
      }
      EXPECT_EQ(Describe(outcome), std::string("accepted")) << target.name << ": " << file;
      if (std::string(target.name) != "net_prototxt" || outcome != Outcome::kAccepted) continue;
      // Small enough for a fuzzer to build many times a second: at most 8 million values in all, weights and blobs
      // (ResNet-50's deploy seed has 4 million; CaffeNet's deploy net has 61 million weights, 5 s to fill under the
      // sanitizers).
      Net net(test::ParseNet(test::FileBytes(seed)), std::make_shared<Context>());
      size_t values = 0;
      for (const Blob* param : net.learnable_params()) values += static_cast<size_t>(param->count());
      for (const auto& blob : net.blobs()) values += static_cast<size_t>(blob->count());
      EXPECT_LE(values, size_t{1} << 23) << file;
      ++nets;
      if (fuzz::PassWorkBound(net) <= fuzz::kLargestPassWork) ++run;
    }
  }
  EXPECT_GE(nets, 25);
  EXPECT_GE(run, 15);
}

// The bound on a pass's work that decides whether the prototxt target runs a net: each step's tops times the values
// each reads, plus its bottoms and parameters once, here by hand.
TEST_F(FuzzTargetsTest, PassWorkBoundCountsWhatEachOutputReads) {
  Net net(test::ParseNet(R"(
    state { phase: TRAIN }
    layer { name: 'in' type: 'Input' top: 'x' input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
    layer { name: 'conv' type: 'Convolution' bottom: 'x' top: 'c' convolution_param { num_output: 4 kernel_size: 3 } }
    layer { name: 'act' type: 'Sigmoid' bottom: 'c' top: 's' }
    layer { name: 'pool' type: 'Pooling' bottom: 's' top: 'p' pooling_param { kernel_size: 2 stride: 2 } }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'p' top: 'y' inner_product_param { num_output: 5 } }
    layer { name: 'loss' type: 'Softmax' bottom: 'y' top: 'z' }
  )"),
          std::make_shared<Context>());
  ASSERT_EQ(net.plan().size(), 6u);
  const double input = 384 * 1.0;                         // 2x3x8x8 values, each from nothing
  const double conv = 288 * (1 + 112.0 / 4) + 384 + 112;  // 2x4x6x6 outputs, 4x27 weights + 4 biases
  const double sigmoid = 288 * 1.0 + 288;                 // one value each
  const double pool = 72 * (1 + 4.0) + 288;               // a 2x2 window each
  const double ip = 10 * (1 + 185.0 / 5) + 72 + 185;      // 5x36 weights + 5 biases
  const double softmax = 10 * (1 + 10.0) + 10;            // every bottom value
  EXPECT_DOUBLE_EQ(fuzz::PassWorkBound(net), input + conv + sigmoid + pool + ip + softmax);
}

// A seed cut short, or with one byte changed in its middle, is refused (or, for a byte of pixel data, still
// accepted); never anything else.
TEST_F(FuzzTargetsTest, DamagedSeedsAreRefusedWithAnError) {
  for (const fuzz::Target& target : fuzz::Targets()) {
    for (const auto& seed : FilesIn(SeedFolder(target.name))) {
      const std::string bytes = test::FileBytes(seed);
      for (size_t cut : {size_t{1}, bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
        const Outcome outcome = RunOn(target, bytes.substr(0, cut));
        EXPECT_NE(outcome, Outcome::kSkipped) << target.name << ": " << seed.filename() << " cut at " << cut;
      }
      std::string flipped = bytes;
      flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x5a);
      EXPECT_NE(RunOn(target, flipped), Outcome::kSkipped) << target.name << ": " << seed.filename();
    }
  }
  // Inputs that hold nothing a target can use.
  const std::map<std::string, std::vector<std::string>> refused = {
      {"net_prototxt", {"", "layer {", "layer { type: 'NoSuchLayer' }", "name: 'x'"}},
      {"caffemodel", {"", std::string("\x0a\x05short", 7), "garbage that is not protobuf \xff\xff"}},
      {"datum", {"", std::string("\x08\x03", 2), "\xff\xff\xff"}},
      {"solverstate", {"", "\xff\xff\xff", std::string("\x08\x07", 2) /* iter 7, no history */}},
      {"onnx", {"", "\xff\xff\xff", std::string("\x3a\x00", 2) /* an empty graph */}},
      {"solver_prototxt",
       {"base_lr:", "type: 'NoSuchSolver' lr_policy: 'fixed' base_lr: 0.1", "lr_policy: 'nope' base_lr: 0.1",
        "type: 'AdaGrad' momentum: 0.9 lr_policy: 'fixed' base_lr: 0.1", "lr_policy: 'step' base_lr: 0.1"}},
  };
  for (const auto& [name, inputs] : refused) {
    for (const std::string& input : inputs)
      EXPECT_EQ(Describe(RunOn(fuzz::TargetNamed(name), input)), std::string("refused")) << name << ": " << input;
  }
  EXPECT_THROW(fuzz::TargetNamed("no_such_target"), std::invalid_argument);
}

// An HDF5 solver state, a net with a layer that writes files and a solver that names files to read are outside what
// the fuzzers may touch.
TEST_F(FuzzTargetsTest, TargetsSkipWhatTheyMustNotTouch) {
  EXPECT_EQ(RunOn(fuzz::TargetNamed("solverstate"), std::string("\211HDF\r\n\032\n", 8) + std::string(64, '\0')),
            Outcome::kSkipped);
  EXPECT_EQ(RunOn(fuzz::TargetNamed("solver_prototxt"), "net: '/dev/zero' base_lr: 0.1 lr_policy: 'fixed'"),
            Outcome::kSkipped);
  EXPECT_EQ(RunOn(fuzz::TargetNamed("solver_prototxt"), "weights: 'a.caffemodel' base_lr: 0.1 lr_policy: 'fixed'"),
            Outcome::kSkipped);
  EXPECT_EQ(RunOn(fuzz::TargetNamed("net_prototxt"),
                  "layer { name: 'out' type: 'HDF5Output' bottom: 'x' hdf5_output_param { file_name: 'x.h5' } }"),
            Outcome::kSkipped);
}

// The inputs libFuzzer found crashes with, each fixed: they now run to an outcome.
TEST_F(FuzzTargetsTest, FormerCrashesRunToAnOutcome) {
  int replayed = 0;
  for (const fuzz::Target& target : fuzz::Targets()) {
    for (const auto& input : FilesIn(test::SourceDir() + "/tests/fuzz_regressions/" + target.name)) {
      const Outcome outcome = RunOn(target, test::FileBytes(input));
      EXPECT_NE(outcome, Outcome::kSkipped) << target.name << ": " << input.filename();
      ++replayed;
    }
  }
  RecordProperty("replayed", replayed);
}

}  // namespace
}  // namespace crema
