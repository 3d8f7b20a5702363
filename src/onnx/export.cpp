#include "onnx/export.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "io/proto_io.hpp"
#include "net/fold.hpp"

namespace crema {

namespace {

using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::ModelProto;
using onnx::NodeProto;
using onnx::TensorProto;

// The graph being written: nodes, initializers, and the ONNX value each blob holds now.
class Writer {
 public:
  Writer(const Net& net, GraphProto* graph) : net_(net), graph_(graph) {
    // The step that writes each blob last: its value keeps the blob's name.
    // (A Dropout in place copies the value: the writer before it keeps the name.)
    const auto& plan = net.plan();
    for (size_t s = 0; s < plan.size(); ++s) {
      const bool copy = std::string(net.layers()[plan[s].layer]->type()) == "Dropout";
      for (int top : plan[s].tops)
        if (!copy || !last_writer_.count(top)) last_writer_[top] = static_cast<int>(s);
    }
  }

  // The value blob `id` holds now.
  const std::string& Value(int id) const {
    const auto found = value_.find(id);
    CREMA_CHECK(found != value_.end()) << "blob '" << net_.blob_names()[id] << "' is read before any step writes it";
    return found->second;
  }
  // Blob `id` holds `value` from now on (a copy: Split, Dropout).
  void Alias(int id, const std::string& value) { value_[id] = value; }
  // The name of the value step `step` writes into blob `id`: the blob's where the step writes it last, else the
  // blob's with the layer's name.
  std::string Output(int step, int id) {
    std::string name = net_.blob_names()[id];
    if (last_writer_.at(id) != step) name += "/" + net_.layer_names()[net_.plan()[step].layer];
    name = Unique(name);
    value_[id] = name;
    return name;
  }
  // A fresh name for an intermediate value or a constant.
  std::string Unique(const std::string& wanted) {
    std::string name = wanted;
    for (int k = 1; used_.count(name); ++k) name = wanted + "_" + std::to_string(k);
    used_.insert(name);
    return name;
  }

  NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                  const std::vector<std::string>& outputs, const std::string& name) {
    NodeProto* node = graph_->add_node();
    node->set_op_type(op);
    // Nodes have names of their own (the layer's, then with a number): another namespace than the values'.
    std::string node_name = name;
    for (int k = 1; used_nodes_.count(node_name); ++k) node_name = name + "_" + std::to_string(k);
    used_nodes_.insert(node_name);
    node->set_name(node_name);
    for (const std::string& input : inputs) node->add_input(input);
    for (const std::string& output : outputs) node->add_output(output);
    return node;
  }
  // A node of one output, a fresh value named after `name`.
  std::string Apply(const std::string& op, const std::vector<std::string>& inputs, const std::string& name,
                    NodeProto** made = nullptr) {
    const std::string output = Unique(name);
    NodeProto* node = Node(op, inputs, {output}, name);
    if (made != nullptr) *made = node;
    return output;
  }

  std::string Constant(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
    TensorProto* tensor = graph_->add_initializer();
    tensor->set_name(Unique(name));
    tensor->set_data_type(TensorProto::FLOAT);
    for (int64_t dim : dims) tensor->add_dims(dim);
    tensor->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    return tensor->name();
  }
  std::string Integers(const std::string& name, const std::vector<int64_t>& values) {
    TensorProto* tensor = graph_->add_initializer();
    tensor->set_name(Unique(name));
    tensor->set_data_type(TensorProto::INT64);
    tensor->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t value : values) tensor->add_int64_data(value);
    return tensor->name();
  }

 private:
  const Net& net_;
  GraphProto* graph_;
  std::map<int, int> last_writer_;
  std::map<int, std::string> value_;
  std::set<std::string> used_, used_nodes_;
};

void Int(NodeProto* node, const char* name, int64_t value) {
  AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INT);
  a->set_i(value);
}
void Ints(NodeProto* node, const char* name, const std::vector<int64_t>& values) {
  AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INTS);
  for (int64_t value : values) a->add_ints(value);
}
void Float(NodeProto* node, const char* name, float value) {
  AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::FLOAT);
  a->set_f(value);
}

std::vector<int64_t> Dims(const std::vector<int>& shape) { return std::vector<int64_t>(shape.begin(), shape.end()); }

// Caffe's per-axis geometry fields: the _h/_w pair where set (two spatial axes), else the repeated field (one value
// for every axis, or one each), else `fallback`.
std::vector<int64_t> Geometry(int axes, const google::protobuf::RepeatedField<uint32_t>& values, bool has_hw,
                              uint32_t h, uint32_t w, int64_t fallback) {
  if (has_hw && axes == 2) return {h, w};
  std::vector<int64_t> result(static_cast<size_t>(axes), fallback);
  for (int a = 0; a < axes; ++a)
    if (values.size() > 0) result[a] = values.size() == 1 ? values.Get(0) : values.Get(a);
  return result;
}

// A parameter's values as Caffe lays them out.
std::vector<float> Values(const Blob& blob) { return PlainValues(blob); }

// Where a per-channel (or per-slice) parameter of shape `param_shape` broadcasts over a value of `rank` axes from
// `axis` on, as Caffe's Scale and Bias do: its dims followed by ones (numpy's broadcasting aligns on the right).
std::vector<int64_t> BroadcastDims(const std::vector<int>& param_shape, int axis, int rank) {
  std::vector<int64_t> dims(param_shape.begin(), param_shape.end());
  while (static_cast<int>(dims.size()) + axis < rank) dims.push_back(1);
  return dims;
}

int CanonicalAxis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

class Exporter {
 public:
  Exporter(const Net& net, GraphProto* graph) : net_(net), w_(net, graph) {}

  void Step(int s) {
    const PlanStep& step = net_.plan()[s];
    const Layer& layer = *net_.layers()[step.layer];
    const LayerParameter& p = layer.layer_param();
    const std::string type = layer.type();
    const std::string& name = net_.layer_names()[step.layer];
    const auto in = [&](int k) { return w_.Value(step.bottoms.at(k)); };
    const auto shape_in = [&](int k) { return net_.blobs()[step.bottoms.at(k)]->shape(); };
    const auto shape_out = [&](int k) { return net_.blobs()[step.tops.at(k)]->shape(); };
    const auto out = [&](int k) { return w_.Output(s, step.tops.at(k)); };
    const auto param = [&](int k) -> const Blob& {
      CREMA_CHECK(static_cast<int>(layer.params().size()) > k)
          << "layer '" << name << "' (" << type << ") has " << layer.params().size() << " parameter blobs";
      return *layer.params()[k];
    };
    const auto one = [&](const std::string& op, const std::vector<std::string>& inputs) {
      return w_.Node(op, inputs, {out(0)}, name);
    };
    if (type == "Input") {  // the graph's inputs, under the blobs' names
      for (int top : step.tops) w_.Alias(top, w_.Unique(net_.blob_names()[top]));
      return;
    }
    if (type == "Split") {
      for (int top : step.tops) w_.Alias(top, in(0));
      return;
    }
    if (type == "Dropout") {  // inference: the identity (Caffe scales in training)
      w_.Alias(step.tops[0], in(0));
      return;
    }
    if (type == "Silence") return;
    if (type == "Convolution" || type == "Deconvolution") {
      const ConvolutionParameter& c = p.convolution_param();
      CREMA_CHECK(CanonicalAxis(c.axis(), static_cast<int>(shape_in(0).size())) == 1)
          << "layer '" << name << "' (" << type << "): convolution over axes from " << c.axis()
          << " cannot be written as ONNX (its channels must be axis 1)";
      const Blob& weights = param(0);
      const int axes = weights.num_axes() - 2;
      std::vector<std::string> inputs = {in(0), w_.Constant(name + "/weights", Dims(weights.shape()), Values(weights))};
      if (c.bias_term()) {
        const Blob& bias = param(1);
        inputs.push_back(w_.Constant(name + "/bias", {bias.count()}, Values(bias)));
      }
      NodeProto* node = one(type == "Convolution" ? "Conv" : "ConvTranspose", inputs);
      std::vector<int64_t> kernel(weights.shape().begin() + 2, weights.shape().end());
      std::vector<int64_t> pads = Geometry(axes, c.pad(), c.has_pad_h() || c.has_pad_w(), c.pad_h(), c.pad_w(), 0);
      pads.insert(pads.end(), pads.begin(), pads.end());
      Ints(node, "kernel_shape", kernel);
      Ints(node, "strides",
           Geometry(axes, c.stride(), c.has_stride_h() || c.has_stride_w(), c.stride_h(), c.stride_w(), 1));
      Ints(node, "pads", pads);
      Ints(node, "dilations", Geometry(axes, c.dilation(), false, 1, 1, 1));
      Int(node, "group", c.group());
      return;
    }
    if (type == "InnerProduct") {
      const InnerProductParameter& ip = p.inner_product_param();
      const int axis = CanonicalAxis(ip.axis(), static_cast<int>(shape_in(0).size()));
      CREMA_CHECK(axis == 1) << "layer '" << name << "' (InnerProduct): axis " << ip.axis()
                             << " cannot be written as ONNX yet (axis 1 only)";
      std::string x = in(0);
      if (shape_in(0).size() != 2) {
        NodeProto* flatten = nullptr;
        x = w_.Apply("Flatten", {x}, name + "/flat", &flatten);
        Int(flatten, "axis", 1);
      }
      const Blob& weights = param(0);
      std::vector<std::string> inputs = {x, w_.Constant(name + "/weights", Dims(weights.shape()), Values(weights))};
      if (ip.bias_term()) inputs.push_back(w_.Constant(name + "/bias", {param(1).count()}, Values(param(1))));
      NodeProto* gemm = one("Gemm", inputs);
      Int(gemm, "transB", ip.transpose() ? 0 : 1);
      return;
    }
    if (type == "Pooling") {
      Pooling(s, p.pooling_param(), name);
      return;
    }
    if (type == "ReLU") {
      const float slope = p.relu_param().negative_slope();
      if (slope == 0.f) {
        one("Relu", {in(0)});
      } else {
        Float(one("LeakyRelu", {in(0)}), "alpha", slope);
      }
      return;
    }
    if (type == "Sigmoid" || type == "TanH" || type == "AbsVal" || type == "BNLL") {
      const std::map<std::string, std::string> ops = {
          {"Sigmoid", "Sigmoid"}, {"TanH", "Tanh"}, {"AbsVal", "Abs"}, {"BNLL", "Softplus"}};
      one(ops.at(type), {in(0)});
      return;
    }
    if (type == "ELU") {
      Float(one("Elu", {in(0)}), "alpha", p.elu_param().alpha());
      return;
    }
    if (type == "PReLU") {
      const Blob& slope = param(0);
      const int rank = static_cast<int>(shape_in(0).size());
      const std::vector<int64_t> dims =
          p.prelu_param().channel_shared() ? std::vector<int64_t>{1} : BroadcastDims(slope.shape(), 1, rank);
      one("PRelu", {in(0), w_.Constant(name + "/slope", dims, Values(slope))});
      return;
    }
    if (type == "Power") {
      const PowerParameter& pw = p.power_param();
      const std::string x = Affine(in(0), pw.scale(), pw.shift(), name);
      if (pw.power() != 1.f) {
        one("Pow", {x, w_.Constant(name + "/power", {}, {pw.power()})});
      } else {
        one("Identity", {x});
      }
      return;
    }
    if (type == "Exp" || type == "Log") {
      // base^(shift + scale x) = e^(ln(base) (shift + scale x)); log_base(shift + scale x) = ln(...) / ln(base).
      const bool exp = type == "Exp";
      const float base = exp ? p.exp_param().base() : p.log_param().base();
      const float scale = exp ? p.exp_param().scale() : p.log_param().scale();
      const float shift = exp ? p.exp_param().shift() : p.log_param().shift();
      const double log_base = base == -1.f ? 1.0 : std::log(static_cast<double>(base));
      std::string x = Affine(in(0), scale, shift, name);
      if (exp && log_base != 1.0)
        x = w_.Apply("Mul", {x, w_.Constant(name + "/log_base", {}, {static_cast<float>(log_base)})}, name + "/scaled");
      if (exp || log_base == 1.0) {
        one(exp ? "Exp" : "Log", {x});
      } else {
        const std::string natural = w_.Apply("Log", {x}, name + "/ln");
        one("Mul", {natural, w_.Constant(name + "/per_log_base", {}, {static_cast<float>(1.0 / log_base)})});
      }
      return;
    }
    if (type == "Swish") {
      const float beta = p.swish_param().beta();
      const std::string scaled =
          beta == 1.f ? in(0) : w_.Apply("Mul", {in(0), w_.Constant(name + "/beta", {}, {beta})}, name + "/scaled");
      one("Mul", {in(0), w_.Apply("Sigmoid", {scaled}, name + "/gate")});
      return;
    }
    if (type == "Threshold") {
      // 1 where x > threshold, else 0.
      const std::string above = w_.Apply(
          "Greater", {in(0), w_.Constant(name + "/threshold", {}, {p.threshold_param().threshold()})}, name + "/above");
      Int(one("Cast", {above}), "to", TensorProto::FLOAT);
      return;
    }
    if (type == "Crop") {
      // The first input cut to the second's shape from `axis` on, at the offsets.
      const CropParameter& c = p.crop_param();
      const std::vector<int> shape = shape_in(0), reference = shape_out(0);
      const int axis = CanonicalAxis(c.axis(), static_cast<int>(shape.size()));
      std::vector<int64_t> starts, ends, axes;
      for (int a = axis; a < static_cast<int>(shape.size()); ++a) {
        const int64_t offset = c.offset_size() == 0 ? 0 : c.offset_size() == 1 ? c.offset(0) : c.offset(a - axis);
        starts.push_back(offset);
        ends.push_back(offset + reference[a]);
        axes.push_back(a);
      }
      one("Slice", {in(0), w_.Integers(name + "/starts", starts), w_.Integers(name + "/ends", ends),
                    w_.Integers(name + "/axes", axes)});
      return;
    }
    if (type == "Slice") {
      const SliceParameter& sp = p.slice_param();
      const int rank = static_cast<int>(shape_in(0).size());
      const int axis = CanonicalAxis(sp.has_slice_dim() ? static_cast<int>(sp.slice_dim()) : sp.axis(), rank);
      std::vector<int64_t> sizes;
      std::vector<std::string> outputs;
      for (size_t k = 0; k < step.tops.size(); ++k) {
        sizes.push_back(shape_out(static_cast<int>(k))[axis]);
        outputs.push_back(out(static_cast<int>(k)));
      }
      Int(w_.Node("Split", {in(0), w_.Integers(name + "/split", sizes)}, outputs, name), "axis", axis);
      return;
    }
    if (type == "Tile") {
      const int rank = static_cast<int>(shape_in(0).size());
      std::vector<int64_t> repeats(static_cast<size_t>(rank), 1);
      repeats[CanonicalAxis(p.tile_param().axis(), rank)] = p.tile_param().tiles();
      one("Tile", {in(0), w_.Integers(name + "/repeats", repeats)});
      return;
    }
    if (type == "Reduction") {
      // Over every axis from `axis` on, to the shape before it, times coeff.
      const ReductionParameter& r = p.reduction_param();
      const int rank = static_cast<int>(shape_in(0).size());
      const int axis = CanonicalAxis(r.axis(), rank);
      std::vector<int64_t> axes;
      for (int a = axis; a < rank; ++a) axes.push_back(a);
      const bool scaled = r.coeff() != 1.f;
      std::string reduced;
      NodeProto* node = nullptr;
      const auto reduce = [&](const std::string& op, const std::vector<std::string>& inputs) {
        if (scaled) {
          reduced = w_.Apply(op, inputs, name + "/reduced", &node);
        } else {
          node = one(op, inputs);
        }
      };
      if (r.operation() == ReductionParameter::SUM) {
        reduce("ReduceSum", {in(0), w_.Integers(name + "/axes", axes)});  // opset 13: its axes an input
      } else {
        reduce(r.operation() == ReductionParameter::ASUM    ? "ReduceL1"
               : r.operation() == ReductionParameter::SUMSQ ? "ReduceSumSquare"
                                                            : "ReduceMean",
               {in(0)});
        Ints(node, "axes", axes);
      }
      Int(node, "keepdims", 0);
      if (scaled) one("Mul", {reduced, w_.Constant(name + "/coeff", {}, {r.coeff()})});
      return;
    }
    if (type == "ArgMax") {
      const ArgMaxParameter& a = p.argmax_param();
      CREMA_CHECK(a.top_k() == 1 && !a.out_max_val())
          << "layer '" << name << "' (ArgMax): top_k " << a.top_k() << (a.out_max_val() ? " with out_max_val" : "")
          << " has no ONNX operator (ONNX's ArgMax gives the index of the largest only)";
      const int rank = static_cast<int>(shape_in(0).size());
      std::string x = in(0);
      const int axis = a.has_axis() ? CanonicalAxis(a.axis(), rank) : 1;
      if (!a.has_axis() && rank != 2) {
        NodeProto* flatten = nullptr;
        x = w_.Apply("Flatten", {x}, name + "/flat", &flatten);
        Int(flatten, "axis", 1);
      }
      NodeProto* argmax = nullptr;
      const std::string index = w_.Apply("ArgMax", {x}, name + "/index", &argmax);
      Int(argmax, "axis", axis);
      Int(argmax, "keepdims", 1);
      NodeProto* cast = nullptr;
      const std::string as_float = w_.Apply("Cast", {index}, name + "/float", &cast);
      Int(cast, "to", TensorProto::FLOAT);
      // Caffe's shape: (N, 1, 1) without an axis; the input's with 1 on the axis with one.
      std::vector<int64_t> dims = Dims(shape_out(0));
      if (!dims.empty() && dims[0] == shape_in(0)[0]) dims[0] = 0;
      one("Reshape", {as_float, w_.Integers(name + "/shape", dims)});
      return;
    }
    if (type == "Clip") {
      one("Clip", {in(0), w_.Constant(name + "/min", {}, {p.clip_param().min()}),
                   w_.Constant(name + "/max", {}, {p.clip_param().max()})});
      return;
    }
    if (type == "Softmax") {
      Int(one("Softmax", {in(0)}), "axis",
          CanonicalAxis(p.softmax_param().axis(), static_cast<int>(shape_in(0).size())));
      return;
    }
    if (type == "LRN") {
      const LRNParameter& lrn = p.lrn_param();
      CREMA_CHECK(lrn.norm_region() == LRNParameter::ACROSS_CHANNELS)
          << "layer '" << name << "' (LRN): norm_region WITHIN_CHANNEL has no ONNX operator (ONNX's LRN normalises "
          << "across channels only)";
      NodeProto* node = one("LRN", {in(0)});
      Int(node, "size", lrn.local_size());
      Float(node, "alpha", lrn.alpha());
      Float(node, "beta", lrn.beta());
      Float(node, "bias", lrn.k());
      return;
    }
    if (type == "Concat") {
      const ConcatParameter& c = p.concat_param();
      const int axis = c.has_concat_dim() ? static_cast<int>(c.concat_dim()) : c.axis();
      std::vector<std::string> inputs;
      for (size_t k = 0; k < step.bottoms.size(); ++k) inputs.push_back(in(static_cast<int>(k)));
      Int(one("Concat", inputs), "axis", CanonicalAxis(axis, static_cast<int>(shape_in(0).size())));
      return;
    }
    if (type == "Eltwise") {
      const EltwiseParameter& e = p.eltwise_param();
      std::vector<std::string> inputs;
      for (size_t k = 0; k < step.bottoms.size(); ++k) {
        std::string x = in(static_cast<int>(k));
        if (e.operation() == EltwiseParameter::SUM && e.coeff_size() > 0 && e.coeff(static_cast<int>(k)) != 1.f)
          x = w_.Apply("Mul", {x, w_.Constant(name + "/coeff", {}, {e.coeff(static_cast<int>(k))})}, name + "/term");
        inputs.push_back(x);
      }
      one(e.operation() == EltwiseParameter::SUM    ? "Sum"
          : e.operation() == EltwiseParameter::PROD ? "Mul"
                                                    : "Max",
          inputs.size() > 2 && e.operation() == EltwiseParameter::PROD ? Product(inputs, name) : inputs);
      return;
    }
    if (type == "BatchNorm") {
      const Blob& factor_blob = param(2);
      const float factor = factor_blob.cpu_data()[0];
      const float scale = factor == 0.f ? 0.f : 1.f / factor;
      std::vector<float> mean = Values(param(0)), variance = Values(param(1));
      for (float& v : mean) v *= scale;
      for (float& v : variance) v *= scale;
      const int64_t channels = static_cast<int64_t>(mean.size());
      NodeProto* node =
          one("BatchNormalization",
              {in(0), w_.Constant(name + "/gamma", {channels}, std::vector<float>(mean.size(), 1.f)),
               w_.Constant(name + "/beta", {channels}, std::vector<float>(mean.size(), 0.f)),
               w_.Constant(name + "/mean", {channels}, mean), w_.Constant(name + "/variance", {channels}, variance)});
      Float(node, "epsilon", p.batch_norm_param().eps());
      return;
    }
    if (type == "Scale" || type == "Bias") {
      const int rank = static_cast<int>(shape_in(0).size());
      const int axis = CanonicalAxis(type == "Scale" ? p.scale_param().axis() : p.bias_param().axis(), rank);
      if (step.bottoms.size() == 2) {
        // The second bottom broadcast from `axis` on: reshaped to its sizes followed by ones.
        const std::string factor =
            w_.Apply("Reshape", {in(1), w_.Integers(name + "/shape", BroadcastDims(shape_in(1), axis, rank))},
                     name + "/broadcast");
        one(type == "Scale" ? "Mul" : "Add", {in(0), factor});
        return;
      }
      const Blob& first = param(0);
      const std::vector<int64_t> dims = BroadcastDims(first.shape(), axis, rank);
      if (type == "Bias") {
        one("Add", {in(0), w_.Constant(name + "/bias", dims, Values(first))});
        return;
      }
      if (!p.scale_param().bias_term()) {
        one("Mul", {in(0), w_.Constant(name + "/scale", dims, Values(first))});
        return;
      }
      const std::string scaled =
          w_.Apply("Mul", {in(0), w_.Constant(name + "/scale", dims, Values(first))}, name + "/scaled");
      one("Add", {scaled, w_.Constant(name + "/bias", dims, Values(param(1)))});
      return;
    }
    if (type == "Flatten" || type == "Reshape") {
      // To the shape the net gives, the first axis copied (0) where it is the input's: any batch size.
      std::vector<int64_t> dims = Dims(shape_out(0));
      if (!dims.empty() && !shape_in(0).empty() && dims[0] == shape_in(0)[0]) dims[0] = 0;
      one("Reshape", {in(0), w_.Integers(name + "/shape", dims)});
      return;
    }
    CREMA_FAIL() << "layer '" << name << "' (" << type << "): crema export cannot write " << type
                 << " layers as ONNX (docs/compatibility.md lists the types it writes)";
  }

  // The name of output blob `id` in the model: its final value, copied under the blob's name where a copy (Dropout,
  // Split) wrote it last.
  std::string OutputName(int id) {
    const std::string value = w_.Value(id);
    const std::string& blob = net_.blob_names()[id];
    if (value == blob) return value;
    const std::string name = w_.Unique(blob);
    w_.Node("Identity", {value}, {name}, blob);
    return name;
  }

 private:
  // shift + scale x, the neutral parts left out.
  std::string Affine(const std::string& x, float scale, float shift, const std::string& name) {
    std::string y = x;
    if (scale != 1.f) y = w_.Apply("Mul", {y, w_.Constant(name + "/scale", {}, {scale})}, name + "/scaled");
    if (shift != 0.f) y = w_.Apply("Add", {y, w_.Constant(name + "/shift", {}, {shift})}, name + "/shifted");
    return y;
  }

  // A product of several values, pairwise.
  std::vector<std::string> Product(const std::vector<std::string>& inputs, const std::string& name) {
    std::string product = inputs[0];
    for (size_t k = 1; k + 1 < inputs.size(); ++k) product = w_.Apply("Mul", {product, inputs[k]}, name + "/product");
    return {product, inputs.back()};
  }

  void Pooling(int s, const PoolingParameter& pool, const std::string& name) {
    const PlanStep& step = net_.plan()[s];
    const std::vector<int> input = net_.blobs()[step.bottoms[0]]->shape();
    const std::vector<int> output = net_.blobs()[step.tops[0]]->shape();
    const std::string x = w_.Value(step.bottoms[0]);
    CREMA_CHECK(pool.pool() != PoolingParameter::STOCHASTIC)
        << "layer '" << name << "' (Pooling): STOCHASTIC pooling has no ONNX operator";
    const bool max = pool.pool() == PoolingParameter::MAX;
    if (pool.global_pooling()) {
      w_.Node(max ? "GlobalMaxPool" : "GlobalAveragePool", {x}, {w_.Output(s, step.tops[0])}, name);
      return;
    }
    const int axes = static_cast<int>(input.size()) - 2;
    CREMA_CHECK(axes == 2) << "layer '" << name << "' (Pooling): " << input.size() << "-axis pooling is not written";
    const std::vector<int64_t> kernel = {pool.has_kernel_h() ? pool.kernel_h() : pool.kernel_size(),
                                         pool.has_kernel_w() ? pool.kernel_w() : pool.kernel_size()};
    const std::vector<int64_t> stride = {pool.has_stride_h() ? pool.stride_h() : pool.stride(),
                                         pool.has_stride_w() ? pool.stride_w() : pool.stride()};
    const std::vector<int64_t> pad = {pool.has_pad_h() ? pool.pad_h() : pool.pad(),
                                      pool.has_pad_w() ? pool.pad_w() : pool.pad()};
    // The end padding that gives Caffe's output size with ONNX's rounding down: Caffe rounds up (its last window
    // may overhang the padded input) or down (round_mode).
    std::vector<int64_t> end(2);
    bool padded = false;
    for (int a = 0; a < 2; ++a) {
      end[a] = std::max<int64_t>(0, (output[2 + a] - 1) * stride[a] + kernel[a] - input[2 + a] - pad[a]);
      padded = padded || pad[a] > 0;
    }
    NodeProto* node = nullptr;
    if (max || !padded) {
      // A maximum ignores padding; an average without padding divides by the window within the input, as Caffe's
      // (the end padding of an overhanging window not counted).
      node = w_.Node(max ? "MaxPool" : "AveragePool", {x}, {w_.Output(s, step.tops[0])}, name);
      Ints(node, "pads", {pad[0], pad[1], end[0], end[1]});
      if (!max) Int(node, "count_include_pad", 0);
    } else {
      // Caffe divides by the window within the padded input: the padding made real zeros by a Pad node (counted), an
      // overhang beyond it end padding (not counted). Readers differ on count_include_pad (some decide by the
      // producer), never on a Pad node.
      const std::string padded_x = w_.Apply(
          "Pad", {x, w_.Integers(name + "/pads", {0, 0, pad[0], pad[1], 0, 0, pad[0], pad[1]})}, name + "/padded");
      node = w_.Node("AveragePool", {padded_x}, {w_.Output(s, step.tops[0])}, name);
      Ints(node, "pads", {0, 0, std::max<int64_t>(0, end[0] - pad[0]), std::max<int64_t>(0, end[1] - pad[1])});
      Int(node, "count_include_pad", 0);
    }
    Ints(node, "kernel_shape", kernel);
    Ints(node, "strides", stride);
  }

  const Net& net_;
  Writer w_;
};

void ValueInfo(onnx::ValueInfoProto* info, const std::string& name, const std::vector<int>& shape, bool dynamic) {
  info->set_name(name);
  auto* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(TensorProto::FLOAT);
  auto* dims = tensor->mutable_shape();
  for (size_t a = 0; a < shape.size(); ++a) {
    auto* dim = dims->add_dim();
    if (a == 0 && dynamic) {
      dim->set_dim_param("batch");
    } else {
      dim->set_dim_value(shape[a]);
    }
  }
}

ModelProto ExportPlain(const Net& net, const OnnxExportOptions& options);

}  // namespace

ModelProto ExportOnnx(const Net& net, const OnnxExportOptions& options) {
  if (net.rewrites().empty()) return ExportPlain(net, options);
  // A folded net: as crema fold writes it (its convolutions with the BatchNorms folded in and the activations
  // after them), built again as plain layers.
  NetParameter folded = FoldedNetParameter(net);
  folded.mutable_state()->set_phase(TEST);
  folded.set_fold(false);
  // Split layers the folded net kept go (the net inserts its own): their readers read the blob they copy.
  std::map<std::string, std::string> copied;
  NetParameter definition = folded;
  definition.clear_layer();
  for (const LayerParameter& layer : folded.layer()) {
    if (layer.type() == "Split") {
      for (const std::string& top : layer.top()) copied[top] = layer.bottom(0);
      continue;
    }
    LayerParameter* kept = definition.add_layer();
    *kept = layer;
    for (std::string& bottom : *kept->mutable_bottom())
      while (copied.count(bottom)) bottom = copied.at(bottom);
  }
  for (LayerParameter& layer : *definition.mutable_layer()) {
    layer.clear_blobs();
    // The inputs as the net has them now (a batch reshaped since it was built).
    if (layer.type() != "Input") continue;
    layer.mutable_input_param()->clear_shape();
    for (const std::string& top : layer.top()) {
      BlobShape* shape = layer.mutable_input_param()->add_shape();
      for (int dim : net.blob_by_name(top)->shape()) shape->add_dim(dim);
    }
  }
  auto context = std::make_shared<Context>(Device::kCPU, 0);
  context->set_fold(false);
  Net plain(definition, context);
  plain.CopyTrainedLayersFrom(folded);
  return ExportPlain(plain, options);
}

namespace {

ModelProto ExportPlain(const Net& net, const OnnxExportOptions& options) {
  CREMA_CHECK(options.opset >= 13) << "crema export writes opset 13 or later, not " << options.opset;
  ModelProto model;
  model.set_ir_version(7);
  model.set_producer_name("crema");
  model.set_producer_version("1");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset);
  GraphProto* graph = model.mutable_graph();
  graph->set_name(net.name().empty() ? "crema" : net.name());
  Exporter exporter(net, graph);
  // Inputs: the Input layers' tops, under their names.
  const auto& plan = net.plan();
  for (size_t s = 0; s < plan.size(); ++s) {
    if (std::string(net.layers()[plan[s].layer]->type()) != "Input") continue;
    for (int top : plan[s].tops)
      ValueInfo(graph->add_input(), net.blob_names()[top], net.blobs()[top]->shape(), options.dynamic_batch);
  }
  for (size_t s = 0; s < plan.size(); ++s) exporter.Step(static_cast<int>(s));
  for (int id : net.output_blob_indices())
    ValueInfo(graph->add_output(), exporter.OutputName(id), net.blobs()[id]->shape(), options.dynamic_batch);
  return model;
}

}  // namespace

void WriteOnnx(const Net& net, const std::string& path, const OnnxExportOptions& options) {
  const ModelProto model = ExportOnnx(net, options);
  std::string bytes;
  CREMA_CHECK(model.SerializeToString(&bytes)) << "cannot serialize the ONNX model of net '" << net.name() << "'";
  WriteStringToFileAtomically(bytes, path);
}

}  // namespace crema
