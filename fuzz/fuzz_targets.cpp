#include "fuzz/fuzz_targets.hpp"

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>

#include "core/blob.hpp"
#include "core/common.hpp"
#include "core/context.hpp"
#include "core/formula.hpp"
#include "core/random.hpp"
#include "core/synced_memory.hpp"
#include "io/data_transformer.hpp"
#include "io/hdf5.hpp"
#include "io/image_io.hpp"
#include "io/proto_io.hpp"
#include "layers/layer_registry.hpp"
#include "net/net.hpp"
#include "onnx/export.hpp"
#include "onnx/import.hpp"
#include "solver/lr_policy.hpp"
#include "solver/solver.hpp"

namespace crema {
namespace fuzz {

namespace {

// A folder of the process's own for the files the targets need (the solver's snapshot prefix, the solver state
// under test), removed at exit.
const std::string& ScratchFolder() {
  // Never destroyed: the exit handler that removes the folder runs after static destructors may have.
  static const std::string* folder = [] {
    char pattern[] = "/tmp/crema-fuzz-XXXXXX";
    if (mkdtemp(pattern) == nullptr) throw std::runtime_error("fuzz: cannot create a folder under /tmp");
    auto* made = new std::string(pattern);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(ScratchFolder(), ignored);
    });
    return made;
  }();
  return *folder;
}

// One CPU context for every net: the nets of one process share it, as a solver's nets do.
std::shared_ptr<Context> SharedContext() {
  static const auto context = std::make_shared<Context>(Device::kCPU);
  return context;
}

Outcome Run(const std::function<void()>& body) {
  try {
    body();
    return Outcome::kAccepted;
  } catch (const Error&) {
    return Outcome::kRefused;
  }
}

std::string Bytes(const uint8_t* data, size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

// A plain write (no fsync: the solver-state target writes every input it is given).
void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("fuzz: cannot write '" + path + "'");
}

NetParameter ParseNet(const std::string& text, const std::string& origin) {
  NetParameter param;
  ReadProtoFromText(text, origin, &param);
  return param;
}

// ---- net_prototxt ---------------------------------------------------------------------------------------------

// HDF5Output creates its file (any path the input names) when it is set up: a fuzzer must not write files.
bool WritesFiles(const NetParameter& param) {
  for (const auto& layer : param.layer())
    if (layer.type() == "HDF5Output") return true;
  for (const auto& layer : param.layers())
    if (layer.type() == V1LayerParameter::HDF5_OUTPUT || layer.layer().type() == "hdf5_output") return true;
  return false;
}

// At most how many values of a step's bottoms and parameters one value of its tops is computed from (`bottoms`: all
// the bottoms' values; `params`: all the parameters'). Per element (neuron layers, sums, copies): one from each
// bottom; after per-channel sums, a few (BatchNorm, Scale, Bias, MVN). A convolution's or inner product's: its
// weights for one output channel and its bias. A pooling's: its window. LRN's: its window. Any other layer's (losses,
// softmax, normalizations, recurrences): all of them.
double ReadsPerTopValue(const Layer& layer, size_t bottom_count, double all_bottoms, double params) {
  const LayerParameter& param = layer.layer_param();
  const std::string& type = param.type();
  const double arity = static_cast<double>(std::max<size_t>(bottom_count, 1));
  if (dynamic_cast<const NeuronLayer*>(&layer) != nullptr) return arity + params;
  for (const char* copy : {"Eltwise", "Split", "Concat", "Slice", "Flatten", "Reshape", "Silence", "Crop", "Tile"})
    if (type == copy) return arity;
  // Per element after per-channel sums (a pass or two over the bottom).
  for (const char* channelwise : {"BatchNorm", "Scale", "Bias", "MVN"})
    if (type == channelwise) return arity + 3;
  if (type == "Convolution" || type == "Deconvolution")
    return 1 + params / std::max(1.0, static_cast<double>(param.convolution_param().num_output()));
  if (type == "InnerProduct")
    return 1 + params / std::max(1.0, static_cast<double>(param.inner_product_param().num_output()));
  if (type == "Pooling" && !param.pooling_param().global_pooling()) {
    const PoolingParameter& pool = param.pooling_param();
    const double h = pool.has_kernel_h() ? pool.kernel_h() : pool.kernel_size();
    const double w = pool.has_kernel_w() ? pool.kernel_w() : pool.kernel_size();
    return 1 + std::min(h * w, all_bottoms);
  }
  if (type == "LRN") {
    const double size = param.lrn_param().local_size();
    return 1 + std::min(size * size, all_bottoms);
  }
  return 1 + all_bottoms + params;
}

}  // namespace

double PassWorkBound(const Net& net) {
  double work = 0;
  for (const PlanStep& step : net.plan()) {
    const Layer& layer = *net.layers()[step.layer];
    double tops = 0, all_bottoms = 0, params = 0;
    for (int top : step.tops) tops += static_cast<double>(net.blobs()[top]->count());
    for (int bottom : step.bottoms) all_bottoms += static_cast<double>(net.blobs()[bottom]->count());
    for (const auto& param : layer.params()) params += static_cast<double>(param->count());
    work += tops * ReadsPerTopValue(layer, step.bottoms.size(), all_bottoms, params) + all_bottoms + params;
  }
  return work;
}

namespace {

// The net built; then, where one pass is cheap (PassWorkBound: at most kLargestPassWork, well under a second under
// the sanitizers; libFuzzer reports an input that takes 30 s as a hang), run forward and backward once, as training
// would: every layer's own code, on the shapes and settings the input gives it.
Outcome NetPrototxt(const uint8_t* data, size_t size) {
  const std::string text = Bytes(data, size);
  NetParameter param;
  const Outcome parsed = Run([&] { param = ParseNet(text, "fuzz.prototxt"); });
  if (parsed != Outcome::kAccepted) return parsed;
  if (WritesFiles(param)) return Outcome::kSkipped;
  return Run([&] {
    Net net(param, SharedContext());
    if (PassWorkBound(net) > kLargestPassWork) return;
    net.ForwardBackward();
  });
}

// ---- caffemodel -----------------------------------------------------------------------------------------------

// Every kind of parameter blob a model-zoo file fills in: convolution and deconvolution weights and biases,
// BatchNorm's three statistics, Scale's scale and bias, PReLU's slopes, InnerProduct's weights and biases. TEST
// phase, so that the passes after the weights (BatchNorm folding) run on what was copied.
constexpr char kWeightsNet[] = R"(name: 'FuzzWeights'
layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 2 dim: 6 dim: 6 } } }
layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
  convolution_param { num_output: 3 kernel_size: 3 weight_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'bn1' type: 'BatchNorm' bottom: 'conv1' top: 'conv1' }
layer { name: 'scale1' type: 'Scale' bottom: 'conv1' top: 'conv1' scale_param { bias_term: true } }
layer { name: 'prelu1' type: 'PReLU' bottom: 'conv1' top: 'conv1' }
layer { name: 'deconv1' type: 'Deconvolution' bottom: 'conv1' top: 'deconv1'
  convolution_param { num_output: 2 kernel_size: 2 stride: 2 weight_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'ip1' type: 'InnerProduct' bottom: 'deconv1' top: 'ip1'
  inner_product_param { num_output: 4 weight_filler { type: 'gaussian' std: 0.1 } } }
)";

Net& WeightsNet() {
  static Net net(ParseNet(kWeightsNet, "the caffemodel target's net"), SharedContext());
  return net;
}

Outcome Caffemodel(const uint8_t* data, size_t size) {
  const std::string bytes = Bytes(data, size);
  return Run([&] {
    NetParameter trained;
    ReadProtoFromBinary(bytes, "fuzz.caffemodel", &trained);
    WeightsNet().CopyTrainedLayersFrom(trained);
    WeightsNet().Forward();
  });
}

// ---- datum ----------------------------------------------------------------------------------------------------

struct Transformers {
  std::vector<std::unique_ptr<DataTransformer>> all;
  Transformers() {
    const char* settings[][2] = {
        {"", "TEST"},
        {"crop_size: 3 mirror: true scale: 0.5 mean_value: 1", "TRAIN"},
        {"force_color: true mean_value: 1 mean_value: 2 mean_value: 3", "TEST"},
        {"force_gray: true crop_size: 2", "TRAIN"},
    };
    for (const auto& setting : settings) {
      TransformationParameter param;
      ReadProtoFromText(setting[0], "the datum target's transformation", &param);
      all.push_back(std::make_unique<DataTransformer>(param, std::string(setting[1]) == "TRAIN" ? TRAIN : TEST));
    }
  }
};

Outcome DatumRecord(const uint8_t* data, size_t size) {
  static Transformers transformers;
  static RandomStream random(1701);
  Datum datum;
  const Outcome parsed = Run([&] { ReadProtoFromBinary(Bytes(data, size), "fuzz datum", &datum); });
  if (parsed != Outcome::kAccepted) return parsed;
  // As the Data layer does with each record: decode once, then the shape, then the values.
  Outcome outcome = Outcome::kRefused;
  for (const auto& transformer : transformers.all) {
    if (Run([&] {
          const Datum raw = datum.encoded() ? transformer->Decode(datum) : datum;
          Blob blob(transformer->InferBlobShape(raw));
          transformer->Transform(raw, &blob, &random);
        }) == Outcome::kAccepted)
      outcome = Outcome::kAccepted;
  }
  return outcome;
}

// ---- solverstate ----------------------------------------------------------------------------------------------

// Every kind of state a .solverstate carries: histories (one set for SGD, two for Adam), and the runtime state
// of layers that have one (Dropout's and DummyData's random streams, BatchNorm's).
constexpr char kSolverNet[] = R"(name: 'FuzzSolver'
layer { name: 'data' type: 'DummyData' top: 'data' top: 'label' dummy_data_param {
  shape { dim: 4 dim: 3 } shape { dim: 4 } data_filler { type: 'gaussian' } data_filler { type: 'constant' value: 1 } } }
layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'
  inner_product_param { num_output: 3 weight_filler { type: 'xavier' } } }
layer { name: 'bn' type: 'BatchNorm' bottom: 'ip' top: 'ip' }
layer { name: 'drop' type: 'Dropout' bottom: 'ip' top: 'ip' }
layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
)";

// Expression layers (their formulas: the parser, the symbolic gradients) in a net that builds without data.
constexpr char kExpressionNet[] = R"(name: 'FuzzExpressions'
layer { name: 'data' type: 'Input' top: 'x' top: 'w' input_param { shape { dim: 2 dim: 3 } shape { dim: 1 } } }
layer { name: 'act' type: 'Expression' bottom: 'x' top: 'a'
  expression_param { formula: 'where(x > 0, x, 0.5 * (exp(x) - 1)) * sigmoid(-x ^ 2) + min(abs(x), sqrt(x * x + 1))' } }
layer { name: 'two' type: 'Expression' bottom: 'a' bottom: 'w' top: 'b' top: 'loss' loss_weight: 0 loss_weight: 1
  expression_param { formula: 'tanh(u) / (1 + softplus(v) ^ 2)' formula: 'mean(((u - erf(v)) ^ 2 != pow(u, 2)) <= v)'
                     bottom_name: 'u' bottom_name: 'v' } }
)";

std::vector<std::unique_ptr<Solver>>& Solvers() {
  static std::vector<std::unique_ptr<Solver>> solvers = [] {
    std::vector<std::unique_ptr<Solver>> made;
    for (const char* type : {"SGD", "Adam"}) {
      SolverParameter param;
      *param.mutable_net_param() = ParseNet(kSolverNet, "the solver state target's net");
      param.set_type(type);
      param.set_base_lr(0.01f);
      param.set_lr_policy("fixed");
      param.set_momentum(0.9f);
      param.set_max_iter(100);
      param.set_snapshot_prefix(ScratchFolder() + "/" + type);
      param.set_solver_mode(SolverParameter::CPU);
      made.push_back(CreateSolver(param, "", SharedContext()));
    }
    return made;
  }();
  return solvers;
}

// ---- solver_prototxt ------------------------------------------------------------------------------------------

// The settings that name files: the nets' (read), the weights to start from (read). A fuzzer must not read what an
// input names (/dev/zero never ends), and the net_prototxt target fuzzes net text already.
bool NamesFiles(const SolverParameter& param) {
  return param.has_net() || param.has_train_net() || param.test_net_size() > 0 || param.weights_size() > 0;
}

// A solver prototxt parsed, its solver built over its own net_param (or train_net_param) or else the small net of
// the solver state target, and trained for at most 3 iterations of at most 4 batches (testing at most 2 where it
// tests), its snapshots (at its `snapshot` interval, and after training) written to a folder of the fuzzer's own.
// The learning rate policies, the solvers' rules, gradient clipping and accumulation, loss scaling, testing and
// snapshots run with the settings the input gives them.
Outcome SolverPrototxt(const uint8_t* data, size_t size) {
  SolverParameter param;
  const Outcome parsed = Run([&] { ReadProtoFromText(Bytes(data, size), "fuzz_solver.prototxt", &param); });
  if (parsed != Outcome::kAccepted) return parsed;
  if (NamesFiles(param)) return Outcome::kSkipped;
  if (!param.has_net_param() && !param.has_train_net_param())
    *param.mutable_net_param() = ParseNet(kSolverNet, "the solver target's net");
  param.set_max_iter(std::min(param.max_iter(), 3));
  param.set_iter_size(std::min(param.iter_size(), 4));
  for (int t = 0; t < param.test_iter_size(); ++t) param.set_test_iter(t, std::min(param.test_iter(t), 2));
  param.set_snapshot_prefix(ScratchFolder() + "/fuzz");
  param.set_solver_mode(SolverParameter::CPU);
  return Run([&] {
    std::unique_ptr<Solver> solver = CreateSolver(param, "", SharedContext());
    if (PassWorkBound(*solver->net()) > kLargestPassWork) return;
    for (const auto& test_net : solver->test_nets())
      if (PassWorkBound(*test_net) > kLargestPassWork) return;
    solver->Solve();
  });
}

Outcome SolverStateFile(const uint8_t* data, size_t size) {
  const std::string path = ScratchFolder() + "/input.solverstate";
  WriteFile(path, Bytes(data, size));
  // An HDF5 state goes to the HDF5 library's own parser, which is fuzzed where it is developed, not here.
  if (IsHdf5File(path)) return Outcome::kSkipped;
  Outcome outcome = Outcome::kRefused;
  for (auto& solver : Solvers())
    if (Run([&] { solver->Restore(path); }) == Outcome::kAccepted) outcome = Outcome::kAccepted;
  return outcome;
}

// ---- seeds ----------------------------------------------------------------------------------------------------

// The fuzzer's nets are the example nets made small enough to build many times a second: libFuzzer runs every
// seed before it mutates any, and CaffeNet's 61 million weights took 5 s to fill under the sanitizers, so the six
// big deploy nets alone outlasted CI's 20 s and no input was ever mutated. Each net keeps its layers and wiring:
// every num_output of 16 or more divided by 8, batches of at most 2, and each layer that reads a data set
// (Data, ImageData, WindowData, HDF5Data, whose files a fuzzer does not have) made a DummyData of the same tops,
// images of the crop size in 3 channels, else of 1 x 28 x 28 (its other tops 2 x 1: labels, an LSTM's sequence
// markers), so that the layers after it are built too.
// An autoencoder's last num_output must stay the input's size: where the net built so is refused, its last layer
// with a num_output keeps it, else every layer does (NetSeeds).
void ScaleOutputs(google::protobuf::Message* message) {
  const google::protobuf::Reflection* reflection = message->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(*message, field); ++i)
          ScaleOutputs(reflection->MutableRepeatedMessage(message, field, i));
      } else {
        ScaleOutputs(reflection->MutableMessage(message, field));
      }
    } else if (field->name() == "num_output" &&
               field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT32 && !field->is_repeated()) {
      const uint32_t outputs = reflection->GetUInt32(*message, field);
      if (outputs >= 16) reflection->SetUInt32(message, field, outputs / 8);
    }
  }
}

LayerParameter ScaledCopy(const LayerParameter& layer) {
  LayerParameter copy = layer;
  ScaleOutputs(&copy);
  return copy;
}

void CapBatch(BlobShape* shape) {
  if (shape->dim_size() > 0 && shape->dim(0) > 2) shape->set_dim(0, 2);
}

enum class Outputs { kScaled, kLastKept, kKept };

NetParameter SmallNet(const NetParameter& original, Outputs outputs) {
  NetParameter net = original;
  if (outputs == Outputs::kScaled) ScaleOutputs(&net);
  if (outputs == Outputs::kLastKept) {
    int last = net.layer_size() - 1;
    while (last >= 0 && ScaledCopy(net.layer(last)).SerializeAsString() == net.layer(last).SerializeAsString()) --last;
    for (int l = 0; l < last; ++l) ScaleOutputs(net.mutable_layer(l));
  }
  for (BlobShape& shape : *net.mutable_input_shape()) CapBatch(&shape);
  for (int i = 0; i < net.input_dim_size(); i += 4)
    if (net.input_dim(i) > 2) net.set_input_dim(i, 2);
  for (LayerParameter& layer : *net.mutable_layer()) {
    for (BlobShape& shape : *layer.mutable_input_param()->mutable_shape()) CapBatch(&shape);
    for (BlobShape& shape : *layer.mutable_dummy_data_param()->mutable_shape()) CapBatch(&shape);
    if (layer.memory_data_param().batch_size() > 2) layer.mutable_memory_data_param()->set_batch_size(2);
    const std::string& type = layer.type();
    if (type != "Data" && type != "ImageData" && type != "WindowData" && type != "HDF5Data") continue;
    const int crop = static_cast<int>(layer.transform_param().crop_size());
    LayerParameter dummy;
    dummy.set_name(layer.name());
    dummy.set_type("DummyData");
    *dummy.mutable_top() = layer.top();
    *dummy.mutable_include() = layer.include();
    *dummy.mutable_exclude() = layer.exclude();
    for (int t = 0; t < layer.top_size(); ++t) {
      BlobShape* shape = dummy.mutable_dummy_data_param()->add_shape();
      shape->add_dim(2);
      if (t == 0) {
        for (int dim : {crop > 0 ? 3 : 1, crop > 0 ? crop : 28, crop > 0 ? crop : 28}) shape->add_dim(dim);
      } else {
        shape->add_dim(1);
      }
    }
    layer = dummy;
  }
  return net;
}

// Every .prototxt under examples/ (nets and solvers), in name order.
std::vector<std::filesystem::path> ExamplePrototxts(const std::string& source_dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(source_dir + "/examples"))
    if (entry.is_regular_file() && entry.path().extension() == ".prototxt") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

int NetSeeds(const std::string& source_dir, const std::string& folder) {
  int count = 0;
  for (const auto& path : ExamplePrototxts(source_dir)) {
    const std::string text = ReadFileToString(path.string());
    NetParameter param;
    if (Run([&] { ReadProtoFromText(text, path.string(), &param); }) != Outcome::kAccepted) continue;  // a solver
    // The first of these that builds: outputs scaled, all but the last or none, in the net's phase or in TRAIN (an
    // autoencoder's TEST data layers want a stage); else the first.
    std::vector<NetParameter> candidates;
    for (Outputs outputs : {Outputs::kScaled, Outputs::kLastKept, Outputs::kKept}) {
      candidates.push_back(SmallNet(param, outputs));
      candidates.push_back(candidates.back());
      candidates.back().mutable_state()->set_phase(TRAIN);
    }
    const auto builds = std::find_if(candidates.begin(), candidates.end(), [](const NetParameter& candidate) {
      return Run([&] { Net net(candidate, SharedContext()); }) == Outcome::kAccepted;
    });
    const NetParameter& small = builds != candidates.end() ? *builds : candidates.front();
    std::string seed = text;  // the file itself where it is small already (its comments and layout too)
    if (small.SerializeAsString() != param.SerializeAsString()) {
      google::protobuf::TextFormat::PrintToString(small, &seed);
      seed = "# " + path.parent_path().filename().string() + "/" + path.filename().string() +
             ", made small for the fuzzer (fuzz/fuzz_targets.cpp, SmallNet)\n" + seed;
    }
    WriteFile(folder + "/" + path.parent_path().filename().string() + "_" + path.filename().string(), seed);
    ++count;
  }
  WriteFile(folder + "/fuzz_weights.prototxt", kWeightsNet);
  WriteFile(folder + "/fuzz_solver.prototxt", kSolverNet);
  WriteFile(folder + "/fuzz_expressions.prototxt", kExpressionNet);
  return count + 3;
}

void CollectNames(const google::protobuf::Descriptor* message, std::set<const google::protobuf::Descriptor*>* seen,
                  std::set<std::string>* names) {
  if (!seen->insert(message).second) return;
  for (int f = 0; f < message->field_count(); ++f) {
    const google::protobuf::FieldDescriptor* field = message->field(f);
    names->insert(field->name());
    if (field->enum_type() != nullptr)
      for (int v = 0; v < field->enum_type()->value_count(); ++v) names->insert(field->enum_type()->value(v)->name());
    if (field->message_type() != nullptr) CollectNames(field->message_type(), seen, names);
  }
}

// The prototxt targets' dictionary: the field and enum value names of `message` and what it holds, the layer types
// and the solvers' learning rate policies and types, and the formulas' words.
void WriteDictionary(const google::protobuf::Descriptor* message, const std::string& path) {
  std::set<const google::protobuf::Descriptor*> seen;
  std::set<std::string> names;
  CollectNames(message, &seen, &names);
  for (const std::string& type : LayerRegistry::Global().Types()) names.insert(type);
  if (message == SolverParameter::descriptor()) {
    for (const std::string& policy : KnownLearningRatePolicies()) names.insert(policy);
    for (const std::string& type : KnownSolverTypes()) names.insert(type);
  }
  std::string text = "# The schema's field and enum value names and the layer types (fuzz/fuzz_targets.cpp).\n";
  for (const std::string& name : names) text += "\"" + name + "\"\n";
  for (const char* token : {"{", "}", ":", "\\\"", "'", "#", "nan", "inf", "-1", "2147483647", "4294967296"})
    text += "\"" + std::string(token) + "\"\n";
  // The Expression layer's formulas: their functions and operators.
  for (const std::string& function : FormulaFunctions()) text += "\"" + function + "(\"\n";
  for (const char* token : {"(", ")", ",", "+", "-", "*", "/", "^", "<", "<=", ">", ">=", "==", "!=", "`"})
    text += "\"" + std::string(token) + "\"\n";
  WriteFile(path, text);
}

// The solvers of examples/ without the files they name (their nets: the target trains the small net), and one of
// every learning rate policy, with an inline net, gradient clipping, accumulation, loss scaling and snapshots.
int SolverSeeds(const std::string& source_dir, const std::string& folder) {
  int count = 0;
  for (const auto& path : ExamplePrototxts(source_dir)) {
    SolverParameter param;
    const std::string text = ReadFileToString(path.string());
    if (Run([&] { ReadProtoFromText(text, path.string(), &param); }) != Outcome::kAccepted) continue;  // a net
    param.clear_net();
    param.clear_train_net();
    param.clear_test_net();
    param.clear_weights();
    std::string seed;
    google::protobuf::TextFormat::PrintToString(param, &seed);
    WriteFile(folder + "/" + path.parent_path().filename().string() + "_" + path.filename().string(),
              "# " + path.parent_path().filename().string() + "/" + path.filename().string() +
                  " without the files it names (fuzz/fuzz_targets.cpp, SolverSeeds)\n" + seed);
    ++count;
  }
  const std::vector<std::string> policies = KnownLearningRatePolicies(), types = KnownSolverTypes();
  for (size_t p = 0; p < policies.size(); ++p) {
    const std::string& type = types[p % types.size()];
    std::string text = "type: '" + type + "' lr_policy: '" + policies[p] + "'\n" +
                       "base_lr: 0.05 gamma: 0.5 power: 0.75 stepsize: 2 stepvalue: 1 stepvalue: 2\n"
                       "weight_decay: 0.001 max_iter: 3 display: 1 average_loss: 2\n"
                       "test_iter: 1 test_interval: 2 snapshot: 2 iter_size: " +
                       std::to_string(1 + p % 2) + "\n";
    if (type != "AdaGrad" && type != "RMSProp") text += "momentum: 0.9\n";  // their rules have none
    if (p % 2 == 1) text += "clip_gradients: 0.1 regularization_type: 'L1'\n";
    if (p == 3) text += "snapshot_format: HDF5\n";
    if (p == 5) text += "loss_scaling: DYNAMIC\n";
    if (p == 6) text += "net_param { " + std::string(kSolverNet) + "}\n";
    WriteFile(folder + "/policy_" + policies[p] + ".prototxt", text);
    ++count;
  }
  return count;
}

int CaffemodelSeeds(const std::string& folder) {
  NetParameter weights;
  WeightsNet().ToProto(&weights);
  WriteFile(folder + "/fuzz_weights.caffemodel", weights.SerializeAsString());
  // The same weights in a V1 file (NetParameter.layers), for the layers V1 had.
  NetParameter v1;
  v1.set_name(weights.name());
  for (const auto& layer : weights.layer()) {
    V1LayerParameter::LayerType type;
    if (layer.type() == "Convolution") {
      type = V1LayerParameter::CONVOLUTION;
    } else if (layer.type() == "Deconvolution") {
      type = V1LayerParameter::DECONVOLUTION;
    } else if (layer.type() == "InnerProduct") {
      type = V1LayerParameter::INNER_PRODUCT;
    } else {
      continue;
    }
    V1LayerParameter* old = v1.add_layers();
    old->set_name(layer.name());
    old->set_type(type);
    *old->mutable_blobs() = layer.blobs();
  }
  WriteFile(folder + "/fuzz_weights_v1.caffemodel", v1.SerializeAsString());
  return 2;
}

int DatumSeeds(const std::string& folder) {
  int count = 0;
  Datum raw;
  raw.set_channels(3);
  raw.set_height(4);
  raw.set_width(5);
  raw.set_label(3);
  std::string pixels(3 * 4 * 5, '\0');
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<char>(i * 7);
  raw.set_data(pixels);
  WriteFile(folder + "/raw.datum", raw.SerializeAsString());
  Datum floats;
  floats.set_channels(1);
  floats.set_height(3);
  floats.set_width(3);
  floats.set_label(1);
  for (int i = 0; i < 9; ++i) floats.add_float_data(0.25f * i);
  WriteFile(folder + "/float.datum", floats.SerializeAsString());
  count += 2;
  if (ImageCodecsAvailable()) {
    for (const auto& [extension, channels] : {std::make_pair(".png", 3), std::make_pair(".jpg", 1)}) {
      std::vector<unsigned char> image(6 * 5 * channels);
      for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<unsigned char>(i * 11);
      Datum encoded;
      encoded.set_encoded(true);
      encoded.set_label(2);
      encoded.set_data(EncodeImage(extension, image.data(), 6, 5, channels));
      WriteFile(folder + "/encoded" + std::string(extension) + ".datum", encoded.SerializeAsString());
      ++count;
    }
  }
  return count;
}

int SolverStateSeeds(const std::string& folder) {
  int count = 0;
  for (auto& solver : Solvers()) {
    solver->Step(1);
    SolverState state;
    ReadProtoFromBinaryFile(solver->Snapshot(), &state);
    // Without learned_net: a seed whose weights file is gone would be refused before its histories are read.
    state.clear_learned_net();
    WriteFile(folder + "/" + solver->type() + ".solverstate", state.SerializeAsString());
    ++count;
  }
  return count;
}

// ---- formula ---------------------------------------------------------------------------------------------------

// The formula text over inputs a, b, c (arrays) and w (one value): parsed, differentiated with respect to every
// input, and the value and the gradients computed on a few elements, as an Expression layer does.
Outcome Formula(const uint8_t* data, size_t size) {
  const std::string text = Bytes(data, size);
  return Run([&] {
    // a, b and c over the axes n and i (an n of 1), w over none: one value.
    FormulaGraph graph({"a", "b", "c", "w"}, {"n", "i"}, {3, 3, 3, 0});
    const int node = graph.Parse(text);
    const int seed = graph.AddInput("dy", graph.nodes()[node].axes);
    const std::vector<int> gradients = graph.Differentiate(node, seed);
    constexpr int kCount = 37;
    std::vector<float> a(kCount), b(kCount), c(kCount), dy(kCount, 0.5f), out(kCount);
    for (int i = 0; i < kCount; ++i) {
      a[i] = 0.25f * (i - 18);
      b[i] = 0.1f * i + 0.05f;
      c[i] = (i % 3) - 1.f;
    }
    const float w = 0.75f;
    const std::vector<int64_t> dims = {1, kCount};
    const std::vector<const float*> inputs = {a.data(), b.data(), c.data(), &w, dy.data()};
    FormulaProgram(graph, {{node, graph.nodes()[node].axes}}).Run(dims, inputs, {out.data()});
    std::vector<FormulaProgram::Output> backward;
    std::vector<std::vector<float>> gradient_values;
    std::vector<float*> targets;
    for (size_t i = 0; i < 4; ++i) {
      if (gradients[i] < 0) continue;
      backward.push_back({gradients[i], i == 3 ? AxisMask{0} : AxisMask{3}});  // w's gradient: summed to one value
      gradient_values.emplace_back(kCount);
    }
    for (auto& values : gradient_values) targets.push_back(values.data());
    if (!backward.empty()) FormulaProgram(graph, backward).Run(dims, inputs, targets);
  });
}

int FormulaSeeds(const std::string& folder) {
  const char* formulas[] = {
      "a * sigmoid(a)",
      "where(a > 0, a, w * (exp(a) - 1))",
      "mean((a - b) ^ 2 * w)",
      "exp(a - max[i](a)) / sum[i](exp(a - max[i](a)))",
      "a - mean[i](a) + min(b) * sum[n, i](c)",
      "sum(log(b) + sqrt(b) * abs(c))",
      "-a ^ 2 + 2 ^ 3 ^ 2 / 256 - - + b",
      "tanh(a) / (1 + softplus(b) ^ 2) + erf(c / 2)",
      "min(a, b) * max(a, -b) + pow(b, 1.5)",
      "(a < b) + (a <= b) * 2 + (a >= b) * 4 + (a == c) * 8 + (a != b) * 16",
      "relu(`a`) * w + c",
  };
  int count = 0;
  for (const char* formula : formulas) WriteFile(folder + "/formula" + std::to_string(count++) + ".txt", formula);
  return count;
}

// ---- onnx -----------------------------------------------------------------------------------------------------

// An ONNX file: parsed, imported onto layers, and the imported net built with its weights, as crema import does.
Outcome OnnxModel(const uint8_t* data, size_t size) {
  const std::string bytes = Bytes(data, size);
  return Run([&] {
    onnx::ModelProto model;
    if (!model.ParseFromString(bytes)) throw Error("not an ONNX model");
    const ImportedNet imported = ImportOnnx(model, "fuzz.onnx");
    NetParameter param = imported.definition;
    param.mutable_state()->set_phase(TEST);
    Net net(param, SharedContext());
    net.CopyTrainedLayersFrom(imported.weights);
    if (PassWorkBound(net) <= kLargestPassWork) net.Forward();
  });
}

// The models crema export writes for the caffemodel target's net and for one with pools, concats and sums.
int OnnxSeeds(const std::string& folder) {
  const char* nets[] = {kWeightsNet, R"(name: 'FuzzOnnx'
layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 2 dim: 7 dim: 7 } } }
layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'relu' type: 'ReLU' bottom: 'conv' top: 'conv' }
layer { name: 'ave' type: 'Pooling' bottom: 'conv' top: 'ave' pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }
layer { name: 'max' type: 'Pooling' bottom: 'conv' top: 'max' pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 } }
layer { name: 'cat' type: 'Concat' bottom: 'ave' bottom: 'max' top: 'cat' }
layer { name: 'sum' type: 'Eltwise' bottom: 'ave' bottom: 'max' top: 'sum' eltwise_param { coeff: 1 coeff: -1 } }
layer { name: 'lrn' type: 'LRN' bottom: 'cat' top: 'lrn' }
layer { name: 'ip' type: 'InnerProduct' bottom: 'lrn' top: 'ip'
  inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'prob' type: 'Softmax' bottom: 'ip' top: 'prob' }
)"};
  int count = 0;
  for (const char* text : nets) {
    Net net(ParseNet(text, "an onnx seed"), SharedContext());
    std::string bytes;
    ExportOnnx(net).SerializeToString(&bytes);
    WriteFile(folder + "/model" + std::to_string(count++) + ".onnx", bytes);
  }
  return count;
}

}  // namespace

const std::vector<Target>& Targets() {
  static const std::vector<Target> targets = {
      {"net_prototxt", "prototxt text parsed and the net built", NetPrototxt},
      {"caffemodel", "a binary caffemodel parsed, its weights copied into a net, run forward", Caffemodel},
      {"datum", "a Datum record parsed, decoded and transformed as a Data layer does", DatumRecord},
      {"solverstate", "a .solverstate file restored into an SGD and an Adam solver", SolverStateFile},
      {"solver_prototxt", "a solver prototxt parsed, its solver built and trained for a few iterations",
       SolverPrototxt},
      {"formula", "an Expression layer's formula parsed, differentiated and run", Formula},
      {"onnx", "an ONNX model parsed, imported onto layers, the net built and run forward", OnnxModel},
  };
  return targets;
}

const Target& TargetNamed(const std::string& name) {
  std::string names;
  for (const Target& target : Targets()) {
    if (target.name == name) return target;
    names += std::string(names.empty() ? "" : ", ") + target.name;
  }
  throw std::invalid_argument("no fuzz target '" + name + "' (the targets: " + names + ")");
}

void SetUp() {
  static const bool done = [] {
    FLAGS_logtostderr = true;
    FLAGS_minloglevel = google::GLOG_FATAL;
    if (std::getenv("CREMA_HOST_MEMORY_LIMIT") == nullptr) SetHostMemoryLimit(size_t{256} << 20);
    return true;
  }();
  (void)done;
}

std::vector<int> WriteSeeds(const std::string& source_dir, const std::string& folder) {
  SetUp();
  std::vector<int> counts;
  for (const Target& target : Targets()) {
    const std::string seeds = folder + "/" + target.name;
    std::filesystem::create_directories(seeds);
    const std::string name = target.name;
    if (name == "net_prototxt") {
      counts.push_back(NetSeeds(source_dir, seeds));
      WriteDictionary(NetParameter::descriptor(), folder + "/net_prototxt.dict");
    } else if (name == "solver_prototxt") {
      counts.push_back(SolverSeeds(source_dir, seeds));
      WriteDictionary(SolverParameter::descriptor(), folder + "/solver_prototxt.dict");
    } else if (name == "caffemodel") {
      counts.push_back(CaffemodelSeeds(seeds));
    } else if (name == "datum") {
      counts.push_back(DatumSeeds(seeds));
    } else if (name == "formula") {
      counts.push_back(FormulaSeeds(seeds));
    } else if (name == "onnx") {
      counts.push_back(OnnxSeeds(seeds));
    } else {
      counts.push_back(SolverStateSeeds(seeds));
    }
  }
  return counts;
}

}  // namespace fuzz
}  // namespace crema
