// crema.Net: build a net from a prototxt, feed it numpy arrays, run it forward and backward (whole, or from one
// layer to another), read and write its blobs and parameters, load and save weights.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "io/proto_io.hpp"
#include "io/snapshot_io.hpp"
#include "layers/data/memory_data.hpp"
#include "net/memory_plan.hpp"
#include "onnx/export.hpp"
#include "onnx/import.hpp"

namespace crema {
namespace python {

namespace {

Phase ToPhase(int phase) {
  CREMA_CHECK(phase == TRAIN || phase == TEST) << "phase must be crema.TRAIN (0) or crema.TEST (1), got " << phase;
  return static_cast<Phase>(phase);
}

BlobHandle HandleOf(const NetHandle& net, int id) {
  return BlobHandle{net.owner, net.net->blobs()[id].get(), net.net->blob_names()[id]};
}

int BlobId(const Net& net, const Blob* blob) {
  for (size_t id = 0; id < net.blobs().size(); ++id)
    if (net.blobs()[id].get() == blob) return static_cast<int>(id);
  return -1;
}

// The plan step that runs layer `name` (its first, should a pass ever split a layer's work), or the layer rewritten
// for inference that stands for it.
size_t StepOf(const Net& net, const std::string& name) {
  CREMA_CHECK(net.has_layer(name)) << "net '" << net.name() << "' has no layer '" << name << "'";
  const Layer* layer = net.layer_by_name(name);
  for (size_t step = 0; step < net.plan().size(); ++step)
    if (net.layers()[net.rewrite_of(net.plan()[step].layer)].get() == layer) return step;
  for (const PlanStep& step : net.plan())
    for (int absorbed : net.absorbed(step.layer))
      CREMA_CHECK(net.layers()[absorbed].get() != layer)
          << "layer '" << name << "' of net '" << net.name() << "' was folded or fused into layer '"
          << net.layer_names()[step.layer] << "' (net.rewrites); to run from or to it, make the net after "
          << "crema.set_fold(False)";
  CREMA_FAIL() << "layer '" << name << "' of net '" << net.name() << "' has no step in the plan"
               << (net.rewrites().empty() ? "" : " (the inference rewrites removed it: net.rewrites)");
  return 0;
}

// Whether layer `l` is one of the prototxt's (or a Split), not a layer rewritten for inference standing for one.
bool ShownLayer(const Net& net, size_t l) { return net.rewrite_of(static_cast<int>(l)) == static_cast<int>(l); }

// Pycaffe's net.blobs: the blobs the prototxt names (every top), not the copies the net's passes added (Split
// tops) nor the layers' internal blobs.
py::object Blobs(const NetHandle& h) {
  std::set<int> internal;
  for (const PlanStep& step : h.net->plan()) internal.insert(step.internals.begin(), step.internals.end());
  py::object blobs = py::module_::import("collections").attr("OrderedDict")();
  for (size_t id = 0; id < h.net->blobs().size(); ++id) {
    const std::string& name = h.net->blob_names()[id];
    if (internal.count(static_cast<int>(id)) || h.net->UserBlobName(name) != name) continue;
    blobs[py::str(name)] = HandleOf(h, static_cast<int>(id));
  }
  return blobs;
}

py::object Params(const NetHandle& h) {
  py::object params = py::module_::import("collections").attr("OrderedDict")();
  const auto& layers = h.net->layers();
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l]->params().empty() || !ShownLayer(*h.net, l)) continue;
    py::list blobs;
    for (size_t i = 0; i < layers[l]->params().size(); ++i)
      blobs.append(
          BlobHandle{h.owner, layers[l]->params()[i].get(), h.net->layer_names()[l] + "[" + std::to_string(i) + "]"});
    params[py::str(h.net->layer_names()[l])] = blobs;
  }
  return params;
}

std::vector<int> InputIds(const Net& net) {
  std::vector<int> ids;
  for (const Blob* blob : net.input_blobs()) ids.push_back(BlobId(net, blob));
  return ids;
}

std::vector<std::string> InputNames(const Net& net) {
  std::vector<std::string> names;
  for (const int id : InputIds(net)) names.push_back(net.blob_names()[id]);
  return names;
}

std::vector<std::string> OutputNames(const Net& net) {
  std::vector<std::string> names;
  for (const int id : net.output_blob_indices()) names.push_back(net.blob_names()[id]);
  return names;
}

// Copies `values` into the data (or diff) of blob `name`, reshaping the blob to the array's shape where they
// differ (the net's later layers follow on the next forward).
void Feed(Net& net, const std::string& name, const py::handle& values, bool diff) {
  Blob* blob = net.blob_by_name(name);
  auto array = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(values);
  CREMA_CHECK(array) << "blob '" << name << "': the value given is not convertible to a float32 array";
  std::vector<int> shape;
  for (py::ssize_t axis = 0; axis < array.ndim(); ++axis) {
    CREMA_CHECK(array.shape(axis) <= INT32_MAX)
        << "blob '" << name << "': the array's axis " << axis << " is too large (" << array.shape(axis) << ")";
    shape.push_back(static_cast<int>(array.shape(axis)));
  }
  if (shape != blob->shape()) {
    CREMA_CHECK(!diff) << "blob '" << name << "': a gradient of shape " << ShapeString(shape)
                       << " was given for a blob of shape " << blob->shape_string();
    blob->Reshape(shape);
  }
  CREMA_CHECK(blob->layout() == Layout::kPlain) << "blob '" << name << "' is kept in " << LayoutName(blob->layout())
                                                << " between two oneDNN layers; feed it plain";
  if (blob->count() == 0) return;
  float* target = diff ? blob->mutable_cpu_diff() : blob->mutable_cpu_data();
  std::memcpy(target, array.data(), sizeof(float) * static_cast<size_t>(blob->count()));
}

// {name: data or diff} of blobs `ids`, each under the name the prototxt gave it: a Split copy that a layer reads
// shows as the blob it copies, though its gradient is the copy's own (the part that layer's backward gave).
py::dict Arrays(const NetHandle& h, const std::vector<int>& ids, bool diff) {
  py::dict arrays;
  for (const int id : ids) {
    BlobHandle handle = HandleOf(h, id);
    handle.name = h.net->UserBlobName(handle.name);
    arrays[py::str(handle.name)] = HostArray(handle, diff);
  }
  return arrays;
}

void CheckNotEmpty(const Net& net) {
  CREMA_CHECK(!net.plan().empty()) << "net '" << net.name() << "' has no layers to run";
}

py::dict Forward(const NetHandle& h, const py::object& start, const py::object& end, const py::kwargs& inputs) {
  Net& net = *h.net;
  CheckNotEmpty(net);
  for (const auto& item : inputs) Feed(net, item.first.cast<std::string>(), item.second, false);
  const size_t first = start.is_none() ? 0 : StepOf(net, start.cast<std::string>());
  const size_t last = end.is_none() ? net.plan().size() - 1 : StepOf(net, end.cast<std::string>());
  CREMA_CHECK(first <= last) << "forward: layer '" << start.cast<std::string>() << "' comes after layer '"
                             << end.cast<std::string>() << "'";
  CREMA_CHECK((first == 0 && last + 1 == net.plan().size()) || net.memory_plan() == nullptr)
      << "forward: net '" << net.name() << "' plans its memory (crema.set_memory_plan('share')), so it runs "
      << "whole: a pass from or to a layer would read blobs whose memory other blobs took";
  {
    py::gil_scoped_release release;
    if (first == 0 && last + 1 == net.plan().size()) {
      net.Forward();
    } else {
      for (size_t step = first; step <= last; ++step) net.ForwardStep(step);
    }
  }
  return Arrays(h, end.is_none() ? net.output_blob_indices() : net.plan()[last].tops, false);
}

// Backward from layer `start` (default: the last) down to layer `end` (default: the first), as pycaffe: the loss
// layers seed their own gradients; `diffs` set the gradients of output blobs first, for nets without a loss.
py::dict Backward(const NetHandle& h, const py::object& start, const py::object& end, const py::kwargs& diffs) {
  Net& net = *h.net;
  CheckNotEmpty(net);
  for (const auto& item : diffs) Feed(net, item.first.cast<std::string>(), item.second, true);
  const size_t first = start.is_none() ? net.plan().size() - 1 : StepOf(net, start.cast<std::string>());
  const size_t last = end.is_none() ? 0 : StepOf(net, end.cast<std::string>());
  CREMA_CHECK(first >= last) << "backward: layer '" << start.cast<std::string>() << "' comes before layer '"
                             << end.cast<std::string>() << "'";
  CREMA_CHECK((first + 1 == net.plan().size() && last == 0) || net.memory_plan() == nullptr)
      << "backward: net '" << net.name() << "' plans its memory (crema.set_memory_plan('share')), so it runs "
      << "whole: a pass from or to a layer would read blobs whose memory other blobs took";
  {
    py::gil_scoped_release release;
    if (first + 1 == net.plan().size() && last == 0) {
      net.Backward();
    } else {
      for (size_t step = first + 1; step-- > last;) net.BackwardStep(step);
    }
  }
  return Arrays(h, end.is_none() ? InputIds(net) : net.plan()[last].bottoms, true);
}

void Save(const Net& net, const std::string& path) {
  NetParameter weights;
  net.ToProto(&weights);
  const bool hdf5 = path.size() >= 3 && path.compare(path.size() - 3, 3, ".h5") == 0;
  WriteWeightsFile(weights, path, hdf5 ? SolverParameter::HDF5 : SolverParameter::BINARYPROTO);
}

std::vector<std::string> CopyFrom(Net& net, const std::string& path) {
  CREMA_CHECK(FileExists(path)) << "weights file '" << path << "' does not exist";
  py::gil_scoped_release release;
  return net.CopyTrainedLayersFrom(path);
}

// pycaffe's top_names / bottom_names: layer name -> the names (as the prototxt gives them) of the blobs the layer
// writes / reads, in the order the layers run.
py::object BlobNamesByLayer(const NetHandle& h, bool tops) {
  py::object names = py::module_::import("collections").attr("OrderedDict")();
  for (const PlanStep& step : h.net->plan()) {
    py::list list;
    for (const int id : tops ? step.tops : step.bottoms) list.append(h.net->UserBlobName(h.net->blob_names()[id]));
    names[py::str(h.net->layer_names()[step.layer])] = list;
  }
  return names;
}

// pycaffe's set_input_arrays: the items the net's first layer, a MemoryData layer, hands out from now on.
void SetInputArrays(const NetHandle& h, const py::array_t<float, py::array::c_style | py::array::forcecast>& data,
                    const py::array_t<float, py::array::c_style | py::array::forcecast>& labels) {
  Net& net = *h.net;
  auto* layer = net.layers().empty() ? nullptr : dynamic_cast<MemoryDataLayer*>(net.layers()[0].get());
  CREMA_CHECK(layer != nullptr) << "set_input_arrays: the first layer of net '" << net.name()
                                << "' is not a MemoryData layer";
  CREMA_CHECK(data.ndim() == 4) << "set_input_arrays: data must be 4-d (N x C x H x W), not " << data.ndim() << "-d";
  const py::ssize_t n = data.shape(0);
  CREMA_CHECK(data.shape(1) == layer->channels() && data.shape(2) == layer->height() &&
              data.shape(3) == layer->width())
      << "set_input_arrays: layer '" << layer->name() << "' takes items of " << layer->channels() << " x "
      << layer->height() << " x " << layer->width() << ", not " << data.shape(1) << " x " << data.shape(2) << " x "
      << data.shape(3);
  CREMA_CHECK(labels.size() == n) << "set_input_arrays: " << n << " items but " << labels.size() << " labels";
  CREMA_CHECK(n > 0 && n <= INT32_MAX && n % layer->batch_size() == 0)
      << "set_input_arrays: the number of items (" << n << ") must be a positive multiple of layer '"
      << layer->name() << "''s batch size " << layer->batch_size();
  layer->Reset(data.data(), labels.data(), static_cast<int>(n));
}

void LoadHdf5(Net& net, const std::string& path) {
  CREMA_CHECK(FileExists(path)) << "weights file '" << path << "' does not exist";
  NetParameter weights;
  ReadNetParameterFromHdf5File(path, &weights);
  py::gil_scoped_release release;
  net.CopyTrainedLayersFrom(weights);
}

NetHandle MakeNet(const std::string& prototxt, int phase, const py::object& weights, int level,
                  const std::vector<std::string>& stages) {
  CREMA_CHECK(FileExists(prototxt)) << "net file '" << prototxt << "' does not exist";
  const Phase net_phase = ToPhase(phase);
  std::shared_ptr<Context> context = MakeContext(ModuleDefaults().random_seed);
  std::shared_ptr<Net> net;
  {
    py::gil_scoped_release release;
    net = std::make_shared<Net>(prototxt, net_phase, level, stages, context);
  }
  if (!weights.is_none()) {
    CopyFrom(*net, py::module_::import("os").attr("fspath")(weights).cast<std::string>());
    // With its weights, a net that runs forward only is rewritten for inference (crema.set_fold).
    py::gil_scoped_release release;
    net->RunAfterWeightsPasses();
  }
  return NetHandle{net, net.get()};
}

}  // namespace

void BindNet(py::module_& module) {
  module.def(
      "import_onnx",
      [](const std::string& onnx, const std::string& prototxt, const std::string& weights) {
        ImportedNet imported;
        {
          py::gil_scoped_release release;
          imported = ImportOnnxFile(onnx);
        }
        WriteProtoToTextFile(imported.definition, prototxt);
        WriteProtoToBinaryFile(imported.weights, weights);
        std::vector<std::string> layers;
        for (const LayerParameter& layer : imported.definition.layer()) layers.push_back(layer.name());
        return layers;
      },
      py::arg("onnx"), py::arg("prototxt"), py::arg("weights"),
      "Maps an ONNX model onto crema's layers, as crema import does: writes the net definition (prototxt) and its "
      "weights (.caffemodel), which crema.Net(prototxt, crema.TEST, weights=weights) or fine-tuning reads; returns "
      "the layers' names.");
  py::class_<LayerHandle>(module, "Layer", "A layer of a net: its name, type, engine and parameter blobs.")
      .def_property_readonly("name", [](const LayerHandle& h) { return h.layer->name(); })
      .def_property_readonly("type", [](const LayerHandle& h) { return std::string(h.layer->type()); })
      .def_property_readonly("engine", [](const LayerHandle& h) { return h.layer->engine(); })
      .def_property_readonly("blobs",
                             [](const LayerHandle& h) {
                               py::list blobs;
                               for (size_t i = 0; i < h.layer->params().size(); ++i)
                                 blobs.append(BlobHandle{h.owner, h.layer->params()[i].get(),
                                                         h.layer->name() + "[" + std::to_string(i) + "]"});
                               return blobs;
                             })
      .def("__repr__",
           [](const LayerHandle& h) { return "<crema.Layer '" + h.layer->name() + "' (" + h.layer->type() + ")>"; });

  py::class_<NetHandle>(module, "Net",
                        "A net built from a prototxt: Net(prototxt, phase, level=0, stages=None, weights=None) or "
                        "pycaffe's Net(prototxt, weights, phase). It runs on the device crema.set_mode_cpu/gpu chose.")
      // pycaffe's order: Net(prototxt, phase, level=0, stages=None, weights=None).
      .def(py::init([](const std::string& prototxt, int phase, int level, const py::object& stages,
                       const py::object& weights) {
             std::vector<std::string> stage_names;
             if (!stages.is_none()) stage_names = stages.cast<std::vector<std::string>>();
             return MakeNet(prototxt, phase, weights, level, stage_names);
           }),
           py::arg("prototxt"), py::arg("phase"), py::arg("level") = 0, py::arg("stages") = py::none(),
           py::arg("weights") = py::none())
      .def(py::init([](const std::string& prototxt, const std::string& weights, int phase) {
             return MakeNet(prototxt, phase, py::str(weights), 0, {});
           }),
           py::arg("prototxt"), py::arg("weights"), py::arg("phase"))
      .def_property_readonly("name", [](const NetHandle& h) { return h.net->name(); })
      .def_property_readonly("phase", [](const NetHandle& h) { return static_cast<int>(h.net->phase()); })
      .def_property_readonly("blobs", &Blobs, "Ordered name -> Blob: every top the prototxt names.")
      .def_property_readonly("params", &Params, "Ordered layer name -> list of the layer's parameter Blobs.")
      .def_property_readonly("layers",
                             [](const NetHandle& h) {
                               py::list layers;
                               for (size_t l = 0; l < h.net->layers().size(); ++l)
                                 if (ShownLayer(*h.net, l))
                                   layers.append(LayerHandle{h.owner, h.net->layers()[l].get()});
                               return layers;
                             })
      .def_property_readonly("layer_names",
                             [](const NetHandle& h) {
                               std::vector<std::string> names;
                               for (size_t l = 0; l < h.net->layers().size(); ++l)
                                 if (ShownLayer(*h.net, l)) names.push_back(h.net->layer_names()[l]);
                               return names;
                             })
      .def_property_readonly(
          "rewrites", [](const NetHandle& h) { return h.net->rewrites(); },
          "What the inference rewrites did to the plan (crema.set_fold), one line each.")
      .def_property_readonly("top_names", [](const NetHandle& h) { return BlobNamesByLayer(h, true); })
      .def_property_readonly("bottom_names", [](const NetHandle& h) { return BlobNamesByLayer(h, false); })
      .def("_set_input_arrays", &SetInputArrays, py::arg("data"), py::arg("labels"))
      .def(
          "save_hdf5",
          [](const NetHandle& h, const std::string& path) {
            NetParameter weights;
            h.net->ToProto(&weights);
            WriteWeightsFile(weights, path, SolverParameter::HDF5);
          },
          py::arg("path"), "Writes the weights in Caffe's HDF5 layout, whatever the file's name.")
      .def(
          "load_hdf5", [](const NetHandle& h, const std::string& path) { LoadHdf5(*h.net, path); }, py::arg("path"),
          "Copies weights by layer name from a file in Caffe's HDF5 layout.")
      .def_property_readonly("inputs", [](const NetHandle& h) { return InputNames(*h.net); })
      .def_property_readonly("outputs", [](const NetHandle& h) { return OutputNames(*h.net); })
      .def("forward", &Forward, py::arg("start") = py::none(), py::arg("end") = py::none(),
           "forward(start=None, end=None, **inputs): copies each input array into the blob of that name (reshaping "
           "it to the array's shape), runs the layers from start to end (names; default all), and returns "
           "{name: data} of the net's outputs, or of end's tops.")
      .def("backward", &Backward, py::arg("start") = py::none(), py::arg("end") = py::none(),
           "backward(start=None, end=None, **diffs): sets the given output gradients, runs backward from layer "
           "start down to layer end, and returns {name: diff} of the net's inputs, or of end's bottoms. Parameter "
           "gradients accumulate: see clear_param_diffs().")
      .def(
          "reshape",
          [](const NetHandle& h) {
            py::gil_scoped_release release;
            h.net->Reshape();
          },
          "Reshapes every layer after an input changed shape (forward does this itself).")
      .def("clear_param_diffs", [](const NetHandle& h) { h.net->ClearParamDiffs(); })
      .def(
          "plan_memory", [](const NetHandle& h, bool backward) { h.net->PlanMemory(backward); }, py::arg("backward"),
          "Plans the net's memory again, for forward and backward passes or (backward=False) forward alone, which "
          "frees every activation after its last reader and refuses backward().")
      .def(
          "keep_blobs", [](const NetHandle& h, const std::vector<std::string>& names) { h.net->KeepBlobs(names); },
          py::arg("names"), "Keeps these blobs readable after each pass under the net's memory plan.")
      .def_property_readonly(
          "memory_plan",
          [](const NetHandle& h) -> py::object {
            const MemoryPlan* plan = h.net->memory_plan();
            if (plan == nullptr) return py::none();
            py::dict summary;
            summary["backward"] = plan->with_backward;
            summary["planned_bytes"] = plan->planned_bytes();
            summary["unplanned_bytes"] = plan->unplanned_bytes;
            summary["arena_bytes"] = plan->arena_bytes;
            summary["in_place"] = plan->in_place;
            summary["replays"] = plan->schedule.replays;
            std::vector<std::string> replayed;
            for (size_t s = 0; s < plan->schedule.replayed.size(); ++s)
              if (plan->schedule.replayed[s]) replayed.push_back(h.net->layer_names()[h.net->plan()[s].layer]);
            summary["replayed"] = replayed;
            return std::move(summary);
          },
          "None, or the plan: {'backward', 'planned_bytes', 'unplanned_bytes', 'arena_bytes', 'in_place', 'replays', "
          "'replayed'}: the bytes, how many buffers run in place, and under recompute how many layers, and which, "
          "run forward again in backward.")
      .def_property_readonly(
          "held_buffers",
          [](const NetHandle& h) {
            py::list held;
            for (const Net::HeldBuffer& buffer : h.net->HeldBuffers())
              held.append(py::make_tuple(h.net->layer_names()[buffer.layer], buffer.buffer.what, buffer.buffer.bytes,
                                         buffer.buffer.device == Device::kGPU ? "gpu" : "cpu"));
            return held;
          },
          "What the layers hold beside the memory plan for their whole life, largest first: (layer, what, bytes, "
          "'cpu' or 'gpu') for batches read ahead, weights reordered for an engine, data given to MemoryData.")
      .def(
          "save", [](const NetHandle& h, const std::string& path) { Save(*h.net, path); }, py::arg("path"),
          "Writes the weights as a .caffemodel (binary), or in Caffe's HDF5 layout where the name ends in .h5.")
      .def(
          "to_onnx",
          [](const NetHandle& h, const std::string& path, int opset, bool dynamic_batch) {
            OnnxExportOptions options;
            options.opset = opset;
            options.dynamic_batch = dynamic_batch;
            WriteOnnx(*h.net, path, options);
          },
          py::arg("path"), py::arg("opset") = 13, py::arg("dynamic_batch") = false,
          "Writes the net and its weights as an ONNX model (as crema export does; a folded net as crema fold writes "
          "it); dynamic_batch names the first dimension so that any batch size runs.")
      .def(
          "copy_from", [](const NetHandle& h, const std::string& path) { return CopyFrom(*h.net, path); },
          py::arg("path"),
          "Copies weights by layer name from a .caffemodel or .caffemodel.h5; returns the layers copied.")
      .def(
          "share_with", [](const NetHandle& h, const NetHandle& other) { h.net->ShareTrainedLayersWith(*other.net); },
          py::arg("other"), "Makes this net use other's parameter memory for every layer the two share.")
      .def("__repr__", [](const NetHandle& h) {
        return "<crema.Net '" + h.net->name() + "' (" + (h.net->phase() == TRAIN ? "TRAIN" : "TEST") + ", " +
               std::to_string(h.net->layers().size()) + " layers)>";
      });
}

}  // namespace python
}  // namespace crema
