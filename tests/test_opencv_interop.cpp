// Interoperability with OpenCV's dnn module: its Caffe importer (cv::dnn::readNetFromCaffe) must read the deploy
// prototxts crema runs and the .caffemodel files crema writes, and compute what crema computes, blob by blob.
//
// Every net gets random parameters from seeded fillers (weights and biases non-zero, BatchNorm statistics and
// moving-average factors far from the identity) and a random input batch of more than one item, scaled as the
// net's real inputs are (mean-subtracted pixels of about +-128 for the ImageNet and CIFAR-10 full nets, so that
// LRN with alpha 1e-4 really normalises). crema writes the weights with Net::ToProto + WriteProtoToBinaryFile;
// OpenCV reads them on its own CPU backend. Not only the final probabilities are compared, but every blob of the
// prototxt that OpenCV can return (net.forward with the names of the layers that last write them).
//
// Tolerance: both sides compute in float32 but sum in different orders (oneDNN's or OpenBLAS's blocking against
// OpenCV's own kernels). The rounding error of a float32 sum of n terms of random sign grows like 2^-24 * sqrt(n)
// of its result: about 4e-6 for fc6's 9216 terms, less for blocked sums; earlier layers' differences carry
// through. The worst seen here is 2.6e-6 of a blob's largest magnitude (CaffeNet's probabilities). Each blob may
// differ by kRelativeTolerance = 1e-4 of its largest magnitude: room for other CPUs' kernels (AVX2 and AVX-512
// block sums differently), while one term lost from a sum of a thousand, or a wrong divisor at a pooling edge,
// is a difference of a percent or more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#ifdef CREMA_USE_OPENCV
#include <opencv2/dnn.hpp>
#endif

#include "core/blob.hpp"
#include "core/context.hpp"
#include "core/filler.hpp"
#include "core/layout.hpp"
#include "core/random.hpp"
#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "onnx/export.hpp"
#include "onnx/import.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

#ifndef CREMA_USE_OPENCV

TEST(OpenCvInteropTest, NeedsOpenCv) {
  GTEST_SKIP() << "built without OpenCV (CREMA_USE_OPENCV=OFF): its Caffe importer cannot be compared";
}

#else

constexpr double kRelativeTolerance = 1e-4;

// One blob of a net as crema and OpenCV computed it, in crema's plain order.
struct BlobPair {
  std::string blob;
  std::vector<int> shape;
  std::vector<float> ours, theirs;
};

FillerParameter Filler(const std::string& type, float a = 0, float b = 0) {
  FillerParameter filler;
  filler.set_type(type);
  if (type == "gaussian") {
    filler.set_mean(a);
    filler.set_std(b);
  } else if (type == "uniform") {
    filler.set_min(a);
    filler.set_max(b);
  }
  return filler;
}

// Fills every parameter of `net` from `random`. Weights are He-scaled (msra), so activations keep about the
// input's magnitude `scale` from layer to layer; biases are a fifth of it. BatchNorm stores its statistics
// multiplied by a moving-average factor (its third blob), which is drawn too: an importer that ignored the factor
// would normalise by the wrong statistics.
void FillParameters(Net* net, float scale, RandomStream* random) {
  for (size_t l = 0; l < net->layers().size(); ++l) {
    Layer& layer = *net->layers()[l];
    auto& blobs = layer.params();
    if (blobs.empty()) continue;
    const std::string type = layer.type();
    if (type == "Convolution" || type == "Deconvolution" || type == "InnerProduct") {
      Fill(Filler("msra"), blobs[0].get(), random);
      if (blobs.size() > 1) Fill(Filler("gaussian", 0.f, 0.2f * scale), blobs[1].get(), random);
    } else if (type == "BatchNorm") {
      ASSERT_EQ(blobs.size(), 3u) << net->layer_names()[l];
      Fill(Filler("uniform", 0.5f, 4.f), blobs[2].get(), random);
      const float factor = blobs[2]->cpu_data()[0];
      Fill(Filler("gaussian", 0.f, 0.5f * scale * factor), blobs[0].get(), random);
      Fill(Filler("uniform", 0.5f * scale * scale * factor, 2.f * scale * scale * factor), blobs[1].get(), random);
    } else if (type == "Scale") {
      Fill(Filler("uniform", 0.5f, 1.5f), blobs[0].get(), random);
      if (blobs.size() > 1) Fill(Filler("gaussian", 0.f, 0.2f), blobs[1].get(), random);
    } else if (type == "PReLU") {
      Fill(Filler("uniform", 0.1f, 0.4f), blobs[0].get(), random);
    } else if (type == "Bias") {
      Fill(Filler("gaussian", 0.f, 0.2f * scale), blobs[0].get(), random);
    } else {
      FAIL() << "no filler rule for the parameters of " << type << " layer '" << net->layer_names()[l] << "'";
    }
  }
}

// The layer that writes each blob last, in prototxt order: after a forward pass the blob holds that layer's
// output (in-place ReLU, BatchNorm, Scale and Dropout included), and OpenCV returns it under that layer's name.
std::map<std::string, std::string> LastWriters(const NetParameter& param) {
  std::map<std::string, std::string> writers;
  for (const auto& layer : param.layer())
    for (const auto& top : layer.top()) writers[top] = layer.name();
  return writers;
}

double StandardDeviation(const std::vector<float>& values) {
  double sum = 0, squares = 0;
  for (float v : values) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const double mean = sum / values.size();
  return std::sqrt(std::max(0.0, squares / values.size() - mean * mean));
}

// Rescales the parameters of the layer that feeds each Softmax so its scores spread with a standard deviation of
// 3: with random weights they would be as large as the activations (about 100 for pixel inputs), and softmax
// would return one-hot rows that hide every difference before it.
void SpreadScores(const NetParameter& param, Net* net) {
  const auto writers = LastWriters(param);
  for (const auto& layer : param.layer()) {
    if (layer.type() != "Softmax") continue;
    const std::string& scores = layer.bottom(0);
    const double spread = StandardDeviation(PlainValues(*net->blob_by_name(scores)));
    ASSERT_GT(spread, 0) << "the scores '" << scores << "' before " << layer.name() << " are constant";
    for (auto& blob : net->layer_by_name(writers.at(scores))->params()) {
      float* values = blob->mutable_cpu_data();
      for (int i = 0; i < blob->count(); ++i) values[i] *= static_cast<float>(3.0 / spread);
    }
  }
}

// The deploy form of a train/test net: its Data layers replaced by one Input blob "data" of `input_shape`, its
// loss and accuracy layers dropped, and a Softmax "prob" on the scores the loss read.
NetParameter DeployOf(const NetParameter& train_test, const std::vector<int>& input_shape) {
  NetParameter deploy;
  deploy.set_name(train_test.name());
  LayerParameter* input = deploy.add_layer();
  input->set_name("data");
  input->set_type("Input");
  input->add_top("data");
  BlobShape* shape = input->mutable_input_param()->add_shape();
  for (int dim : input_shape) shape->add_dim(dim);
  std::string scores;
  for (const auto& layer : train_test.layer()) {
    if (layer.type() == "Data" || layer.type() == "Accuracy") continue;
    if (layer.type() == "SoftmaxWithLoss") {
      scores = layer.bottom(0);
      continue;
    }
    *deploy.add_layer() = layer;
  }
  LayerParameter* prob = deploy.add_layer();
  prob->set_name("prob");
  prob->set_type("Softmax");
  prob->add_bottom(scores);
  prob->add_top("prob");
  return deploy;
}

// A deploy net built in crema with its Input batch set to `batch`, filled at random (parameters, and an input
// uniform in [low, high)), and every blob of the prototxt but the input as crema computed it.
struct PreparedNet {
  NetParameter param;
  std::unique_ptr<Net> net;
  std::map<std::string, std::vector<float>> ours;
  std::map<std::string, std::vector<int>> shapes;
};

PreparedNet Prepare(const std::string& deploy_path, int batch, float low, float high, uint64_t seed) {
  PreparedNet prepared;
  NetParameter& param = prepared.param;
  ReadProtoFromTextFile(deploy_path, &param);
  param.mutable_state()->set_phase(TEST);
  bool has_input = false;
  for (auto& layer : *param.mutable_layer()) {
    if (layer.type() != "Input") continue;
    layer.mutable_input_param()->mutable_shape(0)->set_dim(0, batch);
    has_input = true;
  }
  EXPECT_TRUE(has_input) << deploy_path << " has no Input layer";
  prepared.net = std::make_unique<Net>(param, std::make_shared<Context>(Device::kCPU, 0, seed));
  Net& net = *prepared.net;
  EXPECT_EQ(net.input_blobs().size(), 1u) << deploy_path;
  if (net.input_blobs().size() != 1) return prepared;

  // Parameters and input, then the classifier's spread from one forward pass.
  RandomStream random(seed);
  const float scale = std::max(std::fabs(low), std::fabs(high));
  FillParameters(&net, scale, &random);
  Blob& input = *net.input_blobs()[0];
  Fill(Filler("uniform", low, high), &input, &random);
  net.Forward();
  SpreadScores(param, &net);

  // crema's values, blob by blob, taken as soon as the layer that writes a blob last has run (a later step may
  // reuse a blob's memory once its readers are done).
  const auto writers = LastWriters(param);
  for (size_t step = 0; step < net.plan().size(); ++step) {
    net.ForwardStep(step);
    const int layer = net.plan()[step].layer;
    if (std::string(net.layers()[layer]->type()) == "Input") continue;
    for (int id : net.plan()[step].tops) {
      const std::string& blob = net.blob_names()[id];
      auto writer = writers.find(blob);
      if (writer == writers.end() || writer->second != net.layer_names()[layer]) continue;
      prepared.ours[blob] = PlainValues(*net.blobs()[id]);
      prepared.shapes[blob] = net.blobs()[id]->shape();
    }
  }
  return prepared;
}

// Sets `opencv`'s input to `net`'s and returns `names` as OpenCV computes them, paired with crema's values of the
// blobs `blobs` (in that order).
std::vector<BlobPair> CompareOutputs(cv::dnn::Net& opencv, const PreparedNet& prepared,
                                     const std::vector<std::string>& blobs, const std::vector<std::string>& names) {
  const Blob& input = *prepared.net->input_blobs()[0];
  const std::vector<int> input_shape = input.shape();
  std::vector<float> input_values = PlainValues(input);
  opencv.setInput(cv::Mat(static_cast<int>(input_shape.size()), input_shape.data(), CV_32F, input_values.data()));
  std::vector<cv::Mat> theirs;
  opencv.forward(theirs, names);
  EXPECT_EQ(theirs.size(), blobs.size());
  std::vector<BlobPair> pairs;
  for (size_t i = 0; i < blobs.size() && i < theirs.size(); ++i) {
    const cv::Mat& actual = theirs[i];
    BlobPair pair{blobs[i], prepared.shapes.at(blobs[i]), prepared.ours.at(blobs[i]), {}};
    EXPECT_EQ(std::vector<int>(actual.size.p, actual.size.p + actual.dims), pair.shape)
        << "blob '" << blobs[i] << "' (OpenCV's layer '" << names[i] << "')";
    if (actual.total() != pair.ours.size()) continue;
    pair.theirs.assign(actual.ptr<float>(), actual.ptr<float>() + actual.total());
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

// Builds `deploy_path` in crema (Prepare), writes its weights, has OpenCV read the same prototxt and those weights,
// runs both on the same input and returns every blob of the prototxt but the input as both computed it, in prototxt
// order (the final output last).
std::vector<BlobPair> RunBoth(const std::string& deploy_path, int batch, float low, float high, uint64_t seed) {
  const PreparedNet prepared = Prepare(deploy_path, batch, low, high, seed);
  if (prepared.net == nullptr || prepared.net->input_blobs().size() != 1) return {};
  const NetParameter& param = prepared.param;
  const Net& net = *prepared.net;
  const auto writers = LastWriters(param);

  test::TempDir dir;
  const std::string weights = dir.file("random.caffemodel");
  NetParameter trained;
  net.ToProto(&trained);
  WriteProtoToBinaryFile(trained, weights);

  cv::dnn::Net opencv = cv::dnn::readNetFromCaffe(deploy_path, weights);
  EXPECT_FALSE(opencv.empty()) << deploy_path;
  if (opencv.empty()) return {};
  opencv.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  opencv.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);

  // The weights OpenCV loaded are the ones crema wrote, value for value.
  for (const auto& layer : trained.layer()) {
    if (layer.type() != "Convolution" && layer.type() != "Deconvolution" && layer.type() != "InnerProduct") continue;
    for (int b = 0; b < layer.blobs_size(); ++b) {
      const cv::Mat loaded = opencv.getParam(layer.name(), b);
      EXPECT_EQ(loaded.total(), static_cast<size_t>(layer.blobs(b).data_size())) << layer.name() << " blob " << b;
      if (loaded.total() != static_cast<size_t>(layer.blobs(b).data_size())) continue;
      const float* values = loaded.ptr<float>();
      EXPECT_TRUE(std::equal(values, values + loaded.total(), layer.blobs(b).data().begin()))
          << layer.name() << " blob " << b;
    }
  }

  // OpenCV names a layer's output by the layer.
  std::vector<std::string> blobs, layers;
  for (const auto& layer : param.layer())
    for (const auto& top : layer.top())
      if (prepared.ours.count(top) && writers.at(top) == layer.name()) {
        blobs.push_back(top);
        layers.push_back(layer.name());
      }
  return CompareOutputs(opencv, prepared, blobs, layers);
}

// Builds `deploy_path` in crema (Prepare), exports it with ExportOnnx, has OpenCV's ONNX importer read the model, and
// returns the net's outputs as both computed them. `blobs_to_compare` more blobs by name (the ONNX value that keeps
// a blob's name is its final value).
std::vector<BlobPair> RunOnnx(const std::string& deploy_path, int batch, float low, float high, uint64_t seed,
                              const std::vector<std::string>& blobs_to_compare = {}) {
  const PreparedNet prepared = Prepare(deploy_path, batch, low, high, seed);
  if (prepared.net == nullptr || prepared.net->input_blobs().size() != 1) return {};
  onnx::ModelProto model = ExportOnnx(*prepared.net);
  // The blobs to compare as more outputs of the model: a runtime returns the values of its outputs by name.
  for (const std::string& blob : blobs_to_compare) {
    onnx::ValueInfoProto* output = model.mutable_graph()->add_output();
    output->set_name(blob);
    auto* tensor = output->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(onnx::TensorProto::FLOAT);
    for (int dim : prepared.shapes.at(blob)) tensor->mutable_shape()->add_dim()->set_dim_value(dim);
  }
  std::string bytes;
  EXPECT_TRUE(model.SerializeToString(&bytes));
  cv::dnn::Net opencv = cv::dnn::readNetFromONNX(bytes.data(), bytes.size());
  EXPECT_FALSE(opencv.empty()) << deploy_path;
  if (opencv.empty()) return {};
  opencv.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  opencv.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
  std::vector<std::string> blobs = blobs_to_compare;
  for (int id : prepared.net->output_blob_indices()) blobs.push_back(prepared.net->blob_names()[id]);
  return CompareOutputs(opencv, prepared, blobs, blobs);
}

// The largest magnitude in `reference` and the largest difference between `values` and it.
std::pair<double, double> LargestAndWorst(const std::vector<float>& reference, const std::vector<float>& values) {
  double largest = 0, worst = 0;
  for (size_t j = 0; j < reference.size(); ++j) {
    largest = std::max(largest, std::fabs(static_cast<double>(reference[j])));
    worst = std::max(worst, std::fabs(static_cast<double>(values[j]) - reference[j]));
  }
  return {largest, worst};
}

// Expects `expected_blobs` blobs, each non-zero and the same in both within kRelativeTolerance of its largest
// magnitude; and class probabilities ("prob") that are neither saturated nor uniform, so that comparing them
// means something.
void ExpectAgreement(const std::vector<BlobPair>& pairs, size_t expected_blobs) {
  ASSERT_EQ(pairs.size(), expected_blobs);
  double worst_relative = 0;
  std::string worst_blob;
  for (const BlobPair& pair : pairs) {
    const auto [largest, worst] = LargestAndWorst(pair.ours, pair.theirs);
    EXPECT_GT(largest, 0) << "blob '" << pair.blob << "' is all zero";
    EXPECT_LE(worst, kRelativeTolerance * largest)
        << "blob '" << pair.blob << "': crema and OpenCV differ by " << worst << ", largest magnitude " << largest;
    if (largest > 0 && worst / largest > worst_relative) {
      worst_relative = worst / largest;
      worst_blob = pair.blob;
    }
    if (pair.blob == "prob") {
      const int items = pair.shape[0], classes = static_cast<int>(pair.ours.size()) / items;
      for (int n = 0; n < items; ++n) {
        const float top = *std::max_element(pair.ours.begin() + n * classes, pair.ours.begin() + (n + 1) * classes);
        EXPECT_LT(top, 0.99f) << "item " << n << ": saturated probabilities";
        EXPECT_GT(top, 2.f / classes) << "item " << n << ": nearly uniform probabilities";
      }
    }
  }
  std::cout << "  " << pairs.size() << " blobs compared; worst relative difference " << worst_relative << " (blob '"
            << worst_blob << "')" << std::endl;
}

const BlobPair& Find(const std::vector<BlobPair>& pairs, const std::string& blob) {
  for (const BlobPair& pair : pairs)
    if (pair.blob == blob) return pair;
  throw Error("no blob '" + blob + "' was compared");
}

// Expects the LRN from `before` to `after` to shrink crema's values by 5% or more on average: with inputs too small
// for alpha (1e-4 in the ImageNet nets), LRN would be the identity and its comparison would prove nothing.
void ExpectLrnNormalises(const std::vector<BlobPair>& pairs, const std::string& before, const std::string& after) {
  const std::vector<float>& x = Find(pairs, before).ours;
  const std::vector<float>& y = Find(pairs, after).ours;
  ASSERT_EQ(x.size(), y.size());
  double shrinkage = 0;
  int nonzero = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == 0) continue;
    shrinkage += 1 - static_cast<double>(y[i]) / x[i];
    ++nonzero;
  }
  ASSERT_GT(nonzero, 0) << before;
  EXPECT_GT(shrinkage / nonzero, 0.05) << after << " leaves " << before << " almost unchanged";
}

std::string Example(const std::string& path) { return test::SourceDir() + "/examples/" + path; }

// A prototxt held by the test, written where OpenCV can read it too.
std::string WriteNet(const test::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  WriteStringToFileAtomically(text, path);
  return path;
}

TEST(OpenCvInteropTest, LeNetAgrees) {
  // conv1 pool1 conv2 pool2 ip1 ip2 prob; relu1 writes ip1 last.
  ExpectAgreement(RunBoth(Example("fashion_mnist/lenet_deploy.prototxt"), 4, 0.f, 1.f, 11), 7);
}

TEST(OpenCvInteropTest, Cifar10QuickAgrees) {
  // Its pool2 and pool3 (AVE, kernel 3, stride 2, no pad) round up, so their last windows overhang the input and
  // average only the values inside it.
  ExpectAgreement(RunBoth(Example("cifar10/cifar10_quick_deploy.prototxt"), 4, 0.f, 1.f, 12), 9);
}

TEST(OpenCvInteropTest, Cifar10FullWithLrnWithinChannelsAgrees) {
  // The only example with LRN WITHIN_CHANNEL; trained on mean-subtracted pixels.
  NetParameter train_test;
  ReadProtoFromTextFile(Example("cifar10/cifar10_full_train_test.prototxt"), &train_test);
  test::TempDir dir;
  const std::string deploy = dir.file("cifar10_full_deploy.prototxt");
  WriteProtoToTextFile(DeployOf(train_test, {3, 3, 32, 32}), deploy);
  const auto pairs = RunBoth(deploy, 3, -128.f, 128.f, 13);
  ExpectAgreement(pairs, 10);
  ExpectLrnNormalises(pairs, "pool1", "norm1");
  ExpectLrnNormalises(pairs, "pool2", "norm2");
}

TEST(OpenCvInteropTest, CaffeNetAgrees) {
  // Grouped convolutions (conv2, conv4, conv5), LRN across channels, dropout, three InnerProducts.
  const auto pairs = RunBoth(Example("imagenet/caffenet_deploy.prototxt"), 2, -128.f, 128.f, 14);
  ExpectAgreement(pairs, 14);
  ExpectLrnNormalises(pairs, "pool1", "norm1");
  ExpectLrnNormalises(pairs, "pool2", "norm2");
}

TEST(OpenCvInteropTest, GoogLeNetAgrees) {
  // Inception concats, MAX pools with pad 1 and stride 1, stride-2 pools that round up (112 -> 56), AVE 7x7.
  const auto pairs = RunBoth(Example("imagenet/googlenet_deploy.prototxt"), 2, -128.f, 128.f, 15);
  ExpectAgreement(pairs, 84);
  ExpectLrnNormalises(pairs, "pool1/3x3_s2", "pool1/norm1");
  ExpectLrnNormalises(pairs, "conv2/3x3", "conv2/norm2");
}

// A ResNet in small: BatchNorm (statistics in TEST use) + Scale + ReLU after each convolution, an identity block
// and a downsampling block whose shortcut is a strided 1x1 projection, Eltwise SUM, global average pooling.
const char kResNetShaped[] = R"(
name: "ResNetShaped"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 3 dim: 3 dim: 24 dim: 24 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false } }
layer { name: "conv1_bn" type: "BatchNorm" bottom: "conv1" top: "conv1" }
layer { name: "conv1_scale" type: "Scale" bottom: "conv1" top: "conv1" scale_param { bias_term: true } }
layer { name: "conv1_relu" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "res1_a" type: "Convolution" bottom: "conv1" top: "res1_a"
        convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false } }
layer { name: "res1_a_bn" type: "BatchNorm" bottom: "res1_a" top: "res1_a" }
layer { name: "res1_a_scale" type: "Scale" bottom: "res1_a" top: "res1_a" scale_param { bias_term: true } }
layer { name: "res1_a_relu" type: "ReLU" bottom: "res1_a" top: "res1_a" }
layer { name: "res1_b" type: "Convolution" bottom: "res1_a" top: "res1_b"
        convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false } }
layer { name: "res1_b_bn" type: "BatchNorm" bottom: "res1_b" top: "res1_b" }
layer { name: "res1_b_scale" type: "Scale" bottom: "res1_b" top: "res1_b" scale_param { bias_term: true } }
layer { name: "res1_sum" type: "Eltwise" bottom: "res1_b" bottom: "conv1" top: "res1" eltwise_param { operation: SUM } }
layer { name: "res1_relu" type: "ReLU" bottom: "res1" top: "res1" }
layer { name: "res2_a" type: "Convolution" bottom: "res1" top: "res2_a"
        convolution_param { num_output: 32 kernel_size: 3 stride: 2 pad: 1 bias_term: false } }
layer { name: "res2_a_bn" type: "BatchNorm" bottom: "res2_a" top: "res2_a" }
layer { name: "res2_a_scale" type: "Scale" bottom: "res2_a" top: "res2_a" scale_param { bias_term: true } }
layer { name: "res2_a_relu" type: "ReLU" bottom: "res2_a" top: "res2_a" }
layer { name: "res2_b" type: "Convolution" bottom: "res2_a" top: "res2_b"
        convolution_param { num_output: 32 kernel_size: 3 pad: 1 bias_term: false } }
layer { name: "res2_b_bn" type: "BatchNorm" bottom: "res2_b" top: "res2_b" }
layer { name: "res2_b_scale" type: "Scale" bottom: "res2_b" top: "res2_b" scale_param { bias_term: true } }
layer { name: "res2_proj" type: "Convolution" bottom: "res1" top: "res2_proj"
        convolution_param { num_output: 32 kernel_size: 1 stride: 2 bias_term: false } }
layer { name: "res2_proj_bn" type: "BatchNorm" bottom: "res2_proj" top: "res2_proj" }
layer { name: "res2_proj_scale" type: "Scale" bottom: "res2_proj" top: "res2_proj" scale_param { bias_term: true } }
layer { name: "res2_sum" type: "Eltwise" bottom: "res2_b" bottom: "res2_proj" top: "res2" eltwise_param { operation: SUM } }
layer { name: "res2_relu" type: "ReLU" bottom: "res2" top: "res2" }
layer { name: "pool" type: "Pooling" bottom: "res2" top: "pool" pooling_param { pool: AVE global_pooling: true } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc" inner_product_param { num_output: 10 } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
)";

TEST(OpenCvInteropTest, ResNetShapedNetAgrees) {
  test::TempDir dir;
  // conv1 res1_a res1_b res1 res2_a res2_b res2_proj res2 pool fc prob
  ExpectAgreement(RunBoth(WriteNet(dir, "resnet.prototxt", kResNetShaped), 3, -1.f, 1.f, 16), 11);
}

// crema fold writes the ResNet-shaped net with its BatchNorm and Scale layers folded into the convolutions (which get
// biases) and its ReLUs after them, as plain Caffe layers: OpenCV reads those files and computes what crema computes
// with the net as written.
TEST(OpenCvInteropTest, ANetFoldedByCremaFoldGivesTheSameOutputsUnderOpenCv) {
  test::TempDir dir;
  const std::string model = WriteNet(dir, "resnet.prototxt", kResNetShaped);
  NetParameter param;
  ReadProtoFromTextFile(model, &param);
  param.set_fold(false);
  Net net(param, std::make_shared<Context>(Device::kCPU, 0, 17));
  RandomStream random(17);
  FillParameters(&net, 1.f, &random);
  Blob& input = *net.input_blobs()[0];
  Fill(Filler("uniform", -1.f, 1.f), &input, &random);
  net.Forward();
  SpreadScores(param, &net);
  net.Forward();
  const std::vector<float> expected = PlainValues(*net.blob_by_name("prob"));
  NetParameter trained;
  net.ToProto(&trained);
  const std::string weights = dir.file("resnet.caffemodel");
  WriteProtoToBinaryFile(trained, weights);

  const std::string folded_model = dir.file("folded.prototxt"), folded_weights = dir.file("folded.caffemodel");
  std::string output;
  ASSERT_EQ(test::RunCommand(test::ToolsDir() + "/crema fold --model=" + model + " --weights=" + weights +
                                 " --output_model=" + folded_model + " --output_weights=" + folded_weights,
                             &output),
            0)
      << output;
  // Plain layers: no BatchNorm or Scale is left, each convolution has a bias, and the ReLUs are there, in place.
  NetParameter folded;
  ReadProtoFromTextFile(folded_model, &folded);
  int convolutions = 0, relus = 0;
  for (const auto& layer : folded.layer()) {
    EXPECT_NE(layer.type(), "BatchNorm") << layer.name();
    EXPECT_NE(layer.type(), "Scale") << layer.name();
    EXPECT_EQ(layer.blobs_size(), 0) << layer.name();
    if (layer.type() == "Convolution") {
      EXPECT_TRUE(layer.convolution_param().bias_term()) << layer.name();
      ++convolutions;
    }
    if (layer.type() == "ReLU") {
      EXPECT_EQ(layer.bottom(0), layer.top(0)) << layer.name();
      ++relus;
    }
  }
  EXPECT_EQ(convolutions, 6);
  EXPECT_EQ(relus, 5);
  EXPECT_EQ(folded.layer_size(), 6 + 5 + 6);  // + data, two Eltwise, pool, fc, prob

  cv::dnn::Net opencv = cv::dnn::readNetFromCaffe(folded_model, folded_weights);
  ASSERT_FALSE(opencv.empty());
  opencv.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  opencv.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
  const std::vector<int> shape = input.shape();
  std::vector<float> values = PlainValues(input);
  opencv.setInput(cv::Mat(static_cast<int>(shape.size()), shape.data(), CV_32F, values.data()));
  const cv::Mat prob = opencv.forward("prob");
  ASSERT_EQ(prob.total(), expected.size());
  const std::vector<float> actual(prob.ptr<float>(), prob.ptr<float>() + prob.total());
  const auto [largest, worst] = LargestAndWorst(expected, actual);
  EXPECT_GT(largest, 0.0);
  EXPECT_LE(worst, kRelativeTolerance * largest) << "largest " << largest;
  // The probabilities mean something: neither saturated nor uniform.
  EXPECT_LT(*std::max_element(expected.begin(), expected.end()), 0.99f);
  EXPECT_GT(*std::max_element(expected.begin(), expected.end()), 0.2f);
}

// Pooling windows at the edges, where Caffe's rules are particular: with ceil rounding the last window may
// overhang the padded input; AVE then divides by the part of the window inside the input plus its padding (not by
// the whole kernel, nor by the inside part alone); a last window starting in the padding is dropped. And LRN in
// both regions with a non-default size, alpha and beta (and a k, which WITHIN_CHANNEL ignores, as in Caffe; for
// ACROSS_CHANNELS see LrnAcrossChannelsKeepsCaffesK).
const char kPoolingAndLrn[] = R"(
name: "PoolingAndLrn"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 4 dim: 17 dim: 17 } } }
layer { name: "conv_odd" type: "Convolution" bottom: "data" top: "conv_odd"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }
layer { name: "conv_even" type: "Convolution" bottom: "data" top: "conv_even"
        convolution_param { num_output: 8 kernel_size: 2 } }
# 17 -> 9: the last window covers rows 15 and 16 and one row of padding.
layer { name: "ave_odd" type: "Pooling" bottom: "conv_odd" top: "ave_odd"
        pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "max_odd" type: "Pooling" bottom: "conv_odd" top: "max_odd"
        pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 } }
# 16 -> 9: the last window covers row 15, one row of padding, and one row beyond it.
layer { name: "ave_even" type: "Pooling" bottom: "conv_even" top: "ave_even"
        pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "max_even" type: "Pooling" bottom: "conv_even" top: "max_even"
        pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 } }
# 16 + 2 * 2 -> ceil(17 / 2) + 1 = 10 windows, but the 10th would start in the padding: 9.
layer { name: "ave_dropped" type: "Pooling" bottom: "conv_even" top: "ave_dropped"
        pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 2 } }
layer { name: "max_dropped" type: "Pooling" bottom: "conv_even" top: "max_dropped"
        pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 2 } }
layer { name: "across" type: "LRN" bottom: "ave_odd" top: "across"
        lrn_param { local_size: 3 alpha: 0.5 beta: 0.6 norm_region: ACROSS_CHANNELS } }
layer { name: "within" type: "LRN" bottom: "max_even" top: "within"
        lrn_param { local_size: 3 alpha: 0.5 beta: 0.6 k: 2 norm_region: WITHIN_CHANNEL } }
)";

// Caffe's pooling of a (N, C, H, W) blob with a square window, in double, written from its documented rules: the
// output size rounds up, less a last window that would start in the padding (pad > 0 only); a window spans
// [start, start + kernel) clipped to the padded input [-pad, size + pad), AVE divides by that span's area, and then
// only the part inside the input is summed (or searched, for MAX).
std::vector<float> CaffePool(const std::vector<float>& x, const std::vector<int>& shape, int kernel, int stride,
                             int pad, bool average, std::vector<int>* pooled_shape) {
  const int height = shape[2], width = shape[3];
  auto pooled = [&](int size) {
    int out = (size + 2 * pad - kernel + stride - 1) / stride + 1;
    if (pad > 0 && (out - 1) * stride >= size + pad) --out;
    return out;
  };
  const int out_h = pooled(height), out_w = pooled(width);
  *pooled_shape = {shape[0], shape[1], out_h, out_w};
  std::vector<float> y;
  for (int plane = 0; plane < shape[0] * shape[1]; ++plane) {
    const float* in = x.data() + static_cast<size_t>(plane) * height * width;
    for (int ph = 0; ph < out_h; ++ph)
      for (int pw = 0; pw < out_w; ++pw) {
        int h0 = ph * stride - pad, w0 = pw * stride - pad;
        int h1 = std::min(h0 + kernel, height + pad), w1 = std::min(w0 + kernel, width + pad);
        const double area = static_cast<double>(h1 - h0) * (w1 - w0);
        h0 = std::max(h0, 0);
        w0 = std::max(w0, 0);
        h1 = std::min(h1, height);
        w1 = std::min(w1, width);
        double sum = 0, most = -INFINITY;
        for (int h = h0; h < h1; ++h)
          for (int w = w0; w < w1; ++w) {
            sum += in[h * width + w];
            most = std::max(most, static_cast<double>(in[h * width + w]));
          }
        y.push_back(static_cast<float>(average ? sum / area : most));
      }
  }
  return y;
}

TEST(OpenCvInteropTest, PoolingEdgesAndLrnParametersAgree) {
  test::TempDir dir;
  const auto pairs = RunBoth(WriteNet(dir, "pooling.prototxt", kPoolingAndLrn), 2, -2.f, 2.f, 17);
  ExpectAgreement(pairs, 10);
  // Both agree, and both are Caffe's.
  struct Pool {
    const char* input;
    const char* output;
    int pad;
    bool average;
  };
  for (const Pool& pool : {Pool{"conv_odd", "ave_odd", 1, true}, Pool{"conv_odd", "max_odd", 1, false},
                           Pool{"conv_even", "ave_even", 1, true}, Pool{"conv_even", "max_even", 1, false},
                           Pool{"conv_even", "ave_dropped", 2, true}, Pool{"conv_even", "max_dropped", 2, false}}) {
    const BlobPair& input = Find(pairs, pool.input);
    const BlobPair& output = Find(pairs, pool.output);
    std::vector<int> shape;
    const std::vector<float> caffe = CaffePool(input.ours, input.shape, 3, 2, pool.pad, pool.average, &shape);
    ASSERT_EQ(output.shape, shape) << pool.output;
    const auto [largest, worst] = LargestAndWorst(caffe, output.ours);
    EXPECT_LE(worst, 1e-6 * largest) << pool.output << " is not Caffe's pooling";
  }
}

// LRN across channels with k = 2: y = x * (k + alpha / local_size * sum of the squares of local_size channels)^-beta.
const char kLrnWithK[] = R"(
name: "LrnWithK"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 6 dim: 5 dim: 5 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 6 kernel_size: 1 } }
layer { name: "norm" type: "LRN" bottom: "conv" top: "norm" lrn_param { local_size: 3 alpha: 0.5 beta: 0.6 k: 2 } }
)";

// Caffe's ACROSS_CHANNELS formula in double, with the given k, on a (N, C, H, W) blob.
std::vector<float> LrnAcrossChannels(const std::vector<float>& x, const std::vector<int>& shape, double k) {
  const int channels = shape[1], positions = shape[2] * shape[3];
  const double alpha = 0.5, beta = 0.6;
  const int size = 3;
  std::vector<float> y(x.size());
  for (int n = 0; n < shape[0]; ++n)
    for (int c = 0; c < channels; ++c)
      for (int s = 0; s < positions; ++s) {
        double squares = 0;
        for (int d = std::max(0, c - size / 2); d <= std::min(channels - 1, c + size / 2); ++d) {
          const double v = x[(static_cast<size_t>(n) * channels + d) * positions + s];
          squares += v * v;
        }
        const size_t i = (static_cast<size_t>(n) * channels + c) * positions + s;
        y[i] = static_cast<float>(x[i] * std::pow(k + alpha / size * squares, -beta));
      }
  return y;
}

// crema follows Caffe's formula with the prototxt's k. OpenCV 4.6's Caffe importer reads the LRN constant from a
// parameter named "bias" and never from Caffe's lrn_param.k, so it normalises as if k were 1: its output is
// compared with the formula for k = 1 (and with k = 2, should a later OpenCV read k).
TEST(OpenCvInteropTest, LrnAcrossChannelsKeepsCaffesK) {
  test::TempDir dir;
  const std::vector<BlobPair> pairs = RunBoth(WriteNet(dir, "lrn.prototxt", kLrnWithK), 2, -2.f, 2.f, 19);
  ASSERT_EQ(pairs.size(), 2u);
  ASSERT_EQ(pairs[1].blob, "norm");
  const std::vector<float> caffe = LrnAcrossChannels(pairs[0].ours, pairs[0].shape, 2.0);
  const std::vector<float> k_ignored = LrnAcrossChannels(pairs[0].ours, pairs[0].shape, 1.0);
  const auto [largest, ours] = LargestAndWorst(caffe, pairs[1].ours);
  EXPECT_LE(ours, 1e-6 * largest) << "crema's LRN is not Caffe's with k = 2";
  // The two formulas differ visibly, so only one of them can match OpenCV.
  EXPECT_GT(LargestAndWorst(caffe, k_ignored).second, 0.1 * largest);
  const double theirs_caffe = LargestAndWorst(caffe, pairs[1].theirs).second;
  const double theirs_k_ignored = LargestAndWorst(k_ignored, pairs[1].theirs).second;
  EXPECT_TRUE(theirs_caffe <= kRelativeTolerance * largest || theirs_k_ignored <= kRelativeTolerance * largest)
      << "OpenCV's LRN is neither Caffe's (differs by " << theirs_caffe << ") nor Caffe's with k = 1 (differs by "
      << theirs_k_ignored << ")";
  if (theirs_caffe > kRelativeTolerance * largest)
    std::cout << "  OpenCV ignores lrn_param.k (computes k = 1), a known difference from Caffe" << std::endl;
}

// Dropout with scale_train: false scales by 1 - dropout_ratio at test time instead of by 1 / (1 - ratio) in
// training.
const char kDropoutScaledAtTest[] = R"(
name: "DropoutScaledAtTest"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 3 dim: 2 dim: 4 dim: 4 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 8 } }
layer { name: "drop" type: "Dropout" bottom: "ip" top: "dropped" dropout_param { dropout_ratio: 0.3 scale_train: false } }
)";

TEST(OpenCvInteropTest, DropoutScaledAtTestTimeAgrees) {
  test::TempDir dir;
  const auto pairs = RunBoth(WriteNet(dir, "dropout.prototxt", kDropoutScaledAtTest), 3, -1.f, 1.f, 20);
  ExpectAgreement(pairs, 2);
  ASSERT_EQ(pairs[1].blob, "dropped");
  std::vector<float> caffe = pairs[0].ours;
  for (float& v : caffe) v *= 0.7f;
  const auto [largest, worst] = LargestAndWorst(caffe, pairs[1].ours);
  EXPECT_LE(worst, 1e-6 * largest) << "crema's Dropout does not scale by 1 - dropout_ratio at test time";
}

// Upsampling as FCN does it: a grouped Deconvolution without bias (one filter per class), Crop back to the input's
// size at an offset; and a dense Deconvolution with bias and pad, cropped with one offset per axis.
const char kDeconvolutionAndCrop[] = R"(
name: "DeconvolutionAndCrop"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 20 dim: 20 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "score" type: "Convolution" bottom: "pool1" top: "score" convolution_param { num_output: 5 kernel_size: 1 } }
layer { name: "upscore" type: "Deconvolution" bottom: "score" top: "upscore"
        convolution_param { num_output: 5 kernel_size: 4 stride: 2 group: 5 bias_term: false } }
layer { name: "crop" type: "Crop" bottom: "upscore" bottom: "data" top: "crop" crop_param { axis: 2 offset: 1 } }
layer { name: "upsample" type: "Deconvolution" bottom: "pool1" top: "upsample"
        convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "crop_each" type: "Crop" bottom: "upscore" bottom: "upsample" top: "crop_each"
        crop_param { axis: 2 offset: 3 offset: 0 } }
)";

TEST(OpenCvInteropTest, DeconvolutionAndCropAgree) {
  test::TempDir dir;
  // conv1 pool1 score upscore crop upsample crop_each
  ExpectAgreement(RunBoth(WriteNet(dir, "deconv.prototxt", kDeconvolutionAndCrop), 2, -1.f, 1.f, 18), 7);
}

// ---- ONNX export (src/onnx/export.hpp) read by OpenCV's ONNX importer ----------------------------------------

TEST(OnnxExportTest, LeNetAgreesUnderOpenCv) {
  ExpectAgreement(RunOnnx(Example("fashion_mnist/lenet_deploy.prototxt"), 4, 0.f, 1.f, 21, {"conv1", "pool2", "ip1"}),
                  4);
}

TEST(OnnxExportTest, Cifar10QuickAgreesUnderOpenCv) {
  // AVE pools without padding whose last windows overhang: end padding not counted.
  ExpectAgreement(RunOnnx(Example("cifar10/cifar10_quick_deploy.prototxt"), 4, 0.f, 1.f, 22, {"pool2", "pool3"}), 3);
}

TEST(OnnxExportTest, CaffeNetAgreesUnderOpenCv) {
  // Grouped convolutions, LRN across channels, dropout (the identity), InnerProducts after a flatten.
  ExpectAgreement(
      RunOnnx(Example("imagenet/caffenet_deploy.prototxt"), 2, -128.f, 128.f, 23, {"norm1", "conv2", "norm2", "fc6"}),
      5);
}

TEST(OnnxExportTest, GoogLeNetAgreesUnderOpenCv) {
  // Inception concats, MAX pools that round up (112 -> 56), AVE 7x7.
  ExpectAgreement(RunOnnx(Example("imagenet/googlenet_deploy.prototxt"), 2, -128.f, 128.f, 24,
                          {"pool1/3x3_s2", "inception_3a/output", "inception_5b/output"}),
                  4);
}

TEST(OnnxExportTest, AlexNetAndTheFullyConvolutionalCaffeNetAgreeUnderOpenCv) {
  // AlexNet's ungrouped convolutions; CaffeNet's InnerProducts as convolutions on a 451x451 input (8x8 scores), its
  // Softmax over channels at every place.
  ExpectAgreement(RunOnnx(Example("imagenet/alexnet_deploy.prototxt"), 1, -128.f, 128.f, 37, {"norm2"}), 2);
  ExpectAgreement(RunOnnx(Example("imagenet/caffenet_full_conv_deploy.prototxt"), 1, -128.f, 128.f, 38, {"fc6-conv"}),
                  2);
}

TEST(OnnxExportTest, ResNet50AndTheRcnnDetectorAgreeUnderOpenCv) {
  // ResNet-50: 53 BatchNorms with their factors and Scales, bottleneck blocks, a 7x7 average; R-CNN's detector:
  // CaffeNet's layers ending in 200 scores without a Softmax.
  ExpectAgreement(RunOnnx(Example("imagenet/resnet50_deploy.prototxt"), 1, -1.f, 1.f, 39, {"res2a", "res5c"}), 3);
  ExpectAgreement(RunOnnx(Example("rcnn/rcnn_ilsvrc13_deploy.prototxt"), 1, -128.f, 128.f, 40, {"fc7"}), 2);
}

TEST(OnnxExportTest, ResNetShapedNetAgreesUnderOpenCv) {
  // BatchNorm with its moving-average factor, Scale with a bias, Eltwise SUM, global average pooling.
  test::TempDir dir;
  ExpectAgreement(RunOnnx(WriteNet(dir, "resnet.prototxt", kResNetShaped), 3, -1.f, 1.f, 25, {"conv1", "res1", "res2"}),
                  4);
}

TEST(OnnxExportTest, PoolingEdgesAgreeUnderOpenCv) {
  // Every pooling edge of kPoolingAndLrn (an AVE window over padding and beyond it: a Pad node and uncounted end
  // padding), and LRN across channels. LRN within a channel has no ONNX operator: an error naming the layer.
  std::string text = kPoolingAndLrn;
  const size_t within = text.find("layer { name: \"within\"");
  ASSERT_NE(within, std::string::npos);
  const std::string without = text.substr(0, within);
  test::TempDir dir;
  // ave_odd, and the outputs: max_odd, ave_even, max_even, ave_dropped, max_dropped, across.
  ExpectAgreement(RunOnnx(WriteNet(dir, "pooling.prototxt", without), 2, -1.f, 1.f, 26, {"ave_odd"}), 7);
  const PreparedNet lrn = Prepare(WriteNet(dir, "lrn.prototxt", text), 2, -1.f, 1.f, 27);
  test::ExpectErrorContaining([&] { ExportOnnx(*lrn.net); }, {"layer 'within' (LRN)", "WITHIN_CHANNEL"});
}

// The element layers and the shape layers, each in the form Caffe gives it (Clip, written as opset 13's Clip with
// its bounds as inputs, is not here: OpenCV 4.6 reads only the older form with attributes).
const char kElementsAndShapes[] = R"(
name: "ElementsAndShapes"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 stride: 1 dilation: 1 } }
layer { name: "prelu" type: "PReLU" bottom: "conv" top: "a" }
layer { name: "power" type: "Power" bottom: "a" top: "b" power_param { power: 2 scale: 0.5 shift: 1.5 } }
layer { name: "elu" type: "ELU" bottom: "conv" top: "c" elu_param { alpha: 0.7 } }
layer { name: "sigmoid" type: "Sigmoid" bottom: "c" top: "d" }
layer { name: "tanh" type: "TanH" bottom: "conv" top: "e" }
layer { name: "abs" type: "AbsVal" bottom: "e" top: "f" }
layer { name: "bnll" type: "BNLL" bottom: "conv" top: "g" }
layer { name: "leaky" type: "ReLU" bottom: "conv" top: "h" relu_param { negative_slope: 0.2 } }
layer { name: "sum" type: "Eltwise" bottom: "b" bottom: "d" bottom: "f" top: "sum"
        eltwise_param { operation: SUM coeff: 0.5 coeff: -1 coeff: 2 } }
layer { name: "prod" type: "Eltwise" bottom: "sum" bottom: "g" bottom: "h" top: "prod" eltwise_param { operation: PROD } }
layer { name: "max" type: "Eltwise" bottom: "prod" bottom: "sum" top: "max" eltwise_param { operation: MAX } }
layer { name: "bias" type: "Bias" bottom: "max" top: "biased" }
layer { name: "scale" type: "Scale" bottom: "biased" top: "scaled" }
layer { name: "deconv" type: "Deconvolution" bottom: "scaled" top: "deconv"
        convolution_param { num_output: 6 kernel_size: 4 stride: 2 pad: 1 group: 2 } }
layer { name: "concat" type: "Concat" bottom: "deconv" bottom: "deconv" top: "concat" concat_param { axis: 1 } }
layer { name: "flatten" type: "Flatten" bottom: "concat" top: "flat" flatten_param { axis: 2 } }
layer { name: "reshape" type: "Reshape" bottom: "flat" top: "reshaped" reshape_param { shape { dim: 0 dim: -1 dim: 8 } } }
layer { name: "softmax" type: "Softmax" bottom: "reshaped" top: "out" softmax_param { axis: 2 } }
)";

TEST(OnnxExportTest, ElementAndShapeLayersAgreeUnderOpenCv) {
  test::TempDir dir;
  ExpectAgreement(RunOnnx(WriteNet(dir, "elements.prototxt", kElementsAndShapes), 2, -1.f, 1.f, 28,
                          {"b", "d", "f", "g", "h", "sum", "prod", "max", "scaled", "deconv", "reshaped"}),
                  12);
}

// The other layers ONNX expresses: Exp and Log with a base, Swish, Crop at offsets. (Slice, Tile, the Reductions,
// Scale with a second bottom, ArgMax and Threshold, whose forms OpenCV 4.6 reads wrongly or not at all (Split's
// sizes, ReduceSum's axes as inputs, Tile, a computed value broadcast, ArgMax, Greater and Cast), are in
// tests/data/onnx/more_layers.prototxt, which benchmarks/onnx_export_check.py runs in ONNX Runtime.)
const char kMoreLayers[] = R"(
name: "MoreLayers"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "exp" type: "Exp" bottom: "conv" top: "e" exp_param { base: 2 scale: 0.5 shift: 0.1 } }
layer { name: "log" type: "Log" bottom: "e" top: "l" log_param { base: 10 scale: 3 shift: 1 } }
layer { name: "swish" type: "Swish" bottom: "l" top: "s" swish_param { beta: 1.5 } }
layer { name: "pool" type: "Pooling" bottom: "s" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "crop" type: "Crop" bottom: "s" bottom: "pool" top: "cropped" crop_param { axis: 2 offset: 3 offset: 1 } }

)";

TEST(OnnxExportTest, MoreLayersAgreeUnderOpenCv) {
  test::TempDir dir;
  // e l s, and the output cropped.
  ExpectAgreement(RunOnnx(WriteNet(dir, "more.prototxt", kMoreLayers), 2, -1.f, 1.f, 41, {"e", "l", "s"}), 4);
}

// The file itself: the operator set, the parameters as initializers, the inputs and outputs with their shapes (the
// batch named with --dynamic_batch), and layers ONNX cannot express refused by name.
TEST(OnnxExportTest, TheModelHasTheNetsInputsOutputsAndParameters) {
  const PreparedNet lenet = Prepare(Example("fashion_mnist/lenet_deploy.prototxt"), 4, 0.f, 1.f, 29);
  OnnxExportOptions options;
  options.dynamic_batch = true;
  std::string bytes;
  ASSERT_TRUE(ExportOnnx(*lenet.net, options).SerializeToString(&bytes));
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(bytes));
  EXPECT_EQ(model.ir_version(), 7);
  ASSERT_EQ(model.opset_import_size(), 1);
  EXPECT_EQ(model.opset_import(0).version(), 13);
  const onnx::GraphProto& graph = model.graph();
  std::vector<std::string> ops;
  for (const auto& node : graph.node()) ops.push_back(node.op_type());
  EXPECT_EQ(ops, (std::vector<std::string>{"Conv", "MaxPool", "Conv", "MaxPool", "Flatten", "Gemm", "Relu", "Gemm",
                                           "Softmax"}));
  EXPECT_EQ(graph.initializer_size(), 8);  // four weights, four biases
  size_t values = 0;
  for (const auto& tensor : graph.initializer()) values += tensor.raw_data().size() / sizeof(float);
  size_t parameters = 0;
  for (const Blob* blob : lenet.net->learnable_params()) parameters += static_cast<size_t>(blob->count());
  EXPECT_EQ(values, parameters);
  ASSERT_EQ(graph.input_size(), 1);
  EXPECT_EQ(graph.input(0).name(), "data");
  const auto& dims = graph.input(0).type().tensor_type().shape().dim();
  ASSERT_EQ(dims.size(), 4);
  EXPECT_EQ(dims[0].dim_param(), "batch");
  EXPECT_EQ(dims[1].dim_value(), 1);
  EXPECT_EQ(dims[3].dim_value(), 28);
  ASSERT_EQ(graph.output_size(), 1);
  EXPECT_EQ(graph.output(0).name(), "prob");
  // A batch of another size runs the same model in OpenCV.
  cv::dnn::Net opencv = cv::dnn::readNetFromONNX(bytes.data(), bytes.size());
  ASSERT_FALSE(opencv.empty());
  const std::vector<int> shape = {7, 1, 28, 28};
  std::vector<float> input(7 * 28 * 28, 0.5f);
  opencv.setInput(cv::Mat(4, shape.data(), CV_32F, input.data()));
  EXPECT_EQ(opencv.forward().size[0], 7);
  // ArgMax of the two largest has no ONNX operator (ONNX's gives the largest's index only): refused by name.
  test::TempDir dir;
  const PreparedNet argmax =
      Prepare(WriteNet(dir, "argmax.prototxt",
                       "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 5 } } }\n"
                       "layer { name: 'best' type: 'ArgMax' bottom: 'data' top: 'best' argmax_param { top_k: 2 } }\n"),
              2, 0.f, 1.f, 30);
  test::ExpectErrorContaining([&] { ExportOnnx(*argmax.net); }, {"layer 'best' (ArgMax)", "top_k 2"});
}

// ---- ONNX import (src/onnx/import.hpp): crema's own exports read back ----------------------------------------

// `deploy_path` prepared as above, exported, imported, built from the imported definition and weights, and run on
// the same input: its outputs against the first net's.
void ExpectRoundTrip(const std::string& deploy_path, int batch, float low, float high, uint64_t seed,
                     const std::vector<std::string>& expected_types = {}) {
  const PreparedNet prepared = Prepare(deploy_path, batch, low, high, seed);
  ASSERT_NE(prepared.net, nullptr);
  const ImportedNet imported = ImportOnnx(ExportOnnx(*prepared.net), "the exported model");
  for (const LayerParameter& layer : imported.definition.layer()) EXPECT_EQ(layer.blobs_size(), 0) << layer.name();
  if (!expected_types.empty()) {
    std::vector<std::string> types;
    for (const LayerParameter& layer : imported.definition.layer()) types.push_back(layer.type());
    EXPECT_EQ(types, expected_types);
  }
  NetParameter param = imported.definition;
  param.mutable_state()->set_phase(TEST);
  Net net(param, std::make_shared<Context>(Device::kCPU, 0, seed));
  net.CopyTrainedLayersFrom(imported.weights);
  ASSERT_EQ(net.input_blobs().size(), 1u);
  Blob& input = *net.input_blobs()[0];
  const Blob& original = *prepared.net->input_blobs()[0];
  ASSERT_EQ(input.shape(), original.shape());
  const std::vector<float> values = PlainValues(original);
  std::copy(values.begin(), values.end(), input.mutable_cpu_data());
  net.Forward();
  for (int id : prepared.net->output_blob_indices()) {
    const std::string& name = prepared.net->blob_names()[id];
    SCOPED_TRACE(name);
    const std::vector<float> expected = prepared.ours.at(name), actual = PlainValues(*net.blob_by_name(name));
    const auto [largest, worst] = LargestAndWorst(expected, actual);
    EXPECT_GT(largest, 0);
    EXPECT_LE(worst, 1e-5 * largest);
  }
}

TEST(OnnxImportTest, LeNetComesBackAsItWent) {
  ExpectRoundTrip(Example("fashion_mnist/lenet_deploy.prototxt"), 4, 0.f, 1.f, 31,
                  {"Input", "Convolution", "Pooling", "Convolution", "Pooling", "Flatten", "InnerProduct", "ReLU",
                   "InnerProduct", "Softmax"});
}

TEST(OnnxImportTest, ExampleAndTestNetsComeBackWithTheirOutputs) {
  ExpectRoundTrip(Example("cifar10/cifar10_quick_deploy.prototxt"), 3, 0.f, 1.f, 32);
  ExpectRoundTrip(Example("imagenet/googlenet_deploy.prototxt"), 1, -128.f, 128.f, 33);
  test::TempDir dir;
  ExpectRoundTrip(WriteNet(dir, "resnet.prototxt", kResNetShaped), 3, -1.f, 1.f, 34);
  // The pooling edges: each AVE with padding is a Pad and an AveragePool in ONNX, one Caffe pooling again.
  std::string pooling = kPoolingAndLrn;
  pooling = pooling.substr(0, pooling.find("layer { name: \"within\""));
  ExpectRoundTrip(WriteNet(dir, "pooling.prototxt", pooling), 2, -1.f, 1.f, 35);
  ExpectRoundTrip(WriteNet(dir, "elements.prototxt", kElementsAndShapes), 2, -1.f, 1.f, 36);
}

TEST(OnnxImportTest, ASplitComesBackAsASlice) {
  // crema's Slice is written as ONNX's Split with its sizes; read back, one Slice layer with the same points.
  test::TempDir dir;
  ExpectRoundTrip(WriteNet(dir, "slice.prototxt", R"(
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 6 kernel_size: 3 } }
    layer { name: "slice" type: "Slice" bottom: "conv" top: "a" top: "b" top: "c" slice_param { axis: 1 slice_point: 2 slice_point: 4 } }
    layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "c" top: "ac" }
  )"),
                  2, -1.f, 1.f, 42, {"Input", "Convolution", "Slice", "Eltwise"});
}

TEST(OnnxImportTest, ExpAndLogWithBasesComeBack) {
  // Exported as Mul, Add, Exp, Log and Mul nodes; read back as Power, Exp and Log layers.
  test::TempDir dir;
  ExpectRoundTrip(WriteNet(dir, "explog.prototxt", R"(
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 5 dim: 5 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 4 kernel_size: 3 } }
    layer { name: "exp" type: "Exp" bottom: "conv" top: "e" exp_param { base: 2 scale: 0.5 shift: 0.1 } }
    layer { name: "log" type: "Log" bottom: "e" top: "l" log_param { base: 10 scale: 3 shift: 1 } }
  )"),
                  2, -1.f, 1.f, 43);
}

// What crema import refuses, one error each: an operator it does not map (naming the node), a file that is not ONNX
// (naming the file), a weight that is not a constant, a pooling whose padding Caffe cannot say.
TEST(OnnxImportTest, WhatCannotBeMappedIsNamed) {
  const auto model = [](const std::string& op, const std::vector<int64_t>& pads, bool include = true) {
    onnx::ModelProto m;
    m.add_opset_import()->set_version(13);
    onnx::GraphProto* g = m.mutable_graph();
    onnx::ValueInfoProto* input = g->add_input();
    input->set_name("x");
    auto* tensor = input->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {1, 2, 5, 5}) tensor->mutable_shape()->add_dim()->set_dim_value(d);
    onnx::NodeProto* node = g->add_node();
    node->set_name("the_node");
    node->set_op_type(op);
    node->add_input("x");
    node->add_output("y");
    if (!pads.empty()) {
      onnx::AttributeProto* kernel = node->add_attribute();
      kernel->set_name("kernel_shape");
      kernel->add_ints(3);
      kernel->add_ints(3);
      onnx::AttributeProto* p = node->add_attribute();
      p->set_name("pads");
      for (int64_t v : pads) p->add_ints(v);
      onnx::AttributeProto* counted = node->add_attribute();
      counted->set_name("count_include_pad");
      counted->set_i(include ? 1 : 0);
    }
    return m;
  };
  test::ExpectErrorContaining([&] { ImportOnnx(model("Gather", {}), "m.onnx"); },
                              {"m.onnx: node 'the_node' (Gather)", "cannot map Gather", "it maps Conv"});
  test::ExpectErrorContaining([&] { ImportOnnx(model("Conv", {}), "m.onnx"); },
                              {"node 'the_node' (Conv)", "has no input 1"});
  // Padding 1 before and 2 after: an output size Caffe's one pad for both sides cannot give. Padding not counted
  // in the average: Caffe counts it.
  test::ExpectErrorContaining(
      [&] {
        ImportOnnx(model("AveragePool", {1, 1, 2, 2}), "m.onnx");
      },
      {"node 'the_node' (AveragePool)", "cannot give"});
  test::ExpectErrorContaining(
      [&] {
        ImportOnnx(model("AveragePool", {1, 1, 1, 1}, false), "m.onnx");
      },
      {"node 'the_node' (AveragePool)", "window 0", "no Caffe form"});
  EXPECT_NO_THROW(ImportOnnx(model("AveragePool", {1, 1, 1, 1}), "m.onnx"));
  test::TempDir dir;
  const std::string garbage = dir.file("garbage.onnx");
  WriteStringToFileAtomically("this is not a model", garbage);
  test::ExpectErrorContaining([&] { ImportOnnxFile(garbage); }, {"garbage.onnx", "is not an ONNX model"});
}

#endif  // CREMA_USE_OPENCV

}  // namespace
}  // namespace crema
