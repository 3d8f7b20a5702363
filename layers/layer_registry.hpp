// Creates layers by their type name. Every built-in layer is listed explicitly in layer_list.cpp (no static
// initializers, so nothing is silently dropped when linking a static library).
//
// A type has an ordered list of engines, most specialised first and the reference last (oneDNN's
// implementation lists): cuDNN / CUDA kernels / im2col+BLAS / plain loops, say. Each engine is a Layer class
// with the devices it runs on and a check of the parameters and bottom shapes it accepts. For a layer, the
// first engine that runs on the context's device and accepts wins, unless
//   - the context forces one (crema's --engine=NAME or --engine=TYPE:NAME): then that engine or an error
//     saying why it cannot serve; a bare NAME applies to every type that has such an engine, where it accepts;
//   - the layer's Caffe `engine` field (convolution_param.engine, ...) says CAFFE (crema's own engines, not
//     cuDNN's) or CUDNN (cuDNN's, where the device has it; otherwise the default order, as Caffe's CPU mode).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.hpp"

namespace crema {

// What an engine is asked to accept: the layer's parameters, its bottoms' shapes and the device.
struct EngineQuery {
  const LayerParameter& param;
  const std::vector<std::vector<int>>& bottom_shapes;
  Device device;
};

// The devices an engine runs on.
enum DeviceSet : unsigned { kCpuOnly = 1u, kGpuOnly = 2u, kCpuAndGpu = 3u };

// Which value of Caffe's `engine` enum an engine answers to.
enum class CaffeEngine { kCaffe = 1, kCudnn = 2 };

struct EngineSpec {
  using Refusal = std::function<std::string(const EngineQuery&)>;
  EngineSpec(std::string name, unsigned devices = kCpuOnly, CaffeEngine caffe_engine = CaffeEngine::kCaffe,
             Refusal refusal = nullptr)
      : name(std::move(name)), devices(devices), caffe_engine(caffe_engine), refusal(std::move(refusal)) {}
  std::string name;
  unsigned devices;
  CaffeEngine caffe_engine;
  // "" when the engine accepts the query, else why it does not (shown when a forced engine cannot serve).
  Refusal refusal;
};

class LayerRegistry {
 public:
  using Creator = std::function<std::unique_ptr<Layer>(const LayerParameter&, std::shared_ptr<Context>)>;
  struct Engine {
    EngineSpec spec;
    Creator create;
  };

  // The registry holding every built-in layer.
  static LayerRegistry& Global();

  // Appends an engine to `type`'s list (so the first added is tried first).
  void Add(const std::string& type, EngineSpec spec, Creator creator);
  template <typename LayerType>
  void Add(const std::string& type, EngineSpec spec) {
    Add(type, std::move(spec), [](const LayerParameter& param, std::shared_ptr<Context> context) {
      return std::unique_ptr<Layer>(new LayerType(param, std::move(context)));
    });
  }

  // Creates the engine chosen for `param` (see above) on `context`, given its bottoms' shapes. Throws
  // crema::Error naming the layer and the unknown type (with every known type), or each engine's refusal.
  std::unique_ptr<Layer> Create(const LayerParameter& param, const std::vector<std::vector<int>>& bottom_shapes,
                                std::shared_ptr<Context> context) const;
  std::vector<std::string> Types() const;
  // The engine names of `type`, in order ({} for an unknown type).
  std::vector<std::string> Engines(const std::string& type) const;
  // Those of them that run on `device`, in order.
  std::vector<std::string> Engines(const std::string& type, Device device) const;
  // "" when engine `engine` of the query's type would serve the query, else why not (tests: the conformance
  // harness asks it of GPU queries when it rehearses GPU code on the host).
  std::string Refusal(const std::string& engine, const EngineQuery& query) const;

 private:
  const Engine* Choose(const LayerParameter& param, const EngineQuery& query, const Context& context) const;
  std::map<std::string, std::vector<Engine>> engines_;
};

// The value of Caffe's `engine` field in the layer's own parameter message (DEFAULT = 0 when unset or absent).
int CaffeEngineField(const LayerParameter& param);

// Defined in layer_list.cpp: registers every built-in layer type.
void RegisterBuiltinLayers(LayerRegistry* registry);

}  // namespace crema
