#include "test_util.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/context.hpp"
#include "core/half_products.hpp"
#include "io/lmdb.hpp"
#include "io/proto_io.hpp"
#include "layers/layer_registry.hpp"
#include "tools/lib/mnist.hpp"

namespace crema {
namespace test {

namespace {
std::string FromEnvironment(const char* name, const char* built) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : built;
}
}  // namespace

std::string SourceDir() { return FromEnvironment("CREMA_SOURCE_DIR", CREMA_SOURCE_DIR); }
std::string ToolsDir() { return FromEnvironment("CREMA_TOOLS_DIR", CREMA_TOOLS_DIR); }
std::string FashionMnistDir() { return FromEnvironment("FASHION_MNIST_DIR", kFashionMnistDir); }

bool FashionMnistAvailable() {
  const std::string data = FashionMnistDir();
  for (const char* file : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                           "t10k-labels-idx1-ubyte.gz"})
    if (!FileExists(data + "/" + file)) return false;
  return true;
}

std::unique_ptr<Layer> CreateWithEngine(const LayerParameter& param, const std::vector<std::vector<int>>& shapes,
                                        const std::string& engine) {
  auto context = std::make_shared<Context>();
  context->force_engine(param.type(), engine);
  return LayerRegistry::Global().Create(param, shapes, context);
}

std::unique_ptr<SingleLayer> MakeSingleLayer(const LayerParameter& param, const std::vector<int>& shape,
                                             std::shared_ptr<Context> context, const std::string& engine,
                                             const SingleLayer* like) {
  context->force_engine(param.type(), engine);
  auto s = std::make_unique<SingleLayer>();
  s->bottom.Reshape(shape);
  FillGaussian(&s->bottom, 0.f, 1.f, 23);
  s->layer = LayerRegistry::Global().Create(param, {shape}, context);
  s->layer->SetUp(s->bottoms(), s->tops());
  if (like != nullptr) {
    for (size_t i = 0; i < like->layer->params().size(); ++i) {
      const Blob& from = *like->layer->params()[i];
      std::copy(from.cpu_data(), from.cpu_data() + from.count(), s->layer->params()[i]->mutable_cpu_data());
    }
  }
  return s;
}

void FillGaussian(Blob* blob, float mean, float stddev, uint64_t seed) {
  RandomStream random(seed);
  float* data = blob->mutable_cpu_data();
  for (int i = 0; i < blob->count(); ++i) data[i] = random.Gaussian(mean, stddev);
}

void FillUniform(Blob* blob, float low, float high, uint64_t seed) {
  RandomStream random(seed);
  float* data = blob->mutable_cpu_data();
  for (int i = 0; i < blob->count(); ++i) data[i] = random.Uniform(low, high);
}

std::vector<float> DataOf(const Blob& blob) { return {blob.cpu_data(), blob.cpu_data() + blob.count()}; }
std::vector<float> DiffOf(const Blob& blob) { return {blob.cpu_diff(), blob.cpu_diff() + blob.count()}; }

void TakeAbsolute(Blob* blob) {
  float* data = blob->mutable_cpu_data();
  for (int i = 0; i < blob->count(); ++i) data[i] = std::fabs(data[i]);
}

// A layer computing in `precision` (made by `make_half`, with the parameters of the float32 layer it is given) against
// its float32 twin (made by `make_float`, with the parameters of `like` where given: the same input, drawn from one
// seed):
// - forward: the float32 product of the input and weights rounded to the type, the bias added in float32. Products of
//   two rounded values are exact in float32, so only the sums' order differs (`sums` of the sum of the products'
//   magnitudes), and where the engine's result is itself 16-bit (`rounded_results`, cuDNN's), its rounding (u of the
//   value);
// - gradients: central differences of the float32 layer's objective (a random projection of the top); each gradient
//   is a sum of products of two rounded factors, erring by (2u + u^2) of the sum of the magnitudes (the float32 layer
//   over |x|, |w| and |dy|), plus u of the value where the result is 16-bit; the estimate itself as the float32 checks
//   allow (1e-3 of the larger value, or 1e-3).
void CheckHalfPrecisionLayer(const std::function<std::unique_ptr<SingleLayer>(const SingleLayer* like)>& make_float,
                             const std::function<std::unique_ptr<SingleLayer>(const SingleLayer& like)>& make_half,
                             Precision precision, double sums, bool rounded_results) {
  // float16 keeps 11 significant bits, bfloat16 8: rounding to nearest errs by at most 2^-11 or 2^-8 of the value.
  const double u = precision == Precision::kFloat16 ? 1.0 / 2048 : 1.0 / 256;
  const bool bf16 = precision == Precision::kBfloat16;
  const auto round = [&](Blob* blob) {
    float* data = blob->mutable_cpu_data();
    for (int i = 0; i < blob->count(); ++i) data[i] = FromHalf(bf16, ToHalf(bf16, data[i]));
  };
  auto single = make_float(nullptr);
  auto half = make_half(*single);
  ASSERT_EQ(half->layer->computes_in(), precision);
  ASSERT_EQ(half->layer->requested_precision(), precision);

  half->layer->Forward(half->bottoms(), half->tops());
  const std::vector<float> computed = DataOf(half->top);
  single->layer->Forward(single->bottoms(), single->tops());
  const std::vector<float> unrounded = DataOf(single->top);
  auto reference = make_float(single.get());
  round(&reference->bottom);
  round(reference->layer->params()[0].get());
  reference->layer->Forward(reference->bottoms(), reference->tops());
  const std::vector<float> expected = DataOf(reference->top);
  auto magnitudes = make_float(single.get());
  TakeAbsolute(&magnitudes->bottom);
  TakeAbsolute(magnitudes->layer->params()[0].get());
  if (magnitudes->layer->params().size() > 1) magnitudes->layer->params()[1]->set_data(0.f);
  magnitudes->layer->Forward(magnitudes->bottoms(), magnitudes->tops());
  const std::vector<float> magnitude = DataOf(magnitudes->top);
  ASSERT_EQ(computed.size(), expected.size());
  bool differs_from_float = false;
  for (size_t i = 0; i < computed.size(); ++i) {
    const double result_rounding = rounded_results ? u * std::fabs(expected[i]) : 0.0;
    EXPECT_NEAR(computed[i], expected[i], sums * magnitude[i] + result_rounding + 1e-6) << "output " << i;
    differs_from_float = differs_from_float || computed[i] != unrounded[i];
  }
  EXPECT_TRUE(differs_from_float) << "the layer gave the float32 layer's outputs: it did not compute in "
                                  << PrecisionName(precision);

  // Gradients.
  std::vector<float> projection(half->top.count());
  RandomStream random(1701);
  for (float& w : projection) w = random.Uniform(-1.f, 1.f);
  const auto backward = [&](SingleLayer* s, const std::vector<float>& dy) {
    s->layer->Forward(s->bottoms(), s->tops());
    std::copy(dy.begin(), dy.end(), s->top.mutable_cpu_diff());
    s->bottom.set_diff(7.f);  // overwritten by backward, where parameter gradients add
    for (const auto& param : s->layer->params()) param->set_diff(0.f);
    s->layer->Backward(s->tops(), {true}, s->bottoms());
    std::vector<std::vector<float>> gradients = {DiffOf(s->bottom)};
    for (const auto& param : s->layer->params()) gradients.push_back(DiffOf(*param));
    return gradients;
  };
  const std::vector<std::vector<float>> analytic = backward(half.get(), projection);
  std::vector<float> absolute(projection);
  for (float& w : absolute) w = std::fabs(w);
  const std::vector<std::vector<float>> magnitude_gradients = backward(magnitudes.get(), absolute);
  const auto objective = [&] {
    single->layer->Forward(single->bottoms(), single->tops());
    double sum = 0;
    for (size_t i = 0; i < projection.size(); ++i)
      sum += static_cast<double>(projection[i]) * single->top.cpu_data()[i];
    return sum;
  };
  std::vector<Blob*> checked = {&single->bottom};
  for (const auto& param : single->layer->params()) checked.push_back(param.get());
  const double step = 1e-2, threshold = 1e-3, bound = 2 * u + u * u;
  double largest_error = 0;
  for (size_t b = 0; b < checked.size(); ++b) {
    for (int i = 0; i < checked[b]->count(); ++i) {
      const float original = checked[b]->cpu_data()[i];
      checked[b]->mutable_cpu_data()[i] = original + static_cast<float>(step);
      const double plus = objective();
      checked[b]->mutable_cpu_data()[i] = original - static_cast<float>(step);
      const double minus = objective();
      checked[b]->mutable_cpu_data()[i] = original;
      const double numeric = (plus - minus) / (2 * step);
      const double value = analytic[b][i];
      const double scale = std::max({std::fabs(numeric), std::fabs(value), 1.0});
      const double result_rounding = rounded_results ? u * std::fabs(numeric) : 0.0;
      EXPECT_NEAR(value, numeric, threshold * scale + bound * magnitude_gradients[b][i] + result_rounding)
          << "blob " << b << " (shape " << checked[b]->shape_string() << ") element " << i;
      largest_error = std::max(largest_error, std::fabs(value - numeric));
    }
  }
  // The rounding shows beyond the float32 checks' threshold somewhere: the type did run.
  EXPECT_GT(largest_error, 1e-4) << "the gradients are as exact as float32 ones: " << PrecisionName(precision)
                                 << " did not run";
}

double AbsSum(const std::vector<float>& values) {
  double sum = 0;
  for (float value : values) sum += std::fabs(value);
  return sum;
}

LayerParameter ParseLayer(const std::string& text) {
  LayerParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param)) << "bad test prototxt:\n" << text;
  return param;
}

NetParameter ParseNet(const std::string& text) {
  NetParameter param;
  ReadProtoFromText(text, "test net", &param);
  return param;
}

std::string ErrorMessage(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a crema::Error, but nothing was thrown";
  return "";
}

void ExpectErrorContaining(const std::function<void()>& statement, const std::vector<std::string>& parts) {
  try {
    statement();
    ADD_FAILURE() << "expected a crema::Error";
  } catch (const Error& error) {
    for (const auto& part : parts)
      EXPECT_NE(std::string(error.what()).find(part), std::string::npos)
          << "the error '" << error.what() << "' does not mention '" << part << "'";
  }
}

TempDir::TempDir() {
  char pattern[] = "/tmp/crema_test_XXXXXX";
  const char* made = mkdtemp(pattern);
  if (made == nullptr) throw Error("cannot create a temporary directory under /tmp");
  path_ = made;
}

TempDir::~TempDir() {
  const std::string command = "rm -rf '" + path_ + "'";
  if (std::system(command.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path_.c_str());
}

void WriteRandomDatums(const std::string& db_path, int count, int height, int width, int classes, uint64_t seed) {
  RandomStream random(seed);
  LmdbWriter writer(db_path);
  for (int i = 0; i < count; ++i) {
    Datum datum;
    datum.set_channels(1);
    datum.set_height(height);
    datum.set_width(width);
    std::string pixels(static_cast<size_t>(height) * width, '\0');
    for (auto& pixel : pixels) pixel = static_cast<char>(random.UniformInt(256));
    datum.set_data(pixels);
    datum.set_label(static_cast<int>(random.UniformInt(classes)));
    writer.Put(RecordKey(i), datum.SerializeAsString());
  }
  writer.Commit();
}

int RunCommand(const std::string& command, std::string* output) {
  output->clear();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output->append(buffer.data(), n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

namespace {

// A command line or message as the reliability table shows it: temporary folders and the tools folder left out,
// one line.
std::string ForTable(std::string text) {
  text = std::regex_replace(text, std::regex("/tmp/crema_test_[A-Za-z0-9]+/"), "");
  text = std::regex_replace(text, std::regex(ToolsDir() + "/"), "");
  for (char& c : text)
    if (c == '\n' || c == '\t') c = ' ';
  return text;
}

}  // namespace

std::string ExpectBadInput(const std::string& area, const std::string& what, const std::string& command,
                           const std::vector<std::string>& parts) {
  TempDir streams;
  const std::string out = streams.file("stdout"), err = streams.file("stderr");
  const int status = std::system(("(" + command + ") >" + out + " 2>" + err).c_str());
  const std::string stderr_text = FileBytes(err);
  const std::string context = "command: " + command + "\nstderr:\n" + stderr_text + "stdout:\n" + FileBytes(out);
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "\n" << context;
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1) << context;
  for (const char* crash : {"Check failed", "terminate called", "Aborted", "Segmentation fault"})
    EXPECT_EQ(stderr_text.find(crash), std::string::npos) << crash << "\n" << context;
  // The tool is the first word after any VARIABLE=value settings of its environment.
  size_t word = 0;
  while (command.find('=', word) < command.find(' ', word)) word = command.find(' ', word) + 1;
  std::string tool = command.substr(word, command.find(' ', word) - word);
  tool = tool.substr(tool.rfind('/') + 1);
  const std::string prefix = tool + ": error: ";
  const size_t start = stderr_text.rfind("\n" + prefix) != std::string::npos ? stderr_text.rfind("\n" + prefix) + 1
                       : stderr_text.compare(0, prefix.size(), prefix) == 0  ? 0
                                                                             : std::string::npos;
  EXPECT_NE(start, std::string::npos) << "no line starts with '" << prefix << "'\n" << context;
  if (start == std::string::npos) return "";
  const std::string message = stderr_text.substr(start);
  EXPECT_EQ(message.back(), '\n') << "the message does not end in a newline\n" << context;
  for (const auto& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "missing: " << part << "\n" << context;
  if (const char* table = std::getenv("CREMA_RELIABILITY_TABLE"); table != nullptr && *table != '\0') {
    std::ofstream rows(table, std::ios::app);
    rows << ForTable(area) << '\t' << ForTable(what) << '\t' << ForTable(command) << '\t'
         << ForTable(message.substr(0, message.size() - 1)) << '\n';
  }
  return message;
}

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string SmallNet(const std::string& data_filler, const std::string& header, int conv_outputs) {
  return "name: 'Small'\n" + header +
         "\nlayer { name: 'data' type: 'DummyData' top: 'data' top: 'label' dummy_data_param {\n"
         "  shape { dim: 4 dim: 1 dim: 12 dim: 12 } shape { dim: 4 }\n"
         "  data_filler { " +
         data_filler +
         " } data_filler { type: 'constant' value: 1 } } }\n"
         "layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'\n"
         "  convolution_param { num_output: " +
         std::to_string(conv_outputs) +
         " kernel_size: 5 weight_filler { type: 'xavier' } } }\n"
         "layer { name: 'ip1' type: 'InnerProduct' bottom: 'conv1' top: 'ip1'\n"
         "  inner_product_param { num_output: 10 weight_filler { type: 'xavier' } } }\n"
         "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip1' bottom: 'label' top: 'loss' }\n";
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

Blob* BlobList::Add(const std::vector<int>& shape) {
  owned.push_back(std::make_unique<Blob>(shape));
  pointers.push_back(owned.back().get());
  return pointers.back();
}

double GradientChecker::Objective(Layer* layer, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  layer->Forward(bottom, top);
  double objective = 0;
  for (size_t t = 0; t < top.size(); ++t) {
    const float* data = top[t]->cpu_data();
    for (int i = 0; i < top[t]->count(); ++i) objective += static_cast<double>(weights_[t][i]) * data[i];
  }
  return objective;
}

void GradientChecker::CheckGradient(Layer* layer, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                                    int check_bottom) {
  // The blobs whose gradients are checked: the chosen bottoms, then the parameters.
  std::vector<Blob*> checked;
  std::vector<bool> propagate_down(bottom.size(), check_bottom == -1);
  if (check_bottom >= 0) {
    ASSERT_LT(check_bottom, static_cast<int>(bottom.size()));
    checked.push_back(bottom[check_bottom]);
    propagate_down[check_bottom] = true;
  } else if (check_bottom == -1) {
    checked.insert(checked.end(), bottom.begin(), bottom.end());
  }
  // Parameters the layer is told to give no gradient (BatchNorm's statistics) are not checked.
  for (size_t i = 0; i < layer->params().size(); ++i)
    if (layer->param_propagate_down(static_cast<int>(i))) checked.push_back(layer->params()[i].get());

  // Analytic gradients: one forward, the random projection as top diff, one backward.
  layer->Forward(bottom, top);
  RandomStream random(seed_);
  weights_.assign(top.size(), {});
  for (size_t t = 0; t < top.size(); ++t) {
    weights_[t].resize(top[t]->count());
    for (auto& w : weights_[t]) w = random.Uniform(-1.f, 1.f);
  }
  // Zero first: a top may share its diff with a bottom (Flatten), and the projection must survive.
  for (Blob* blob : checked) blob->set_diff(0.f);
  for (size_t t = 0; t < top.size(); ++t) {
    std::copy(weights_[t].begin(), weights_[t].end(), top[t]->mutable_cpu_diff());
  }
  layer->Backward(top, propagate_down, bottom);
  std::vector<std::vector<float>> analytic;
  for (Blob* blob : checked) analytic.emplace_back(blob->cpu_diff(), blob->cpu_diff() + blob->count());

  for (size_t b = 0; b < checked.size(); ++b) {
    Blob* blob = checked[b];
    for (int i = 0; i < blob->count(); ++i) {
      float* data = blob->mutable_cpu_data();
      const float original = data[i];
      if (kink_range_ > 0 && std::fabs(original - kink_) < kink_range_) continue;
      data[i] = original + stepsize_;
      const double plus = Objective(layer, bottom, top);
      blob->mutable_cpu_data()[i] = original - stepsize_;
      const double minus = Objective(layer, bottom, top);
      blob->mutable_cpu_data()[i] = original;
      const double numeric = (plus - minus) / (2.0 * stepsize_);
      const double computed = analytic[b][i];
      const double scale = std::max({std::fabs(numeric), std::fabs(computed), 1.0});
      EXPECT_NEAR(computed, numeric, threshold_ * scale)
          << "gradient mismatch in checked blob " << b << " (shape " << blob->shape_string() << ") at element " << i
          << " of layer " << layer->name() << " (" << layer->type() << ")";
    }
  }
}

BlobFiller Gaussian(float stddev) {
  return [stddev](Blob* blob) { FillGaussian(blob, 0.f, stddev); };
}

BlobFiller Uniform(float low, float high) {
  return [low, high](Blob* blob) { FillUniform(blob, low, high); };
}

std::unique_ptr<Layer> MakeLayer(const LayerParameter& param, const std::vector<int>& bottom_shape) {
  return LayerRegistry::Global().Create(param, {bottom_shape}, std::make_shared<Context>(Device::kCPU));
}

std::unique_ptr<Layer> MakeLayer(const std::string& text, const std::vector<int>& bottom_shape) {
  return MakeLayer(ParseLayer(text), bottom_shape);
}

namespace {

// "'name' (Type)", for failure messages.
std::string Describe(const Layer& layer) { return "'" + layer.name() + "' (" + layer.type() + ")"; }

}  // namespace

std::vector<float> ExpectForwardMatches(Layer* layer, const std::function<double(double)>& reference,
                                        Tolerance tolerance, const BlobFiller& fill, const std::vector<int>& shape) {
  BlobList bottom, top;
  fill(bottom.Add(shape));
  top.Add({});
  layer->SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), shape) << Describe(*layer);
  if (top.pointers[0]->shape() != shape) return {};
  layer->Forward(bottom.pointers, top.pointers);
  const std::vector<float> x = DataOf(*bottom.pointers[0]), y = DataOf(*top.pointers[0]);
  for (size_t i = 0; i < x.size(); ++i) {
    const double expected = reference(x[i]);
    const double allowed = std::max(
        {tolerance.absolute, tolerance.relative * std::fabs(expected), tolerance.relative_to_input * std::fabs(x[i])});
    if (allowed == 0) {
      EXPECT_EQ(y[i], expected) << Describe(*layer) << " at element " << i << ", x = " << x[i];
    } else {
      EXPECT_NEAR(y[i], expected, allowed) << Describe(*layer) << " at element " << i << ", x = " << x[i];
    }
  }
  return y;
}

std::vector<float> ExpectForwardMatches(const std::string& text, const std::function<double(double)>& reference,
                                        Tolerance tolerance, const BlobFiller& fill, const std::vector<int>& shape) {
  return ExpectForwardMatches(MakeLayer(text, shape).get(), reference, tolerance, fill, shape);
}

void CheckLayerGradient(Layer* layer, const BlobFiller& fill, GradientChecker checker, const std::vector<int>& shape) {
  BlobList bottom, top;
  fill(bottom.Add(shape));
  top.Add({});
  layer->SetUp(bottom.pointers, top.pointers);
  checker.CheckGradient(layer, bottom.pointers, top.pointers);
}

void CheckLayerGradient(const std::string& text, const BlobFiller& fill, GradientChecker checker,
                        const std::vector<int>& shape) {
  CheckLayerGradient(MakeLayer(text, shape).get(), fill, checker, shape);
}

void ExpectInPlaceMatchesOutOfPlace(Layer* separate, Layer* in_place, const BlobFiller& fill,
                                    const std::vector<int>& shape) {
  Blob top_diff(shape);
  FillGaussian(&top_diff, 0.f, 1.f, 99);
  const auto zero_parameter_diffs = [](Layer* layer) {
    for (const auto& blob : layer->params()) blob->set_diff(0.f);
  };

  BlobList bottom, top;
  fill(bottom.Add(shape));
  top.Add({});
  separate->SetUp(bottom.pointers, top.pointers);
  separate->Forward(bottom.pointers, top.pointers);
  std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), top.pointers[0]->mutable_cpu_diff());
  zero_parameter_diffs(separate);
  separate->Backward(top.pointers, {true}, bottom.pointers);

  Blob shared(shape);
  fill(&shared);
  std::vector<Blob*> both{&shared};
  in_place->SetUp(both, both);
  ASSERT_EQ(in_place->params().size(), separate->params().size()) << Describe(*in_place);
  for (size_t i = 0; i < in_place->params().size(); ++i)
    EXPECT_EQ(DataOf(*in_place->params()[i]), DataOf(*separate->params()[i])) << Describe(*in_place) << " param " << i;
  in_place->Forward(both, both);
  EXPECT_EQ(DataOf(shared), DataOf(*top.pointers[0])) << Describe(*in_place) << ": top";
  std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), shared.mutable_cpu_diff());
  zero_parameter_diffs(in_place);
  in_place->Backward(both, {true}, both);
  EXPECT_EQ(DiffOf(shared), DiffOf(*bottom.pointers[0])) << Describe(*in_place) << ": bottom gradient";
  for (size_t i = 0; i < in_place->params().size(); ++i)
    EXPECT_EQ(DiffOf(*in_place->params()[i]), DiffOf(*separate->params()[i])) << Describe(*in_place) << " param " << i;
}

void ExpectInPlaceMatchesOutOfPlace(const std::string& text, const BlobFiller& fill, const std::vector<int>& shape) {
  ExpectInPlaceMatchesOutOfPlace(MakeLayer(text, shape).get(), MakeLayer(text, shape).get(), fill, shape);
}

ElementRun RunOnValues(Layer* layer, const std::vector<float>& x, std::optional<float> dy) {
  BlobList bottom, top;
  Blob* in = bottom.Add({static_cast<int>(x.size())});
  std::copy(x.begin(), x.end(), in->mutable_cpu_data());
  top.Add({});
  layer->SetUp(bottom.pointers, top.pointers);
  layer->Forward(bottom.pointers, top.pointers);
  ElementRun run{DataOf(*top.pointers[0]), {}};
  if (dy) {
    top.pointers[0]->set_diff(*dy);
    layer->Backward(top.pointers, {true}, bottom.pointers);
    run.dx = DiffOf(*in);
  }
  return run;
}

void ExpectSetUpError(const LayerParameter& param, const std::vector<std::string>& parts, bool in_place,
                      const std::vector<int>& shape) {
  BlobList bottom, top;
  bottom.Add(shape);
  top.Add({});
  const std::vector<Blob*>& tops = in_place ? bottom.pointers : top.pointers;
  std::unique_ptr<Layer> layer = MakeLayer(param, shape);
  ExpectErrorContaining([&] { layer->SetUp(bottom.pointers, tops); }, parts);
}

void ExpectSetUpError(const std::string& text, const std::vector<std::string>& parts, bool in_place,
                      const std::vector<int>& shape) {
  ExpectSetUpError(ParseLayer(text), parts, in_place, shape);
}

FashionMnistSlices::FashionMnistSlices(int train_count, int test_count) {
  const std::string data = FashionMnistDir();
  CREMA_CHECK(FashionMnistAvailable()) << "Fashion-MNIST is missing from " << data
                                       << ": install Debian's dataset-fashion-mnist package (scripts/install_deps.sh)";
  ConvertMnistToLmdb(data + "/train-images-idx3-ubyte.gz", data + "/train-labels-idx1-ubyte.gz", train_db(), 0,
                     train_count);
  ConvertMnistToLmdb(data + "/t10k-images-idx3-ubyte.gz", data + "/t10k-labels-idx1-ubyte.gz", test_db(), 0,
                     test_count);
}

std::string FashionMnistSlices::PointAt(const std::string& text) const {
  std::string pointed = std::regex_replace(text, std::regex("data/fashion_mnist/fashion_mnist_train_lmdb"), train_db());
  return std::regex_replace(pointed, std::regex("data/fashion_mnist/fashion_mnist_test_lmdb"), test_db());
}

SolverParameter FashionMnistSlices::ExampleSolver(const std::string& solver_path) const {
  const std::string root = SourceDir();
  SolverParameter solver;
  ReadProtoFromTextFile(root + "/examples/" + solver_path, &solver);
  const std::string net_file = solver.net();
  solver.clear_net();
  ReadProtoFromText(PointAt(ReadFileToString(root + "/" + net_file)), net_file, solver.mutable_net_param());
  solver.set_snapshot(0);
  solver.set_snapshot_after_train(false);
  solver.set_snapshot_prefix(dir_.file("snapshot"));
  solver.set_solver_mode(SolverParameter::CPU);
  return solver;
}

SolverParameter ResumeSolver(const std::string& net_text, const std::string& prefix, int max_iter, int snapshot) {
  SolverParameter param;
  ReadProtoFromText(
      "base_lr: 0.05 lr_policy: 'inv' gamma: 0.01 power: 0.75 momentum: 0.9 weight_decay: 0.0005 "
      "display: 0 random_seed: 5 solver_mode: CPU",
      "solver", &param);
  ReadProtoFromText(net_text, "net", param.mutable_net_param());
  param.set_snapshot(snapshot);
  param.set_snapshot_prefix(prefix);
  param.set_max_iter(max_iter);
  return param;
}

std::string ResumeNet(const std::string& source) {
  return R"(
    name: 'resume'
    layer { name: 'data' type: 'Data' top: 'data' top: 'label' include { phase: TRAIN }
            data_param { source: ')" +
         source + R"(' batch_size: 16 backend: LMDB }
            transform_param { scale: 0.00390625 crop_size: 6 mirror: true } }
    layer { name: 'ip1' type: 'InnerProduct' bottom: 'data' top: 'ip1'
            inner_product_param { num_output: 24 weight_filler { type: 'xavier' } } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'ip1' top: 'ip1' }
    layer { name: 'drop1' type: 'Dropout' bottom: 'ip1' top: 'ip1' dropout_param { dropout_ratio: 0.3 } }
    layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'
            inner_product_param { num_output: 4 weight_filler { type: 'xavier' } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' bottom: 'label' top: 'loss' }
  )";
}

}  // namespace test
}  // namespace crema
