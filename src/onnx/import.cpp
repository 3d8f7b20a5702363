#include "onnx/import.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "io/proto_io.hpp"

namespace crema {

namespace {

using onnx::AttributeProto;
using onnx::ModelProto;
using onnx::NodeProto;
using onnx::TensorProto;

using Dims = std::vector<int64_t>;

std::string DimsText(const Dims& dims) {
  std::ostringstream out;
  out << "(";
  for (size_t a = 0; a < dims.size(); ++a) out << (a ? ", " : "") << dims[a];
  out << ")";
  return out.str();
}

// The number of elements, the largest int64 where the product overflows (every caller refuses such a count).
int64_t Count(const Dims& dims) {
  int64_t count = 1;
  for (int64_t dim : dims)
    if (__builtin_mul_overflow(count, dim, &count)) return std::numeric_limits<int64_t>::max();
  return count;
}

// A constant: an initializer or a Constant node's value, as floats (and as integers where it holds them).
struct Constant {
  Dims dims;
  std::vector<float> values;
  std::vector<int64_t> integers;
};

template <typename T>
std::vector<T> RawValues(const std::string& raw, size_t count, const std::string& where) {
  CREMA_CHECK(raw.size() == count * sizeof(T))
      << where << " holds " << raw.size() << " bytes of raw data for " << count << " values";
  std::vector<T> values(count);
  if (count > 0) std::memcpy(values.data(), raw.data(), raw.size());
  return values;
}

Constant ReadConstant(const TensorProto& tensor, const std::string& where) {
  Constant c;
  for (int64_t dim : tensor.dims()) {
    CREMA_CHECK(dim >= 0 && dim < (int64_t{1} << 31)) << where << " has a dimension of " << dim;
    c.dims.push_back(dim);
  }
  CREMA_CHECK(tensor.data_location() == 0) << where << " keeps its values in an external file, which crema import "
                                           << "does not read (save the model with its data inside)";
  const int64_t count = Count(c.dims);
  CREMA_CHECK(count <= (int64_t{1} << 31)) << where << " has " << count << " values";
  const bool raw = tensor.has_raw_data();
  switch (tensor.data_type()) {
    case TensorProto::FLOAT:
      c.values = raw ? RawValues<float>(tensor.raw_data(), count, where)
                     : std::vector<float>(tensor.float_data().begin(), tensor.float_data().end());
      break;
    case TensorProto::DOUBLE: {
      const std::vector<double> d = raw ? RawValues<double>(tensor.raw_data(), count, where)
                                        : std::vector<double>(tensor.double_data().begin(), tensor.double_data().end());
      c.values.assign(d.begin(), d.end());
      break;
    }
    case TensorProto::INT64:
      c.integers = raw ? RawValues<int64_t>(tensor.raw_data(), count, where)
                       : std::vector<int64_t>(tensor.int64_data().begin(), tensor.int64_data().end());
      break;
    case TensorProto::INT32: {
      const std::vector<int32_t> i = raw ? RawValues<int32_t>(tensor.raw_data(), count, where)
                                         : std::vector<int32_t>(tensor.int32_data().begin(), tensor.int32_data().end());
      c.integers.assign(i.begin(), i.end());
      break;
    }
    default:
      CREMA_FAIL() << where << " is of ONNX data type " << tensor.data_type()
                   << "; crema import reads float, double, int32 and int64 constants";
  }
  if (c.values.empty() && !c.integers.empty())
    for (int64_t i : c.integers) c.values.push_back(static_cast<float>(i));
  // Floats read as integers (a shape written as floats) where they are whole numbers in range; others never are.
  if (c.integers.empty() && !c.values.empty())
    for (float v : c.values)
      c.integers.push_back(std::isfinite(v) && std::fabs(v) < 9.2e18f ? static_cast<int64_t>(v) : 0);
  CREMA_CHECK(static_cast<int64_t>(c.values.size()) == count)
      << where << " has " << c.values.size() << " values for its shape " << DimsText(c.dims);
  return c;
}

const AttributeProto* Attribute(const NodeProto& node, const char* name) {
  for (const AttributeProto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t Int(const NodeProto& node, const char* name, int64_t fallback) {
  const AttributeProto* a = Attribute(node, name);
  return a == nullptr ? fallback : a->i();
}
float Float(const NodeProto& node, const char* name, float fallback) {
  const AttributeProto* a = Attribute(node, name);
  return a == nullptr ? fallback : a->f();
}
Dims Ints(const NodeProto& node, const char* name, const Dims& fallback = {}) {
  const AttributeProto* a = Attribute(node, name);
  return a == nullptr ? fallback : Dims(a->ints().begin(), a->ints().end());
}
std::string String(const NodeProto& node, const char* name, const std::string& fallback) {
  const AttributeProto* a = Attribute(node, name);
  return a == nullptr ? fallback : a->s();
}

void SetBlob(BlobProto* blob, const Dims& dims, const std::vector<float>& values) {
  for (int64_t dim : dims) blob->mutable_shape()->add_dim(dim);
  for (float v : values) blob->add_data(v);
}

// A spatial padding waiting for its reader: a Pad node's, folded into the convolution or pooling after it.
struct PendingPad {
  std::string input;  // the value the Pad read
  Dims begin, end;    // per spatial axis
};

class Importer {
 public:
  Importer(const ModelProto& model, const std::string& origin) : model_(model), origin_(origin) {
    for (const auto& opset : model.opset_import())
      if (opset.domain().empty() || opset.domain() == "ai.onnx") opset_ = static_cast<int>(opset.version());
  }

  ImportedNet Run() {
    const onnx::GraphProto& graph = model_.graph();
    CREMA_CHECK(graph.node_size() > 0) << origin_ << " has no nodes (is it an ONNX model?)";
    net_.weights.set_name(graph.name().empty() ? "imported" : graph.name());
    for (const TensorProto& tensor : graph.initializer())
      constants_[tensor.name()] = ReadConstant(tensor, origin_ + ": initializer '" + tensor.name() + "'");
    for (const auto& input : graph.input()) {
      if (constants_.count(input.name())) continue;
      Dims dims;
      for (const auto& dim : input.type().tensor_type().shape().dim()) {
        if (dim.has_dim_value()) {
          CREMA_CHECK(dim.dim_value() >= 1 && dim.dim_value() < (int64_t{1} << 31))
              << origin_ << ": input '" << input.name() << "' has a size of " << dim.dim_value();
          dims.push_back(dim.dim_value());
        } else {
          dims.push_back(1);  // a named size (the batch): 1 in the definition, any when the net is reshaped
        }
      }
      CREMA_CHECK(!dims.empty()) << origin_ << ": input '" << input.name() << "' has no shape";
      LayerParameter* layer = Add("Input", input.name(), {}, input.name());
      BlobShape* shape = layer->mutable_input_param()->add_shape();
      for (int64_t dim : dims) shape->add_dim(dim);
      shape_[input.name()] = dims;
    }
    for (const NodeProto& node : graph.node()) Node(node);
    for (const PendingPad* unread : UnreadPads())
      CREMA_FAIL() << origin_ << ": a Pad of '" << unread->input << "' is read by no convolution or pooling that can "
                   << "take its padding";
    net_.definition = net_.weights;
    for (LayerParameter& layer : *net_.definition.mutable_layer()) layer.clear_blobs();
    return net_;
  }

 private:
  std::vector<const PendingPad*> UnreadPads() const {
    std::vector<const PendingPad*> unread;
    for (const auto& [value, pad] : pads_)
      if (!pads_read_.count(value)) unread.push_back(&pad);
    return unread;
  }

  std::string Where(const NodeProto& node) const {
    const std::string name = !node.name().empty()     ? node.name()
                             : node.output_size() > 0 ? node.output(0)
                                                      : "(unnamed, without outputs)";
    return origin_ + ": node '" + name + "' (" + node.op_type() + ")";
  }
  // Input k of `node`, which it must have.
  const std::string& In(const NodeProto& node, int k) const {
    CREMA_CHECK(k < node.input_size()) << Where(node) << " has no input " << k;
    return node.input(k);
  }

  // The crema blob an ONNX value is (an alias's source), checked to exist.
  const std::string& Blob(const NodeProto& node, const std::string& value) const {
    const auto found = blob_.find(value);
    CREMA_CHECK(found != blob_.end()) << Where(node) << " reads '" << value
                                      << "', which no earlier node or input gives (or which is a constant where the "
                                      << "operator needs a computed value)";
    return found->second;
  }
  const Dims& Shape(const NodeProto& node, const std::string& value) const {
    const auto found = shape_.find(value);
    CREMA_CHECK(found != shape_.end()) << Where(node) << " reads '" << value << "', whose shape is unknown";
    return found->second;
  }
  const Constant* ConstantOf(const std::string& value) const {
    const auto found = constants_.find(value);
    return found == constants_.end() ? nullptr : &found->second;
  }
  const Constant& RequireConstant(const NodeProto& node, int input) const {
    CREMA_CHECK(node.input_size() > input && !In(node, input).empty()) << Where(node) << " has no input " << input;
    const Constant* c = ConstantOf(In(node, input));
    CREMA_CHECK(c != nullptr) << Where(node) << ": input " << input << " ('" << In(node, input)
                              << "') must be a constant (an initializer) for crema import";
    return *c;
  }

  // A layer writing ONNX value `output` (the blob of that name) from the blobs of `inputs`.
  LayerParameter* Add(const std::string& type, std::string name, const std::vector<std::string>& bottoms,
                      const std::string& output) {
    for (int k = 1; names_.count(name); ++k) name = name + "_" + std::to_string(k);
    names_.insert(name);
    LayerParameter* layer = net_.weights.add_layer();
    layer->set_name(name);
    layer->set_type(type);
    for (const std::string& bottom : bottoms) layer->add_bottom(bottom);
    layer->add_top(output);
    blob_[output] = output;
    return layer;
  }
  LayerParameter* AddFor(const NodeProto& node, const std::string& type, const std::vector<std::string>& bottoms,
                         const Dims& shape) {
    shape_[node.output(0)] = shape;
    return Add(type, node.name().empty() ? node.output(0) : node.name(), bottoms, node.output(0));
  }
  void Alias(const NodeProto& node) {
    blob_[node.output(0)] = Blob(node, In(node, 0));
    shape_[node.output(0)] = Shape(node, In(node, 0));
  }

  // Spatial geometry: kernel, strides, pads (begin, end), dilations, with a Pad before it folded in.
  struct Geometry {
    Dims kernel, stride, begin, end, dilation;
    std::string input;  // the value read (before a folded Pad)
    bool padded_by_pad = false;
    Dims pad_begin, pad_end;  // the folded Pad's part of begin and end
  };
  Geometry ReadGeometry(const NodeProto& node, int axes, const Dims& kernel) {
    Geometry g;
    g.kernel = kernel;
    g.stride = Ints(node, "strides", Dims(axes, 1));
    g.dilation = Ints(node, "dilations", Dims(axes, 1));
    const Dims pads = Ints(node, "pads", Dims(2 * axes, 0));
    CREMA_CHECK(static_cast<int>(g.stride.size()) == axes && static_cast<int>(g.dilation.size()) == axes &&
                static_cast<int>(pads.size()) == 2 * axes)
        << Where(node) << ": strides, dilations or pads do not have one value per spatial axis (" << axes << ")";
    const std::string auto_pad = String(node, "auto_pad", "NOTSET");
    CREMA_CHECK(auto_pad == "NOTSET" || auto_pad == "VALID")
        << Where(node) << ": auto_pad " << auto_pad << " is not mapped (write explicit pads)";
    constexpr int64_t kMost = int64_t{1} << 20;
    for (int a = 0; a < axes; ++a) {
      CREMA_CHECK(g.kernel[a] >= 1 && g.kernel[a] <= kMost && g.stride[a] >= 1 && g.stride[a] <= kMost &&
                  g.dilation[a] >= 1 && g.dilation[a] <= kMost)
          << Where(node) << ": kernel " << g.kernel[a] << ", stride " << g.stride[a] << " and dilation "
          << g.dilation[a] << " along spatial axis " << a << " (each from 1 to 2^20)";
      CREMA_CHECK(pads[a] >= 0 && pads[a] <= kMost && pads[axes + a] >= 0 && pads[axes + a] <= kMost)
          << Where(node) << ": pads " << pads[a] << " and " << pads[axes + a] << " (each from 0 to 2^20)";
    }
    g.begin.assign(pads.begin(), pads.begin() + axes);
    g.end.assign(pads.begin() + axes, pads.end());
    g.input = In(node, 0);
    g.pad_begin.assign(axes, 0);
    g.pad_end.assign(axes, 0);
    const auto pad = pads_.find(g.input);
    if (pad != pads_.end()) {
      g.pad_begin = pad->second.begin;
      g.pad_end = pad->second.end;
      pads_read_.insert(g.input);
      for (int a = 0; a < axes; ++a) {
        g.begin[a] += pad->second.begin[a];
        g.end[a] += pad->second.end[a];
      }
      g.input = pad->second.input;
      g.padded_by_pad = true;
    }
    return g;
  }

  void Node(const NodeProto& node) {
    const std::string& op = node.op_type();
    CREMA_CHECK(node.output_size() >= 1) << Where(node) << " has no output";
    CREMA_CHECK(node.domain().empty() || node.domain() == "ai.onnx")
        << Where(node) << " is of the operator set '" << node.domain() << "', not ONNX's own";
    const auto x = [&](int k = 0) { return Blob(node, In(node, k)); };
    const auto xs = [&](int k = 0) { return Shape(node, In(node, k)); };
    const std::string name = node.name().empty() ? node.output(0) : node.name();

    if (op == "Constant") {
      const AttributeProto* value = Attribute(node, "value");
      CREMA_CHECK(value != nullptr && value->has_t()) << Where(node) << " has no tensor value";
      constants_[node.output(0)] = ReadConstant(value->t(), Where(node));
      return;
    }
    if (op == "Identity" || op == "Dropout") {
      for (int k = 1; k < node.output_size(); ++k)
        CREMA_CHECK(node.output(k).empty() || !Read(node.output(k)))
            << Where(node) << ": its mask output is read, which inference has no use for";
      if (ConstantOf(In(node, 0)) != nullptr) {
        constants_[node.output(0)] = *ConstantOf(In(node, 0));
        return;
      }
      Alias(node);
      return;
    }
    if (op == "Conv" || op == "ConvTranspose") {
      const Constant& w = RequireConstant(node, 1);
      const int axes = static_cast<int>(w.dims.size()) - 2;
      CREMA_CHECK(axes >= 1) << Where(node) << ": weights of shape " << DimsText(w.dims);
      Geometry g = ReadGeometry(node, axes, Dims(w.dims.begin() + 2, w.dims.end()));
      const Dims& in = Shape(node, g.input);
      CREMA_CHECK(static_cast<int>(in.size()) == axes + 2)
          << Where(node) << ": input of shape " << DimsText(in) << " for " << axes << " spatial axes";
      for (int a = 0; a < axes; ++a)
        CREMA_CHECK(g.begin[a] == g.end[a])
            << Where(node) << ": padding " << g.begin[a] << " before and " << g.end[a] << " after spatial axis " << a
            << "; Caffe's convolutions pad both sides alike";
      const int64_t group = Int(node, "group", 1);
      CREMA_CHECK(group >= 1 && group <= (int64_t{1} << 20)) << Where(node) << ": group " << group;
      const bool transpose = op == "ConvTranspose";
      if (transpose) {
        for (int64_t p : Ints(node, "output_padding", {}))
          CREMA_CHECK(p == 0) << Where(node) << ": output_padding is not mapped";
        CREMA_CHECK(Ints(node, "output_shape", {}).empty()) << Where(node) << ": output_shape is not mapped";
      }
      const int64_t outputs = transpose ? w.dims[1] * group : w.dims[0];
      Dims out = {in[0], outputs};
      for (int a = 0; a < axes; ++a) {
        const int64_t extent = g.dilation[a] * (g.kernel[a] - 1) + 1;
        out.push_back(transpose ? g.stride[a] * (in[2 + a] - 1) + extent - 2 * g.begin[a]
                                : (in[2 + a] + 2 * g.begin[a] - extent) / g.stride[a] + 1);
      }
      LayerParameter* layer = AddFor(node, transpose ? "Deconvolution" : "Convolution", {Blob(node, g.input)}, out);
      ConvolutionParameter* c = layer->mutable_convolution_param();
      c->set_num_output(static_cast<uint32_t>(outputs));
      c->set_group(static_cast<uint32_t>(group));
      const bool same = std::all_of(g.kernel.begin(), g.kernel.end(), [&](int64_t k) { return k == g.kernel[0]; });
      if (axes == 2 && !same) {
        c->set_kernel_h(g.kernel[0]);
        c->set_kernel_w(g.kernel[1]);
      } else {
        for (int64_t k : same ? Dims{g.kernel[0]} : g.kernel) c->add_kernel_size(static_cast<uint32_t>(k));
      }
      for (int a = 0; a < axes; ++a) {
        c->add_stride(static_cast<uint32_t>(g.stride[a]));
        c->add_pad(static_cast<uint32_t>(g.begin[a]));
        c->add_dilation(static_cast<uint32_t>(g.dilation[a]));
      }
      SetBlob(layer->add_blobs(), w.dims, w.values);
      const bool bias = node.input_size() > 2 && !In(node, 2).empty();
      c->set_bias_term(bias);
      if (bias) {
        const Constant& b = RequireConstant(node, 2);
        SetBlob(layer->add_blobs(), {outputs}, b.values);
      }
      return;
    }
    if (op == "Gemm" || op == "MatMul") {
      const Dims& a = xs(0);
      const Constant& b = RequireConstant(node, 1);
      CREMA_CHECK(b.dims.size() == 2) << Where(node) << ": a constant matrix of shape " << DimsText(b.dims);
      const bool gemm = op == "Gemm";
      const bool trans_b = gemm && Int(node, "transB", 0) != 0;
      CREMA_CHECK(!gemm || Int(node, "transA", 0) == 0) << Where(node) << ": transA is not mapped";
      CREMA_CHECK(gemm ? a.size() == 2 : a.size() >= 2)
          << Where(node) << ": input of shape " << DimsText(a) << " (Gemm takes two axes)";
      const int64_t inner = trans_b ? b.dims[1] : b.dims[0], outputs = trans_b ? b.dims[0] : b.dims[1];
      CREMA_CHECK(a.back() == inner) << Where(node) << ": input of shape " << DimsText(a) << " and matrix of shape "
                                     << DimsText(b.dims);
      const float alpha = gemm ? Float(node, "alpha", 1.f) : 1.f, beta = gemm ? Float(node, "beta", 1.f) : 1.f;
      // Caffe's weights are (outputs, inputs): B transposed unless transB.
      std::vector<float> weights(b.values.size());
      for (int64_t o = 0; o < outputs; ++o)
        for (int64_t i = 0; i < inner; ++i)
          weights[o * inner + i] = alpha * (trans_b ? b.values[o * inner + i] : b.values[i * outputs + o]);
      Dims out(a.begin(), a.end() - 1);
      out.push_back(outputs);
      LayerParameter* layer = AddFor(node, "InnerProduct", {x()}, out);
      InnerProductParameter* ip = layer->mutable_inner_product_param();
      ip->set_num_output(static_cast<uint32_t>(outputs));
      ip->set_axis(static_cast<int>(a.size()) - 1);
      SetBlob(layer->add_blobs(), {outputs, inner}, weights);
      const bool bias = gemm && node.input_size() > 2 && !In(node, 2).empty();
      ip->set_bias_term(bias);
      if (bias) {
        const Constant& c = RequireConstant(node, 2);
        CREMA_CHECK(Count(c.dims) == outputs || Count(c.dims) == 1)
            << Where(node) << ": a bias of shape " << DimsText(c.dims) << " for " << outputs << " outputs";
        std::vector<float> values(static_cast<size_t>(outputs));
        for (int64_t o = 0; o < outputs; ++o) values[o] = beta * c.values[Count(c.dims) == 1 ? 0 : o];
        SetBlob(layer->add_blobs(), {outputs}, values);
      }
      return;
    }
    if (op == "MaxPool" || op == "AveragePool") {
      Pooling(node);
      return;
    }
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
      Dims out = xs();
      for (size_t a = 2; a < out.size(); ++a) out[a] = 1;
      LayerParameter* layer = AddFor(node, "Pooling", {x()}, out);
      layer->mutable_pooling_param()->set_pool(op == "GlobalMaxPool" ? PoolingParameter::MAX : PoolingParameter::AVE);
      layer->mutable_pooling_param()->set_global_pooling(true);
      return;
    }
    if (op == "Relu" || op == "LeakyRelu") {
      LayerParameter* layer = AddFor(node, "ReLU", {x()}, xs());
      if (op == "LeakyRelu") layer->mutable_relu_param()->set_negative_slope(Float(node, "alpha", 0.01f));
      return;
    }
    const std::map<std::string, std::string> elements = {{"Sigmoid", "Sigmoid"}, {"Tanh", "TanH"}, {"Abs", "AbsVal"},
                                                         {"Softplus", "BNLL"},   {"Exp", "Exp"},   {"Log", "Log"}};
    if (elements.count(op)) {
      AddFor(node, elements.at(op), {x()}, xs());
      return;
    }
    if (op == "Elu") {
      AddFor(node, "ELU", {x()}, xs())->mutable_elu_param()->set_alpha(Float(node, "alpha", 1.f));
      return;
    }
    if (op == "PRelu") {
      const Constant& slope = RequireConstant(node, 1);
      const Dims& in = xs();
      const int64_t count = Count(slope.dims);
      CREMA_CHECK(count == 1 || (in.size() >= 2 && count == in[1]))
          << Where(node) << ": slopes of shape " << DimsText(slope.dims) << " are neither one nor one per channel";
      LayerParameter* layer = AddFor(node, "PReLU", {x()}, in);
      layer->mutable_prelu_param()->set_channel_shared(count == 1 && !(in.size() >= 2 && in[1] == 1));
      SetBlob(layer->add_blobs(), {count}, slope.values);
      return;
    }
    if (op == "Clip") {
      float low = -FLT_MAX, high = FLT_MAX;
      if (opset_ < 11) {
        low = Float(node, "min", low);
        high = Float(node, "max", high);
      } else {
        if (node.input_size() > 1 && !In(node, 1).empty()) low = RequireConstant(node, 1).values.at(0);
        if (node.input_size() > 2 && !In(node, 2).empty()) high = RequireConstant(node, 2).values.at(0);
      }
      if (low == 0.f && high == FLT_MAX) {
        AddFor(node, "ReLU", {x()}, xs());
        return;
      }
      ClipParameter* clip = AddFor(node, "Clip", {x()}, xs())->mutable_clip_param();
      clip->set_min(low);
      clip->set_max(high);
      return;
    }
    if (op == "BatchNormalization") {
      const Constant& gamma = RequireConstant(node, 1);
      const Constant& beta = RequireConstant(node, 2);
      const Constant& mean = RequireConstant(node, 3);
      const Constant& variance = RequireConstant(node, 4);
      CREMA_CHECK(Int(node, "training_mode", 0) == 0) << Where(node) << " is in training mode";
      const int64_t channels = Count(mean.dims);
      const std::string normalised = node.output(0) + "/normalized";
      shape_[normalised] = xs();
      LayerParameter* bn = Add("BatchNorm", name, {x()}, normalised);
      bn->mutable_batch_norm_param()->set_use_global_stats(true);
      bn->mutable_batch_norm_param()->set_eps(Float(node, "epsilon", 1e-5f));
      SetBlob(bn->add_blobs(), {channels}, mean.values);
      SetBlob(bn->add_blobs(), {channels}, variance.values);
      SetBlob(bn->add_blobs(), {1}, {1.f});
      shape_[node.output(0)] = xs();
      LayerParameter* scale = Add("Scale", name + "/scale", {normalised}, node.output(0));
      scale->mutable_scale_param()->set_bias_term(true);
      SetBlob(scale->add_blobs(), {channels}, gamma.values);
      SetBlob(scale->add_blobs(), {channels}, beta.values);
      return;
    }
    if (op == "Add" || op == "Sum" || op == "Mul" || op == "Sub" || op == "Div" || op == "Max") {
      Arithmetic(node);
      return;
    }
    if (op == "Pow") {
      const Constant& exponent = RequireConstant(node, 1);
      CREMA_CHECK(exponent.values.size() == 1) << Where(node) << ": an exponent per element is not mapped";
      AddFor(node, "Power", {x()}, xs())->mutable_power_param()->set_power(exponent.values[0]);
      return;
    }
    if (op == "Concat") {
      std::vector<std::string> bottoms;
      Dims out = xs(0);
      const int64_t axis =
          Int(node, "axis", 1) < 0 ? Int(node, "axis", 1) + static_cast<int64_t>(out.size()) : Int(node, "axis", 1);
      CREMA_CHECK(axis >= 0 && axis < static_cast<int64_t>(out.size())) << Where(node) << ": axis out of range";
      out[axis] = 0;
      for (int k = 0; k < node.input_size(); ++k) {
        bottoms.push_back(x(k));
        CREMA_CHECK(xs(k).size() == out.size())
            << Where(node) << ": inputs of " << out.size() << " and " << xs(k).size() << " axes";
        out[axis] += xs(k)[axis];
      }
      AddFor(node, "Concat", bottoms, out)->mutable_concat_param()->set_axis(static_cast<int>(axis));
      return;
    }
    if (op == "Split") {
      // A Slice layer: the sizes (an input from opset 13, an attribute before, else equal parts) as slice points.
      const Dims& in = xs();
      int64_t axis = Int(node, "axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(in.size());
      CREMA_CHECK(axis >= 0 && axis < static_cast<int64_t>(in.size()))
          << Where(node) << ": axis " << Int(node, "axis", 0) << " for " << in.size() << " axes";
      Dims sizes = opset_ >= 13 && node.input_size() > 1 && !In(node, 1).empty() ? RequireConstant(node, 1).integers
                                                                                 : Ints(node, "split", {});
      const int64_t parts = node.output_size();
      if (sizes.empty()) {
        CREMA_CHECK(in[axis] % parts == 0) << Where(node) << ": " << in[axis] << " cannot be split in " << parts;
        sizes.assign(static_cast<size_t>(parts), in[axis] / parts);
      }
      CREMA_CHECK(static_cast<int64_t>(sizes.size()) == parts &&
                  std::all_of(sizes.begin(), sizes.end(), [](int64_t n) { return n >= 1; }) &&
                  std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) == in[axis])
          << Where(node) << ": sizes " << DimsText(sizes) << " for " << parts << " outputs of an axis of " << in[axis];
      LayerParameter* layer = Add("Slice", name, {x()}, node.output(0));
      layer->mutable_slice_param()->set_axis(static_cast<int>(axis));
      int64_t point = 0;
      for (int64_t k = 0; k < parts; ++k) {
        const std::string& output = node.output(static_cast<int>(k));
        if (k > 0) {
          layer->add_top(output);
          blob_[output] = output;
        }
        Dims shape = in;
        shape[axis] = sizes[k];
        shape_[output] = shape;
        if (k + 1 < parts) layer->mutable_slice_param()->add_slice_point(static_cast<uint32_t>(point += sizes[k]));
      }
      return;
    }
    if (op == "Softmax") {
      const Dims& in = xs();
      int64_t axis = Int(node, "axis", opset_ >= 13 ? -1 : 1);
      if (axis < 0) axis += static_cast<int64_t>(in.size());
      CREMA_CHECK(axis >= 0 && axis < static_cast<int64_t>(in.size()))
          << Where(node) << ": axis " << axis << " for " << in.size() << " axes";
      if (opset_ < 13)
        for (size_t a = static_cast<size_t>(axis) + 1; a < in.size(); ++a)
          CREMA_CHECK(in[a] == 1) << Where(node) << ": before opset 13 Softmax normalises over every axis from " << axis
                                  << " on, which Caffe's Softmax does not (input " << DimsText(in) << ")";
      AddFor(node, "Softmax", {x()}, in)->mutable_softmax_param()->set_axis(static_cast<int>(axis));
      return;
    }
    if (op == "Flatten") {
      const Dims& in = xs();
      int64_t axis = Int(node, "axis", 1);
      if (axis < 0) axis += static_cast<int64_t>(in.size());
      CREMA_CHECK(axis >= 0 && axis <= static_cast<int64_t>(in.size()))
          << Where(node) << ": axis " << Int(node, "axis", 1) << " for " << in.size() << " axes";
      const Dims out = {Count(Dims(in.begin(), in.begin() + axis)), Count(Dims(in.begin() + axis, in.end()))};
      if (axis == 1) {
        AddFor(node, "Flatten", {x()}, out);
      } else {
        Reshape(node, out);
      }
      return;
    }
    if (op == "Reshape") {
      const Constant& target = RequireConstant(node, 1);
      CREMA_CHECK(Int(node, "allowzero", 0) == 0) << Where(node) << ": allowzero is not mapped";
      const Dims& in = xs();
      Dims out(target.integers.begin(), target.integers.end());
      int64_t known = 1, infer = -1;
      for (size_t a = 0; a < out.size(); ++a) {
        CREMA_CHECK(out[a] >= -1 && (out[a] != 0 || a < in.size()))
            << Where(node) << ": size " << out[a] << " for axis " << a << " of " << DimsText(in);
        if (out[a] == 0) out[a] = in[a];
        if (out[a] == -1) {
          infer = static_cast<int64_t>(a);
        } else {
          known *= out[a];
        }
      }
      if (infer >= 0) out[infer] = Count(in) / std::max<int64_t>(known, 1);
      CREMA_CHECK(Count(out) == Count(in)) << Where(node) << ": " << DimsText(in) << " cannot become " << DimsText(out);
      Reshape(node, out);
      return;
    }
    if (op == "Transpose") {
      const Dims& in = xs();
      Dims perm = Ints(node, "perm", {});
      if (perm.empty())
        for (int64_t a = static_cast<int64_t>(in.size()) - 1; a >= 0; --a) perm.push_back(a);
      Dims sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      for (size_t a = 0; a < sorted.size(); ++a)
        CREMA_CHECK(sorted[a] == static_cast<int64_t>(a) && sorted.size() == in.size())
            << Where(node) << ": perm is not a permutation of the " << in.size() << " axes";
      Dims out, moved;
      for (int64_t a : perm) {
        out.push_back(in.at(a));
        if (in.at(a) != 1) moved.push_back(a);
      }
      CREMA_CHECK(std::is_sorted(moved.begin(), moved.end()))
          << Where(node) << ": a transpose that moves values (perm over " << DimsText(in)
          << ") has no Caffe layer; only one that moves axes of size 1 is mapped";
      Reshape(node, out);
      return;
    }
    if (op == "LRN") {
      const int64_t size = Int(node, "size", 0);
      CREMA_CHECK(size > 0 && size % 2 == 1 && size < (int64_t{1} << 20))
          << Where(node) << ": size " << size << "; Caffe's LRN takes an odd size";
      LRNParameter* lrn = AddFor(node, "LRN", {x()}, xs())->mutable_lrn_param();
      lrn->set_local_size(static_cast<uint32_t>(size));
      lrn->set_alpha(Float(node, "alpha", 1e-4f));
      lrn->set_beta(Float(node, "beta", 0.75f));
      lrn->set_k(Float(node, "bias", 1.f));
      return;
    }
    if (op == "Pad") {
      const std::string mode = String(node, "mode", "constant");
      CREMA_CHECK(mode == "constant") << Where(node) << ": mode " << mode << " is not mapped";
      Dims pads = opset_ >= 11 ? RequireConstant(node, 1).integers : Ints(node, "pads", {});
      if (opset_ >= 11 && node.input_size() > 2 && !In(node, 2).empty())
        CREMA_CHECK(RequireConstant(node, 2).values.at(0) == 0.f) << Where(node) << ": pads with a value not 0";
      const Dims& in = xs();
      CREMA_CHECK(pads.size() == 2 * in.size())
          << Where(node) << ": " << pads.size() << " pads for " << in.size() << " axes";
      const size_t rank = in.size();
      CREMA_CHECK(in.size() >= 3 && pads[0] == 0 && pads[1] == 0 && pads[rank] == 0 && pads[rank + 1] == 0)
          << Where(node) << ": padding of the batch or channel axis is not mapped";
      for (int64_t p : pads)
        CREMA_CHECK(p >= 0 && p <= (int64_t{1} << 20)) << Where(node) << ": a pad of " << p << " (from 0 to 2^20)";
      PendingPad pad;
      pad.input = In(node, 0);
      Dims out = in;
      for (size_t a = 2; a < rank; ++a) {
        pad.begin.push_back(pads[a]);
        pad.end.push_back(pads[rank + a]);
        out[a] += pads[a] + pads[rank + a];
      }
      pads_[node.output(0)] = pad;
      shape_[node.output(0)] = out;
      return;
    }
    CREMA_FAIL()
        << Where(node) << ": crema import cannot map " << op << " onto a layer (it maps Conv, "
        << "ConvTranspose, Gemm, MatMul with a constant matrix, Relu, LeakyRelu, PRelu, Sigmoid, Tanh, Elu, "
        << "Softplus, Abs, Exp, Log, Clip, Pow with a constant exponent, MaxPool, AveragePool, GlobalAveragePool, "
           "GlobalMaxPool, BatchNormalization, "
        << "Add, Sum, Sub, Mul, Div, Max, Concat, Split, Softmax, Flatten, Reshape, Transpose of axes of one "
        << "element, Dropout, Identity, LRN, Constant and Pad before a convolution or pooling)";
  }

  // Whether a later node reads `value` (for outputs inference does not use).
  bool Read(const std::string& value) const {
    for (const NodeProto& node : model_.graph().node())
      for (const std::string& input : node.input())
        if (input == value) return true;
    for (const auto& output : model_.graph().output())
      if (output.name() == value) return true;
    return false;
  }

  void Reshape(const NodeProto& node, const Dims& out) {
    LayerParameter* layer = AddFor(node, "Reshape", {Blob(node, In(node, 0))}, out);
    BlobShape* shape = layer->mutable_reshape_param()->mutable_shape();
    // The first axis copied where it is the input's (any batch size), the others as they are.
    const Dims& in = Shape(node, In(node, 0));
    for (size_t a = 0; a < out.size(); ++a) shape->add_dim(a == 0 && !in.empty() && out[0] == in[0] ? 0 : out[a]);
  }

  void Pooling(const NodeProto& node) {
    const bool max = node.op_type() == "MaxPool";
    const Dims kernel = Ints(node, "kernel_shape", {});
    const int axes = static_cast<int>(kernel.size());
    CREMA_CHECK(axes == 2) << Where(node) << ": " << axes << " spatial axes; Caffe's pooling takes two";
    CREMA_CHECK(node.output_size() == 1 || !Read(node.output(1))) << Where(node) << ": its indices are not mapped";
    Geometry g = ReadGeometry(node, axes, kernel);
    for (int64_t d : g.dilation) CREMA_CHECK(d == 1) << Where(node) << ": dilated pooling is not mapped";
    CREMA_CHECK(!(max && g.padded_by_pad)) << Where(node) << ": a Pad of zeros before a MaxPool (zeros in the "
                                           << "maximum) has no Caffe form";
    const Dims& in = Shape(node, g.input);
    const bool ceil_mode = Int(node, "ceil_mode", 0) != 0;
    Dims out = {in[0], in[1]};
    bool caffe_ceil = true;
    for (int a = 0; a < 2; ++a) {
      const int64_t span = in[2 + a] + g.begin[a] + g.end[a] - kernel[a];
      int64_t size = (ceil_mode ? (span + g.stride[a] - 1) / g.stride[a] : span / g.stride[a]) + 1;
      if (ceil_mode && (size - 1) * g.stride[a] >= in[2 + a] + g.begin[a]) --size;
      out.push_back(size);
    }
    // Caffe's sizes with its pad (the begin pad) rounding up and down; one must give ONNX's.
    for (int rounding = 0; rounding < 2; ++rounding) {
      bool all = true;
      for (int a = 0; a < 2; ++a) {
        const int64_t span = in[2 + a] + 2 * g.begin[a] - kernel[a];
        int64_t size = (rounding == 0 ? (span + g.stride[a] - 1) / g.stride[a] : span / g.stride[a]) + 1;
        if (rounding == 0 && g.begin[a] > 0 && (size - 1) * g.stride[a] >= in[2 + a] + g.begin[a]) --size;
        all = all && size == out[2 + a];
      }
      if (all) {
        caffe_ceil = rounding == 0;
        break;
      }
      CREMA_CHECK(rounding == 0) << Where(node) << ": pads " << DimsText(g.begin) << " before and " << DimsText(g.end)
                                 << " after give an output of " << DimsText(out)
                                 << ", which Caffe's pooling (one pad for both sides) cannot give";
    }
    if (!max) {
      // Every window's divisor, as ONNX counts it (a Pad's zeros always, the pooling's own padding with
      // count_include_pad) and as Caffe does (up to its pad on either side): the same, or no Caffe form.
      const bool include = Int(node, "count_include_pad", 0) != 0;
      for (int a = 0; a < 2; ++a) {
        const int64_t low = include ? -g.begin[a] : -g.pad_begin[a];
        const int64_t high = in[2 + a] + (include ? g.end[a] : g.pad_end[a]);
        for (int64_t i = 0; i < out[2 + a]; ++i) {
          const int64_t start = i * g.stride[a] - g.begin[a];
          const int64_t theirs = std::min(start + kernel[a], high) - std::max(start, low);
          const int64_t ours = std::min(start + kernel[a], in[2 + a] + g.begin[a]) - start;
          CREMA_CHECK(theirs == ours) << Where(node) << ": window " << i << " along spatial axis " << a
                                      << " averages over " << theirs << " places where Caffe's pooling would over "
                                      << ours << " (padding counted otherwise): no Caffe form";
        }
      }
    }
    LayerParameter* layer = AddFor(node, "Pooling", {Blob(node, g.input)}, out);
    PoolingParameter* p = layer->mutable_pooling_param();
    p->set_pool(max ? PoolingParameter::MAX : PoolingParameter::AVE);
    if (kernel[0] == kernel[1]) {
      p->set_kernel_size(static_cast<uint32_t>(kernel[0]));
    } else {
      p->set_kernel_h(static_cast<uint32_t>(kernel[0]));
      p->set_kernel_w(static_cast<uint32_t>(kernel[1]));
    }
    if (g.stride[0] == g.stride[1]) {
      p->set_stride(static_cast<uint32_t>(g.stride[0]));
    } else {
      p->set_stride_h(static_cast<uint32_t>(g.stride[0]));
      p->set_stride_w(static_cast<uint32_t>(g.stride[1]));
    }
    if (g.begin[0] == g.begin[1]) {
      if (g.begin[0] > 0) p->set_pad(static_cast<uint32_t>(g.begin[0]));
    } else {
      p->set_pad_h(static_cast<uint32_t>(g.begin[0]));
      p->set_pad_w(static_cast<uint32_t>(g.begin[1]));
    }
    if (!caffe_ceil) p->set_round_mode(PoolingParameter::FLOOR);
  }

  // Add, Sum, Sub, Mul, Div, Max: of computed values an Eltwise; with a constant a Bias or Scale broadcast from the
  // axis where the constant's sizes begin (right-aligned, as ONNX broadcasts), or a Power for one value.
  void Arithmetic(const NodeProto& node) {
    const std::string& op = node.op_type();
    std::vector<std::string> values;
    const Constant* constant = nullptr;
    for (int k = 0; k < node.input_size(); ++k) {
      if (const Constant* c = ConstantOf(In(node, k))) {
        CREMA_CHECK(constant == nullptr && node.input_size() == 2 && (k == 1 || op == "Add" || op == "Mul"))
            << Where(node) << ": constants in these places are not mapped";
        constant = c;
      } else {
        values.push_back(In(node, k));
      }
    }
    CREMA_CHECK(!values.empty()) << Where(node) << ": every input is a constant";
    const Dims& in = Shape(node, values[0]);
    if (constant == nullptr) {
      CREMA_CHECK(op != "Sub" && op != "Div") << Where(node) << ": of two computed values is not mapped";
      std::vector<std::string> bottoms;
      for (const std::string& value : values) {
        CREMA_CHECK(Shape(node, value) == in) << Where(node) << ": inputs of shapes " << DimsText(in) << " and "
                                              << DimsText(Shape(node, value)) << " (Caffe's Eltwise takes one shape)";
        bottoms.push_back(Blob(node, value));
      }
      CREMA_CHECK(bottoms.size() >= 2) << Where(node) << " has one input";
      EltwiseParameter* e = AddFor(node, "Eltwise", bottoms, in)->mutable_eltwise_param();
      e->set_operation(op == "Mul"   ? EltwiseParameter::PROD
                       : op == "Max" ? EltwiseParameter::MAX
                                     : EltwiseParameter::SUM);
      return;
    }
    CREMA_CHECK(op != "Sum" && op != "Max") << Where(node) << ": with a constant is not mapped";
    std::vector<float> values_c = constant->values;
    if (op == "Sub")
      for (float& v : values_c) v = -v;
    if (op == "Div")
      for (float& v : values_c) v = 1.f / v;
    const bool add = op == "Add" || op == "Sub";
    if (values_c.size() == 1) {
      PowerParameter* power = AddFor(node, "Power", {Blob(node, values[0])}, in)->mutable_power_param();
      if (add) {
        power->set_shift(values_c[0]);
      } else {
        power->set_scale(values_c[0]);
      }
      return;
    }
    // The constant's sizes aligned on the right; the axes it spans (no ones inside) from `first` to `last`.
    CREMA_CHECK(constant->dims.size() <= in.size())
        << Where(node) << ": a constant of shape " << DimsText(constant->dims) << " for " << DimsText(in);
    Dims aligned(in.size() - constant->dims.size(), 1);
    aligned.insert(aligned.end(), constant->dims.begin(), constant->dims.end());
    int first = -1, last = -1;
    for (int a = 0; a < static_cast<int>(aligned.size()); ++a)
      if (aligned[a] != 1) {
        if (first < 0) first = a;
        last = a;
      }
    for (int a = first; a <= last; ++a)
      CREMA_CHECK(aligned[a] == in[a]) << Where(node) << ": a constant of shape " << DimsText(constant->dims)
                                       << " broadcast inside " << DimsText(in) << " has no Caffe form";
    LayerParameter* layer = AddFor(node, add ? "Bias" : "Scale", {Blob(node, values[0])}, in);
    if (add) {
      layer->mutable_bias_param()->set_axis(first);
      layer->mutable_bias_param()->set_num_axes(last - first + 1);
    } else {
      layer->mutable_scale_param()->set_axis(first);
      layer->mutable_scale_param()->set_num_axes(last - first + 1);
    }
    SetBlob(layer->add_blobs(), Dims(aligned.begin() + first, aligned.begin() + last + 1), values_c);
  }

  const ModelProto& model_;
  const std::string origin_;
  int opset_ = 13;
  ImportedNet net_;
  std::map<std::string, Constant> constants_;
  std::map<std::string, std::string> blob_;
  std::map<std::string, Dims> shape_;
  std::map<std::string, PendingPad> pads_;
  std::set<std::string> pads_read_, names_;
};

}  // namespace

ImportedNet ImportOnnx(const ModelProto& model, const std::string& origin) { return Importer(model, origin).Run(); }

ImportedNet ImportOnnxFile(const std::string& path) {
  const std::string bytes = ReadFileToString(path);
  ModelProto model;
  CREMA_CHECK(model.ParseFromString(bytes) && model.has_graph())
      << "'" << path << "' is not an ONNX model (" << bytes.size() << " bytes that are not a ModelProto with a graph)";
  return ImportOnnx(model, "'" + path + "'");
}

}  // namespace crema
