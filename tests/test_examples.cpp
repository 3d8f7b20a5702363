// The example nets under examples/ build and run forward and backward on data the test makes, standing in for
// the data sets they were written for: random images in an LMDB (and a mean image where the net subtracts one),
// random images and a window file for R-CNN's WindowData, HDF5 files for the HDF5Data nets, random values for
// the Input blobs of deploy nets. Batches are cut to a few items in the parsed parameter (the files keep the
// published sizes), so that the whole suite stays quick on one core.
//
// Training nets run in TRAIN and in TEST and must give a finite, positive loss and finite gradients. Deploy nets
// (no loss) run once with force_backward: their parameters get random values (a .caffemodel's stand-in), their
// outputs random gradients, and every output, input gradient and parameter gradient must be finite and the
// gradients not all zero.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/random.hpp"
#include "core/threads.hpp"
#include "io/hdf5.hpp"
#include "io/image_io.hpp"
#include "io/lmdb.hpp"
#include "io/proto_io.hpp"
#include "layers/layer_registry.hpp"
#include "layers/vision/kernel_geometry.hpp"
#include "net/memory_plan.hpp"
#include "net/net.hpp"
#include "net/passes.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// What feeds a net.
enum class Feed {
  kLmdb,      // Data layers: an LMDB of `channels` x `size` x `size` images labelled in [0, classes)
  kWindow,    // WindowData: `channels`-channel images and a window file with classes in [1, classes)
  kHdf5,      // HDF5Data with tops data (`channels` features per item) and label (in [0, classes))
  kSequence,  // HDF5Data with tops data (T x N x `channels`), cont (T x N) and target (as data), one row a step
  kDeploy,    // Input layers only, no loss
};

struct Example {
  const char* prototxt;  // under examples/
  Feed feed;
  int channels = 0, size = 0, classes = 0;
  float input_scale = 50.f;  // deploy nets: the spread of the random inputs (raw or mean-subtracted pixels)
};

Example Lmdb(const char* prototxt, int channels, int size, int classes) {
  return {prototxt, Feed::kLmdb, channels, size, classes};
}
Example Window(const char* prototxt, int classes) { return {prototxt, Feed::kWindow, 3, 0, classes}; }
Example Hdf5(const char* prototxt, int features, int classes) { return {prototxt, Feed::kHdf5, features, 0, classes}; }
Example Sequence(const char* prototxt) { return {prototxt, Feed::kSequence, 1}; }
Example Deploy(const char* prototxt, float input_scale = 50.f) {
  return {prototxt, Feed::kDeploy, 0, 0, 0, input_scale};
}

// Every data layer's batch (and every Input blob's first axis) in the tests.
constexpr int kBatch = 2;
// Window batches need room for a foreground window (a quarter of the batch in R-CNN's fine-tuning).
constexpr int kWindowBatch = 4;
// LMDB records: a few batches.
constexpr int kRecords = 8;

// `count` random channels x size x size Datums with labels in [0, classes).
void WriteImages(const std::string& path, int count, const Example& example) {
  RandomStream random(5);
  LmdbWriter writer(path);
  for (int i = 0; i < count; ++i) {
    Datum datum;
    datum.set_channels(example.channels);
    datum.set_height(example.size);
    datum.set_width(example.size);
    std::string pixels(static_cast<size_t>(example.channels) * example.size * example.size, '\0');
    for (auto& pixel : pixels) pixel = static_cast<char>(random.UniformInt(256));
    datum.set_data(pixels);
    datum.set_label(static_cast<int>(random.UniformInt(example.classes)));
    writer.Put(RecordKey(i), datum.SerializeAsString());
  }
  writer.Commit();
}

// A 1 x channels x height x width mean image of values around 128.
void WriteMean(const std::string& path, int channels, int height, int width) {
  BlobProto mean;
  for (int d : {1, channels, height, width}) mean.mutable_shape()->add_dim(d);
  RandomStream random(6);
  for (int i = 0; i < channels * height * width; ++i) mean.add_data(static_cast<float>(112 + random.UniformInt(32)));
  WriteProtoToBinaryFile(mean, path);
}

// Three random colour images (JPEG, PNG, JPEG) and a window file in R-CNN's format naming them: per image a
// "# index" line, the path, channels, height, width, the number of windows, then one "class overlap x1 y1 x2 y2"
// line per window: foreground windows (overlap >= 0.5) of classes in [1, classes) and background ones.
std::string WriteWindows(const test::TempDir& dir, const Example& example) {
  RandomStream random(7);
  const std::vector<std::pair<int, int>> sizes = {{90, 120}, {120, 100}, {80, 80}};  // height, width
  std::ostringstream windows;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto [height, width] = sizes[i];
    std::vector<unsigned char> pixels(static_cast<size_t>(height) * width * example.channels);
    for (auto& pixel : pixels) pixel = static_cast<unsigned char>(random.UniformInt(256));
    const std::string extension = i == 1 ? ".png" : ".jpg";
    const std::string path = dir.file("image" + std::to_string(i) + extension);
    std::ofstream(path, std::ios::binary) << EncodeImage(extension, pixels.data(), height, width, example.channels);
    const int label = 1 + static_cast<int>(random.UniformInt(example.classes - 1));
    windows << "# " << i << "\n" << path << "\n" << example.channels << "\n" << height << "\n" << width << "\n4\n";
    windows << label << " 0.8 10 5 " << width - 20 << " " << height - 10 << "\n";
    windows << label << " 0.6 0 0 " << width / 2 << " " << height / 2 << "\n";
    windows << "0 0.1 " << width / 2 << " " << height / 3 << " " << width - 1 << " " << height - 1 << "\n";
    windows << "0 0 3 3 13 13\n";
  }
  const std::string source = dir.file("windows.txt");
  std::ofstream(source) << windows.str();
  return source;
}

// HDF5 files for the HDF5Data nets and the list naming them. kHdf5: data (rows x channels), label (rows);
// kSequence: 3 streams of rows time steps: data and target (rows x 3 x channels), cont (rows x 3), 0 where a
// sequence starts.
std::string WriteHdf5(const test::TempDir& dir, const Example& example) {
  RandomStream random(8);
  const int rows = 12, streams = 3;
  auto values = [&](size_t count) {
    std::vector<float> v(count);
    for (float& x : v) x = static_cast<float>(random.UniformInt(2001)) / 1000.f - 1.f;
    return v;
  };
  const std::string path = dir.file("data.h5");
  Hdf5File file(path, Hdf5File::Mode::kCreate);
  if (example.feed == Feed::kHdf5) {
    file.AppendFloats("data", {rows, example.channels}, values(static_cast<size_t>(rows) * example.channels).data());
    std::vector<float> labels(rows);
    for (float& label : labels) label = static_cast<float>(random.UniformInt(example.classes));
    file.AppendFloats("label", {rows}, labels.data());
  } else {
    const size_t count = static_cast<size_t>(rows) * streams * example.channels;
    file.AppendFloats("data", {rows, streams, example.channels}, values(count).data());
    file.AppendFloats("target", {rows, streams, example.channels}, values(count).data());
    std::vector<float> cont(static_cast<size_t>(rows) * streams, 1.f);
    for (int s = 0; s < streams; ++s) cont[s] = cont[static_cast<size_t>(7) * streams + s] = 0.f;
    file.AppendFloats("cont", {rows, streams}, cont.data());
  }
  file.Flush();
  const std::string list = dir.file("list.txt");
  std::ofstream(list) << path << "\n";
  return list;
}

// Points every data layer of `param` at the test's data (made here) and cuts its batch.
void FeedTestData(const test::TempDir& dir, const Example& example, NetParameter* param) {
  std::string source, mean;
  if (example.feed == Feed::kLmdb) {
    source = dir.file("images_lmdb");
    WriteImages(source, kRecords, example);
    mean = dir.file("mean.binaryproto");
    WriteMean(mean, example.channels, example.size, example.size);
  } else if (example.feed == Feed::kWindow) {
    source = WriteWindows(dir, example);
    mean = dir.file("mean.binaryproto");
    WriteMean(mean, example.channels, 256, 256);  // an ImageNet mean, as R-CNN subtracts
  } else if (example.feed == Feed::kHdf5 || example.feed == Feed::kSequence) {
    source = WriteHdf5(dir, example);
  }
  for (LayerParameter& layer : *param->mutable_layer()) {
    if (layer.has_transform_param() && layer.transform_param().has_mean_file())
      layer.mutable_transform_param()->set_mean_file(mean);
    if (layer.has_data_param()) {
      layer.mutable_data_param()->set_source(source);
      layer.mutable_data_param()->set_batch_size(kBatch);
    }
    if (layer.has_window_data_param()) {
      layer.mutable_window_data_param()->set_source(source);
      layer.mutable_window_data_param()->set_batch_size(kWindowBatch);
    }
    if (layer.has_hdf5_data_param()) {
      layer.mutable_hdf5_data_param()->set_source(source);
      layer.mutable_hdf5_data_param()->set_batch_size(kBatch);
    }
    for (BlobShape& shape : *layer.mutable_input_param()->mutable_shape()) shape.set_dim(0, kBatch);
    // A deploy net's BatchNorm layers use their stored statistics (the test gives them values), as in inference.
    // With statistics of the batch, the gradient of the convolution before a BatchNorm is the difference of
    // nearly equal sums (the normalisation takes the mean out), and over ResNet-50's 49 to 3136 positions per
    // channel no two summation orders (blocked and plain layouts, CPU and GPU) agree on it to 1e-3.
    if (example.feed == Feed::kDeploy && layer.type() == "BatchNorm")
      layer.mutable_batch_norm_param()->set_use_global_stats(true);
  }
}

// Fills a blob's data with uniform values of mean 0 and standard deviation `stddev` (uniform rather than Gaussian
// values: the fully connected layers of the CaffeNet family hold 60 million, and Gaussian ones take seconds).
void Randomize(Blob* blob, float stddev, uint64_t seed) {
  const float half_width = stddev * std::sqrt(3.f);
  test::FillUniform(blob, -half_width, half_width, seed);
}

// The first stage that an include rule of a TEST-phase layer names ("" when none does): nets such as Caffe's
// autoencoder pick their test data by stage ("test-on-train", "test-on-test"), as their solvers' test_state does.
std::string FirstTestStage(const NetParameter& param) {
  for (const LayerParameter& layer : param.layer())
    for (const NetStateRule& rule : layer.include())
      if (rule.has_phase() && rule.phase() == TEST && rule.stage_size() > 0) return rule.stage(0);
  return "";
}

void RunTrainingNet(NetParameter param) {
  const std::string test_stage = FirstTestStage(param);
  for (Phase phase : {TRAIN, TEST}) {
    SCOPED_TRACE(phase == TRAIN ? "TRAIN" : "TEST " + test_stage);
    param.mutable_state()->set_phase(phase);
    param.mutable_state()->clear_stage();
    if (phase == TEST && !test_stage.empty()) param.mutable_state()->add_stage(test_stage);
    Net net(param);
    const float loss = net.Forward();
    EXPECT_TRUE(std::isfinite(loss)) << loss << ": " << net.DescribeFirstNonFinite();
    EXPECT_GT(loss, 0.f);
    net.Backward();
    for (size_t p = 0; p < net.learnable_params().size(); ++p) {
      const double size = test::AbsSum(test::DiffOf(*net.learnable_params()[p]));
      EXPECT_TRUE(std::isfinite(size)) << "parameter " << p;
    }
  }
}

// Gives a deploy net's parameters random values scaled to each layer's fan-in (He et al.'s rule keeps the
// activations of deep nets in range) and its inputs random values of spread `input_scale`.
void RandomizeDeployNet(Net* net, float input_scale) {
  uint64_t seed = 100;
  for (Blob* blob : net->learnable_params()) {
    const int fan_in = blob->num_axes() > 1 ? blob->count() / blob->shape(0) : 0;
    Randomize(blob, fan_in > 0 ? std::sqrt(2.f / static_cast<float>(fan_in)) : 0.1f, seed++);
  }
  // BatchNorm's blobs are statistics, not weights: sums of means and variances, and the factor that divides them.
  // Unit variances keep the activations' spread; the means stay random.
  for (const auto& layer : net->layers()) {
    if (std::string(layer->type()) != "BatchNorm") continue;
    layer->params()[1]->set_data(1.f);
    layer->params()[2]->set_data(1.f);
  }
  for (Blob* input : net->input_blobs()) Randomize(input, input_scale, seed++);
}

// Random gradients on a net's outputs, in place of a loss.
void SetRandomOutputGradients(Net* net) {
  uint64_t seed = 200;
  for (int id : net->output_blob_indices()) {
    Blob& output = *net->blobs()[id];
    RandomStream random(seed++);
    float* gradient = output.mutable_cpu_diff();
    for (int i = 0; i < output.count(); ++i) gradient[i] = static_cast<float>(random.UniformInt(2001)) / 1000.f - 1.f;
  }
}

void RunDeployNet(NetParameter param, float input_scale) {
  param.set_force_backward(true);
  Net net(param);
  ASSERT_FALSE(net.input_blobs().empty());
  RandomizeDeployNet(&net, input_scale);
  net.Forward();
  ASSERT_FALSE(net.output_blob_indices().empty());
  for (int id : net.output_blob_indices()) {
    const double size = test::AbsSum(test::DataOf(*net.blobs()[id]));
    EXPECT_TRUE(std::isfinite(size)) << "output '" << net.blob_names()[id] << "': " << net.DescribeFirstNonFinite();
  }
  SetRandomOutputGradients(&net);
  net.Backward();
  for (Blob* input : net.input_blobs()) {
    const double size = test::AbsSum(test::DiffOf(*input));
    EXPECT_TRUE(std::isfinite(size) && size > 0) << "input gradient " << size;
  }
  // BatchNorm's statistics get no gradient (they are not learned); every other parameter must get one.
  std::set<const Blob*> statistics;
  for (const auto& layer : net.layers())
    if (std::string(layer->type()) == "BatchNorm")
      for (const auto& blob : layer->params()) statistics.insert(blob.get());
  for (size_t p = 0; p < net.learnable_params().size(); ++p) {
    const double size = test::AbsSum(test::DiffOf(*net.learnable_params()[p]));
    EXPECT_TRUE(std::isfinite(size) && (size > 0 || statistics.count(net.learnable_params()[p])))
        << "parameter " << p << " gradient " << size;
  }
}

// One forward and backward pass of an example net built with `passes`, in TRAIN (a deploy net with force_backward,
// random parameters, inputs and output gradients): the outputs, then each parameter's and each input's gradient,
// named. `kept` counts the blobs the plan keeps in a layout other than plain.
std::vector<std::pair<std::string, std::vector<float>>> RunOnce(NetParameter param, bool deploy, float input_scale,
                                                                const NetPasses& passes, int* kept,
                                                                Device device = Device::kCPU,
                                                                const std::vector<std::string>& native_types = {}) {
  if (deploy) param.set_force_backward(true);
  param.mutable_state()->set_phase(TRAIN);
  auto context = std::make_shared<Context>(device, 0, 1234);
  for (const std::string& type : native_types) context->force_engine(type, "native");
  Net net(param, context, passes);
  *kept = 0;
  for (const auto& blob : net.blobs()) *kept += blob->layout() != Layout::kPlain;
  if (deploy) RandomizeDeployNet(&net, input_scale);
  net.Forward();
  if (deploy) SetRandomOutputGradients(&net);
  net.Backward();
  std::vector<std::pair<std::string, std::vector<float>>> results;
  for (int id : net.output_blob_indices())
    results.push_back({"output " + net.blob_names()[id], test::DataOf(*net.blobs()[id])});
  for (size_t p = 0; p < net.learnable_params().size(); ++p)
    results.push_back({"parameter " + std::to_string(p) + " gradient", test::DiffOf(*net.learnable_params()[p])});
  for (Blob* input : net.input_blobs()) results.push_back({"input gradient", test::DiffOf(*input)});
  return results;
}

class ExamplesTest : public ::testing::TestWithParam<Example> {
 protected:
  void SetUp() override {
    if (GetParam().feed == Feed::kWindow && !ImageCodecsAvailable())
      GTEST_SKIP() << "built without OpenCV: the WindowData net's JPEG and PNG images cannot be written or read";
  }

  // The example's net, its data layers pointed at data made in a folder of the test's.
  NetParameter FedNet() {
    NetParameter param;
    ReadProtoFromTextFile(test::SourceDir() + "/examples/" + GetParam().prototxt, &param);
    FeedTestData(dir_, GetParam(), &param);
    return param;
  }

 private:
  test::TempDir dir_;
};

TEST_P(ExamplesTest, BuildsAndRunsForwardAndBackward) {
  const Example& example = GetParam();
  const NetParameter param = FedNet();
  if (example.feed == Feed::kDeploy) {
    RunDeployNet(param, example.input_scale);
  } else {
    RunTrainingNet(param);
  }
}

// The plan keeps runs of oneDNN layers in their own layouts (the plan_layouts pass); the net must compute what it
// computes with every blob plain: the same outputs, parameter gradients and input gradients.
TEST_P(ExamplesTest, LayoutRunsGiveThePlainNetsOutputsAndGradients) {
  const Example& example = GetParam();
  const bool deploy = example.feed == Feed::kDeploy;
  NetPasses plain = NetPasses::Default();
  plain.after_build.erase(std::remove_if(plain.after_build.begin(), plain.after_build.end(),
                                         [](const NetPass& pass) { return pass.name == "plan_layouts"; }),
                          plain.after_build.end());
  ASSERT_EQ(plain.after_build.size() + 1, NetPasses::Default().after_build.size());
  int kept = 0, kept_plain = 0;
  const NetParameter param = FedNet();
  const auto expected = RunOnce(param, deploy, example.input_scale, plain, &kept_plain);
  const auto actual = RunOnce(param, deploy, example.input_scale, NetPasses::Default(), &kept);
  EXPECT_EQ(kept_plain, 0);
#ifdef CREMA_USE_ONEDNN
  // Every deploy example convolves and pools through oneDNN: some blob must stay in oneDNN's layout.
  if (deploy) {
    EXPECT_GT(kept, 0);
  }
#endif
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    const std::vector<float>& want = expected[i].second;
    ASSERT_EQ(actual[i].second.size(), want.size()) << expected[i].first;
    float largest = 0.f, worst = 0.f;
    for (size_t j = 0; j < want.size(); ++j) {
      largest = std::max(largest, std::fabs(want[j]));
      worst = std::max(worst, std::fabs(actual[i].second[j] - want[j]));
    }
    EXPECT_LE(worst, 1e-4f * largest + 1e-6f) << expected[i].first << " (largest value " << largest << ")";
  }
}

// The bits of `count` floats, as one 64-bit digest (each 8 bytes mixed in by a multiply and a rotate, the length last):
// the CaffeNet family's gradients are 60 million floats an iteration, too many to keep a copy of every one.
struct Bits {
  uint64_t digest;
  size_t count;
  bool operator==(const Bits& other) const { return digest == other.digest && count == other.count; }
};

Bits BitsOf(const float* values, size_t count) {
  uint64_t digest = 0x9E3779B97F4A7C15ull;
  size_t i = 0;
  for (; i + 2 <= count; i += 2) {
    uint64_t word;
    std::memcpy(&word, values + i, sizeof(word));
    digest = ((digest ^ word) * 0xFF51AFD7ED558CCDull);
    digest = (digest << 31) | (digest >> 33);
  }
  if (i < count) {
    uint32_t last;
    std::memcpy(&last, values + i, sizeof(last));
    digest = ((digest ^ last) * 0xC4CEB9FE1A85EC53ull);
  }
  return {digest ^ count, count};
}

// Several iterations of a net in `phase` on a context with memory plans on or off (and recompute on or off): each
// iteration's outputs and, where
// the net runs backward (TRAIN; a deploy net with force_backward), its parameters' and inputs' gradients, after
// which the parameters take a plain SGD step, so that later iterations start from what earlier ones computed.
std::vector<Bits> RunIterations(NetParameter param, bool deploy, float input_scale, Phase phase, bool plan_memory,
                                bool* planned, bool recompute = false, int* replays = nullptr, bool every_cut = false,
                                int iterations = 3, int lanes = 0, int* wide_stretches = nullptr) {
  param.mutable_state()->set_phase(phase);
  param.mutable_state()->clear_stage();
  if (phase == TEST && !FirstTestStage(param).empty()) param.mutable_state()->add_stage(FirstTestStage(param));
  if (deploy && phase == TRAIN) param.set_force_backward(true);
  auto context = std::make_shared<Context>(Device::kCPU, 0, 1234);
  context->set_plan_memory(plan_memory);
  context->set_recompute(recompute);
  context->set_lanes(lanes);
  Net net(param, context);
  if (phase == TEST) net.PlanMemory(false);  // tested forward only, as the solver's test nets and crema test are
  if (every_cut) net.RecomputeSegments(SegmentCuts(net));
  *planned = net.memory_plan() != nullptr;
  if (replays != nullptr) *replays = net.schedule().replays;
  // Every buffer the plan moved is a slot of its one arena (a step's reshape must not have given it memory back).
  if (*planned) {
    std::set<const SyncedMemory*> memories;
    for (const PlannedBuffer& buffer : net.memory_plan()->buffers) {
      const Blob& owner = *net.blobs()[buffer.owner];
      memories.insert(buffer.gradient ? owner.diff().get() : owner.data().get());
    }
    EXPECT_EQ(memories.size(), 1u) << "the moved buffers lie in " << memories.size() << " memories";
  }
  if (deploy) RandomizeDeployNet(&net, input_scale);
  const bool backward = phase == TRAIN;
  std::vector<Bits> results;
  for (int iteration = 0; iteration < iterations; ++iteration) {
    if (deploy)
      for (Blob* input : net.input_blobs()) Randomize(input, input_scale, 300 + iteration);
    net.ClearParamDiffs();
    const float loss = net.Forward();
    results.push_back(BitsOf(&loss, 1));
    for (int id : net.output_blob_indices())
      results.push_back(BitsOf(net.blobs()[id]->cpu_data(), static_cast<size_t>(net.blobs()[id]->count())));
    if (!backward) continue;
    if (deploy) SetRandomOutputGradients(&net);
    net.Backward();
    for (Blob* param : net.learnable_params()) {
      const float* gradient = param->cpu_diff();
      results.push_back(BitsOf(gradient, static_cast<size_t>(param->count())));
      float* data = param->mutable_cpu_data();
      for (int i = 0; i < param->count(); ++i) data[i] -= 1e-3f * gradient[i];
    }
    for (Blob* input : net.input_blobs())
      results.push_back(BitsOf(input->cpu_diff(), static_cast<size_t>(input->count())));
  }
  if (wide_stretches != nullptr)
    *wide_stretches = static_cast<int>(net.step_lanes().wide_stretches().size() +
                                       (backward ? net.backward_lanes().wide_stretches().size() : 0));
  return results;
}

// Compared as bits, so that a NaN (R-CNN's deploy net diverges under random gradients) equals only itself.
void ExpectSameBits(const std::vector<Bits>& actual, const std::vector<Bits>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(actual[i].count, expected[i].count) << "result " << i;
    EXPECT_TRUE(actual[i] == expected[i]) << "result " << i << " (" << expected[i].count << " values) differs";
  }
}

// The memory plan (net/memory_plan.hpp) moves buffers and runs element layers in place; nothing it does may change
// a value: training (forward and backward) and testing (forward alone) give bit for bit the unplanned net's
// losses, outputs, gradients and updated parameters over several iterations. So does training with recompute
// (net/schedule.hpp), which runs parts of forward again in backward: Dropout's masks, BatchNorm's running statistics
// (in the parameters compared) and the data layers' cursors (the next iteration's inputs) come out as without it.
TEST_P(ExamplesTest, PlannedMemoryGivesTheUnplannedResultsBitForBit) {
  const Example& example = GetParam();
  const bool deploy = example.feed == Feed::kDeploy;
  const NetParameter param = FedNet();
  for (Phase phase : {TRAIN, TEST}) {
    SCOPED_TRACE(phase == TRAIN ? "TRAIN" : "TEST");
    bool planned = false, unplanned = true;
    const auto expected = RunIterations(param, deploy, example.input_scale, phase, false, &unplanned);
    const auto actual = RunIterations(param, deploy, example.input_scale, phase, true, &planned);
    EXPECT_FALSE(unplanned);
    EXPECT_TRUE(planned);
    ExpectSameBits(actual, expected);
    if (phase != TRAIN) continue;
    // Recompute with the planner's segments (none where recompute would not save memory), then with a segment at
    // every place one may begin, which replays all it can; two iterations each (the second starts from the state
    // the first left: BatchNorm's statistics, random streams, data cursors, updated parameters).
    for (bool every_cut : {false, true}) {
      SCOPED_TRACE(every_cut ? "recompute, a segment at every cut" : "recompute");
      int replays = 0;
      const auto recomputed =
          RunIterations(param, deploy, example.input_scale, phase, true, &planned, true, &replays, every_cut, 2);
      ASSERT_LT(recomputed.size(), expected.size());
      ExpectSameBits(recomputed, {expected.begin(), expected.begin() + static_cast<long>(recomputed.size())});
      std::printf("[ recompute] %s%s: %d steps replayed\n", example.prototxt, every_cut ? ", every cut" : "", replays);
      // Two nets have nothing to replay: logistic regression's one layer with parameters reads only the data, and the
      // LSTM carries state from one pass into the next (Layer::Replayable).
      const std::string name = example.prototxt;
      if (every_cut && name != "hdf5_classification/logreg_train_test.prototxt" &&
          name != "lstm_sequence/lstm_train_test.prototxt") {
        EXPECT_GT(replays, 0);
      }
    }
  }
}

// Execution lanes (net/lanes.hpp) run independent steps of forward and of backward at once, under a memory plan
// made for that: training (losses, outputs, gradients, updated parameters) and testing give bit for bit what running
// every step in order gives, over iterations that each start from what the one before left (parameters, BatchNorm's
// statistics, data cursors, random streams).
TEST_P(ExamplesTest, LanesGiveTheInOrderResultsBitForBit) {
  const Example& example = GetParam();
  const bool deploy = example.feed == Feed::kDeploy;
  const NetParameter param = FedNet();
  for (Phase phase : {TRAIN, TEST}) {
    SCOPED_TRACE(phase == TRAIN ? "TRAIN" : "TEST");
    bool planned = false;
    int wide = 0;
    const auto on_lanes = RunIterations(param, deploy, example.input_scale, phase, true, &planned, false, nullptr,
                                        false, 2, /*lanes=*/3, &wide);
    // A chain of steps (CaffeNet) has no stretch to run on lanes, forward or backward: every step ran alone, in order.
    std::printf("[ lanes    ] %s: %d wide stretches\n", example.prototxt, wide);
    if (wide == 0) continue;
    const auto in_order =
        RunIterations(param, deploy, example.input_scale, phase, true, &planned, false, nullptr, false, 2, /*lanes=*/1);
    ExpectSameBits(on_lanes, in_order);
  }
}

// Runs the layer `param` as engine `engine` on `bottoms` (copies), with `parameters` and top gradients drawn
// from `seed`; returns its tops' data, then its bottoms' and parameters' gradients.
std::vector<std::vector<float>> RunEngine(const LayerParameter& param, const std::string& engine,
                                          const std::vector<const Blob*>& bottoms,
                                          const std::vector<std::shared_ptr<Blob>>& parameters, uint64_t seed,
                                          std::string* chosen) {
  auto context = std::make_shared<Context>();
  context->force_engine(param.type(), engine);
  std::vector<std::vector<int>> shapes;
  test::BlobList bottom, top;
  for (const Blob* b : bottoms) {
    shapes.push_back(b->shape());
    Blob* copy = bottom.Add(b->shape());
    std::copy(b->cpu_data(), b->cpu_data() + b->count(), copy->mutable_cpu_data());
  }
  for (int t = 0; t < param.top_size(); ++t) top.Add({});
  std::unique_ptr<Layer> layer = LayerRegistry::Global().Create(param, shapes, context);
  *chosen = layer->engine();
  layer->SetUp(bottom.pointers, top.pointers);
  for (size_t i = 0; i < parameters.size() && i < layer->params().size(); ++i) {
    const Blob& from = *parameters[i];
    std::copy(from.cpu_data(), from.cpu_data() + from.count(), layer->params()[i]->mutable_cpu_data());
    layer->params()[i]->set_diff(0.f);
  }
  layer->Forward(bottom.pointers, top.pointers);
  std::vector<std::vector<float>> results;
  for (Blob* t : top.pointers) {
    results.push_back(test::DataOf(*t));
    Blob gradient(t->shape());
    test::FillGaussian(&gradient, 0.f, 1.f, seed++);
    std::copy(gradient.cpu_data(), gradient.cpu_data() + gradient.count(), t->mutable_cpu_diff());
  }
  layer->Backward(top.pointers, std::vector<bool>(bottoms.size(), true), bottom.pointers);
  for (Blob* b : bottom.pointers) results.push_back(test::DiffOf(*b));
  for (auto& blob : layer->params()) results.push_back(test::DiffOf(*blob));
  return results;
}

// The shape a layer's bottom of `shape` in the net gets in the conformance test: one item, and for a
// convolution whose reference engine (plain loops over every product) would take more than a million
// multiply-adds, the spatial axes halved (no smaller than the kernel) until it does not. Channels, kernel,
// stride, pad, dilation and group stay the net's.
std::vector<int> ConformanceShape(const Layer& layer, std::vector<int> shape) {
  shape[0] = 1;
  if (std::string(layer.type()) != "Convolution" || shape.size() != 4) return shape;
  const ConvolutionParameter& conv = layer.layer_param().convolution_param();
  const KernelGeometry g = ConvolutionGeometry(conv, 2, layer.name());
  const auto products = [&](const std::vector<int>& s) {
    double outputs = conv.num_output();
    for (int a = 0; a < 2; ++a) outputs *= (s[2 + a] + 2 * g.pad[a] - g.extent(a)) / g.stride[a] + 1;
    return outputs * s[1] / std::max<int>(1, conv.group()) * g.kernel[0] * g.kernel[1];
  };
  while (products(shape) > 1e6 && (shape[2] / 2 >= g.extent(0) || shape[3] / 2 >= g.extent(1))) {
    for (int a = 0; a < 2; ++a) shape[2 + a] = std::max(shape[2 + a] / 2, std::min(shape[2 + a], g.extent(a)));
  }
  return shape;
}

// The conformance of the engines on the example nets: every layer whose type has several engines runs, on
// random inputs of its shapes in the net (see ConformanceShape) and with its parameters, as the engine the net
// chose and as the type's reference (the last of its list), and the outputs, input gradients and parameter
// gradients agree within a thousandth of each result's largest magnitude (the engines sum in different orders;
// a wrong index or a missed term is off by the size of the values themselves).
TEST_P(ExamplesTest, EveryEngineAgreesWithTheReferenceEngineOnTheNetsLayers) {
  const Example& example = GetParam();
  NetParameter param = FedNet();
  param.mutable_state()->set_phase(TRAIN);
  Net net(param);
  uint64_t seed = 300;
  int compared = 0;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    const Layer& layer = *net.layers()[i];
    const std::vector<std::string> engines = LayerRegistry::Global().Engines(layer.type(), Device::kCPU);
    if (engines.size() < 2 || layer.engine() == engines.back()) continue;
    SCOPED_TRACE("layer '" + layer.name() + "', engine " + layer.engine());
    const PlanStep* step = nullptr;
    for (const PlanStep& s : net.plan())
      if (s.layer == static_cast<int>(i)) step = &s;
    ASSERT_NE(step, nullptr);
    std::vector<Blob> inputs(step->bottoms.size());
    std::vector<const Blob*> bottoms;
    for (size_t b = 0; b < step->bottoms.size(); ++b) {
      inputs[b].Reshape(ConformanceShape(layer, net.blobs()[step->bottoms[b]]->shape()));
      test::FillGaussian(&inputs[b], 0.f, 1.f, seed++);
      bottoms.push_back(&inputs[b]);
    }
    std::string chosen, reference;
    const auto fast =
        RunEngine(layer.layer_param(), layer.engine(), bottoms, const_cast<Layer&>(layer).params(), seed, &chosen);
    const auto expected =
        RunEngine(layer.layer_param(), engines.back(), bottoms, const_cast<Layer&>(layer).params(), seed, &reference);
    seed += 10;
    ASSERT_EQ(chosen, layer.engine());
    ASSERT_EQ(reference, engines.back());
    ASSERT_EQ(fast.size(), expected.size());
    for (size_t r = 0; r < fast.size(); ++r) {
      ASSERT_EQ(fast[r].size(), expected[r].size()) << "result " << r;
      float largest = 0.f;
      for (float v : expected[r]) largest = std::max(largest, std::abs(v));
      for (size_t k = 0; k < fast[r].size(); ++k)
        ASSERT_NEAR(fast[r][k], expected[r][k], 1e-3f * largest + 1e-6f) << "result " << r << " at " << k;
    }
    ++compared;
  }
  // Every example net but the recurrent and fully connected ones has a convolution or a pooling layer.
  const std::string name = example.prototxt;
  if (name.find("lstm") == std::string::npos && name.find("hdf5") == std::string::npos &&
      name.find("autoencoder") == std::string::npos) {
    EXPECT_GT(compared, 0);
  }
}

// The outputs of one forward pass in TEST, forward only, with the inference rewrites (net/fold.hpp) or without
// (fold: false): random parameters (deploy nets) and BatchNorm statistics of random means and variances, so that a
// fold that got a channel wrong shows. `rewrites` receives what the net did.
std::vector<std::pair<std::string, std::vector<float>>> RunForInference(NetParameter param, bool deploy,
                                                                        float input_scale, bool fold,
                                                                        std::vector<std::string>* rewrites) {
  param.mutable_state()->set_phase(TEST);
  param.mutable_state()->clear_stage();
  if (!FirstTestStage(param).empty()) param.mutable_state()->add_stage(FirstTestStage(param));
  param.set_fold(fold);
  Net net(param, std::make_shared<Context>(Device::kCPU, 0, 1234));
  net.PlanMemory(false);
  uint64_t seed = 400;
  if (deploy) RandomizeDeployNet(&net, input_scale);
  for (const auto& layer : net.layers()) {
    const std::string type = layer->type();
    if (type == "BatchNorm") {
      test::FillUniform(layer->params()[0].get(), -0.5f, 0.5f, seed++);  // mean sums
      test::FillUniform(layer->params()[1].get(), 1.f, 3.f, seed++);     // variance sums
      layer->params()[2]->set_data(2.f);                                 // the factor dividing both
    } else if (type == "Scale" || type == "Bias") {
      for (const auto& blob : layer->params()) test::FillUniform(blob.get(), 0.5f, 1.5f, seed++);
    }
  }
  net.RunAfterWeightsPasses();
  *rewrites = net.rewrites();
  net.Forward();
  std::vector<std::pair<std::string, std::vector<float>>> outputs;
  for (int id : net.output_blob_indices()) outputs.push_back({net.blob_names()[id], test::DataOf(*net.blobs()[id])});
  return outputs;
}

// The inference rewrites change no output: folded and unfolded nets agree within float rounding (1e-5 of the
// largest value of each output), and every net with a convolution or inner product followed by an activation or a
// BatchNorm was rewritten.
TEST_P(ExamplesTest, TheFoldedNetGivesTheUnfoldedNetsOutputs) {
  const Example& example = GetParam();
  const bool deploy = example.feed == Feed::kDeploy;
  if (example.feed == Feed::kSequence) GTEST_SKIP() << "a recurrent net: nothing of it folds";
  const NetParameter param = FedNet();
  std::vector<std::string> none, rewrites;
  const auto expected = RunForInference(param, deploy, example.input_scale, false, &none);
  const auto actual = RunForInference(param, deploy, example.input_scale, true, &rewrites);
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(rewrites.empty());
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t r = 0; r < expected.size(); ++r) {
    SCOPED_TRACE("output " + expected[r].first);
    ASSERT_EQ(expected[r].first, actual[r].first);
    ASSERT_EQ(expected[r].second.size(), actual[r].second.size());
    float largest = 0.f;
    for (float v : expected[r].second) largest = std::max(largest, std::abs(v));
    for (size_t k = 0; k < expected[r].second.size(); ++k)
      ASSERT_NEAR(actual[r].second[k], expected[r].second[k], 1e-5f * largest + 1e-7f) << "at " << k;
  }
}

// Runs everywhere: every layer of the net, in TRAIN and in TEST, has a GPU engine that takes it (its parameters and
// its bottoms' shapes), so that a GPU net runs no layer on the host.
TEST_P(ExamplesTest, EveryLayerRunsOnTheGpu) {
  NetParameter param = FedNet();
  for (Phase phase : {TRAIN, TEST}) {
    param.mutable_state()->set_phase(phase);
    param.mutable_state()->clear_stage();
    if (phase == TEST && !FirstTestStage(param).empty()) param.mutable_state()->add_stage(FirstTestStage(param));
    Net net(param);
    for (const PlanStep& step : net.plan()) {
      const Layer& layer = *net.layers()[step.layer];
      std::vector<std::vector<int>> shapes;
      for (int b : step.bottoms) shapes.push_back(net.blobs()[b]->shape());
      std::string refusals;
      bool taken = false;
      for (const std::string& engine : LayerRegistry::Global().Engines(layer.type(), Device::kGPU)) {
        const std::string why =
            LayerRegistry::Global().Refusal(engine, EngineQuery{layer.layer_param(), shapes, Device::kGPU});
        taken = taken || why.empty();
        refusals += "; " + engine + ": " + why;
      }
      EXPECT_TRUE(taken) << (phase == TRAIN ? "TRAIN" : "TEST") << ": layer '" << layer.name() << "' (" << layer.type()
                         << ") has no GPU engine that takes it" << refusals;
    }
  }
}

// On a GPU, the net's outputs and gradients (one forward and backward pass in TRAIN, as the layout test above) are
// the CPU's, within float rounding of another summation order (cuDNN's and cuBLAS's algorithms). How far rounding
// alone moves each result is measured on the CPU itself, in three other orders: the convolutions and inner products
// on the native engines (im2col and a product) instead of oneDNN's, and oneDNN's on one thread and on sixteen (it
// splits its weight gradients' sums over the threads there are, cores or not). A first layer's weight gradient, summed
// through a deep net's whole backward, moves far more than an output does. The GPU may differ from the CPU by 2e-3 of
// the result's largest value, or by 4 times the largest measured spread where that is larger. On an H200 GoogLeNet
// deploy's first gradient was 9.7e-4 off (largest 0.089) with every cuDNN algorithm choice (deterministic ones,
// workspace-free ones, measured ones); on that machine's CPU, 1, 4 and 6 threads and the native engines agreed within
// 4.0e-5, while 16 threads moved it by 8.8e-4 (docs/gpu-record.md, run 3).
TEST_P(ExamplesTest, TheGpuNetGivesTheCpuNetsOutputsAndGradients) {
  CREMA_SKIP_WITHOUT_GPU();
  const Example& example = GetParam();
  const bool deploy = example.feed == Feed::kDeploy;
  const NetParameter param = FedNet();
  int kept = 0;
  const auto cpu = RunOnce(param, deploy, example.input_scale, NetPasses::Default(), &kept, Device::kCPU);
  const auto other_order = RunOnce(param, deploy, example.input_scale, NetPasses::Default(), &kept, Device::kCPU,
                                   {"Convolution", "InnerProduct", "Deconvolution"});
  std::vector<std::pair<std::string, std::vector<float>>> one_thread, sixteen_threads;
  {
    OneThreadWhile one(true);
    one_thread = RunOnce(param, deploy, example.input_scale, NetPasses::Default(), &kept, Device::kCPU);
  }
  {
    const int threads = omp_get_max_threads();
    omp_set_num_threads(16);  // oneDNN splits its sums by the threads there are, not by the cores
    sixteen_threads = RunOnce(param, deploy, example.input_scale, NetPasses::Default(), &kept, Device::kCPU);
    omp_set_num_threads(threads);
  }
  const auto gpu = RunOnce(param, deploy, example.input_scale, NetPasses::Default(), &kept, Device::kGPU);
  ASSERT_EQ(cpu.size(), gpu.size());
  ASSERT_EQ(cpu.size(), other_order.size());
  ASSERT_EQ(cpu.size(), one_thread.size());
  ASSERT_EQ(cpu.size(), sixteen_threads.size());
  for (size_t r = 0; r < cpu.size(); ++r) {
    SCOPED_TRACE(cpu[r].first);
    ASSERT_EQ(cpu[r].second.size(), gpu[r].second.size());
    ASSERT_EQ(cpu[r].second.size(), other_order[r].second.size());
    float largest = 0.f, spread = 0.f, worst = 0.f;
    for (size_t k = 0; k < cpu[r].second.size(); ++k) {
      largest = std::max(largest, std::abs(cpu[r].second[k]));
      spread = std::max(spread, std::abs(other_order[r].second[k] - cpu[r].second[k]));
      spread = std::max(spread, std::abs(one_thread[r].second[k] - cpu[r].second[k]));
      spread = std::max(spread, std::abs(sixteen_threads[r].second[k] - cpu[r].second[k]));
      worst = std::max(worst, std::abs(gpu[r].second[k] - cpu[r].second[k]));
    }
    const float allowed = std::max(2e-3f * largest, 4.f * spread) + 1e-5f;
    if (worst > 2e-3f * largest)
      std::printf("  %s: GPU off by %.3g, CPU orders by %.3g, largest %.3g\n", cpu[r].first.c_str(), worst, spread,
                  largest);
    for (size_t k = 0; k < cpu[r].second.size(); ++k)
      ASSERT_NEAR(gpu[r].second[k], cpu[r].second[k], allowed)
          << "at " << k << " (CPU orders differ by up to " << spread << ", largest " << largest << ")";
  }
}

// Test names from the file names: "imagenet/googlenet_deploy.prototxt" -> imagenet_googlenet_deploy.
// Printed as its file, so that test names (ctest's include the parameter) stay the same from run to run.
void PrintTo(const Example& example, std::ostream* out) { *out << example.prototxt; }

std::string ExampleName(const ::testing::TestParamInfo<Example>& info) {
  std::string name = info.param.prototxt;
  name = name.substr(0, name.rfind(".prototxt"));
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Caffe, ExamplesTest,
    ::testing::Values(
        Lmdb("fashion_mnist/lenet_train_test.prototxt", 1, 28, 10),
        Lmdb("fashion_mnist/resnet_train_test.prototxt", 1, 28, 10), Deploy("fashion_mnist/lenet_deploy.prototxt"),
        Lmdb("mnist/mnist_autoencoder.prototxt", 1, 28, 10),
        Lmdb("expression/autoencoder_train_test.prototxt", 1, 28, 10),
        Lmdb("onnx/resnet_train_test.prototxt", 1, 28, 10), Deploy("onnx/resnet_imported.prototxt"),
        Lmdb("cifar10/cifar10_quick_train_test.prototxt", 3, 32, 10),
        Deploy("cifar10/cifar10_quick_deploy.prototxt", 1.f),  // pixels in 0..1
        Lmdb("cifar10/cifar10_full_train_test.prototxt", 3, 32, 10),
        Lmdb("cifar10/cifar10_full_sigmoid_train_test.prototxt", 3, 32, 10),
        Lmdb("cifar10/cifar10_full_sigmoid_train_test_bn.prototxt", 3, 32, 10),
        Lmdb("siamese/mnist_siamese_train_test.prototxt", 2, 28, 2),
        Lmdb("imagenet/caffenet_train_val.prototxt", 3, 256, 1000), Deploy("imagenet/caffenet_deploy.prototxt"),
        Lmdb("imagenet/alexnet_train_val.prototxt", 3, 256, 1000), Deploy("imagenet/alexnet_deploy.prototxt"),
        Lmdb("imagenet/googlenet_train_val.prototxt", 3, 256, 1000), Deploy("imagenet/googlenet_deploy.prototxt"),
        Deploy("imagenet/resnet50_deploy.prototxt"), Deploy("imagenet/caffenet_full_conv_deploy.prototxt"),
        Window("rcnn/pascal_finetune_trainval_test.prototxt", 21), Deploy("rcnn/rcnn_ilsvrc13_deploy.prototxt"),
        Hdf5("hdf5_classification/logreg_train_test.prototxt", 4, 2),
        Hdf5("hdf5_classification/nonlinear_train_test.prototxt", 4, 2),
        Sequence("lstm_sequence/lstm_train_test.prototxt")),
    ExampleName);

}  // namespace
}  // namespace crema
