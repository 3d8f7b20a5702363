// Creates layers by their type name. Every built-in layer is listed explicitly in layer_list.cpp (no static
// initializers, so nothing is silently dropped when linking a static library).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.hpp"

namespace crema {

class LayerRegistry {
 public:
  using Creator = std::function<std::unique_ptr<Layer>(const LayerParameter&)>;

  // The registry holding every built-in layer.
  static LayerRegistry& Global();

  void Add(const std::string& type, Creator creator);
  bool Has(const std::string& type) const { return creators_.count(type) > 0; }
  // Throws crema::Error naming the layer, the unknown type and every known type.
  std::unique_ptr<Layer> Create(const LayerParameter& param) const;
  std::vector<std::string> Types() const;

  template <typename LayerType>
  void Add(const std::string& type) {
    Add(type, [](const LayerParameter& param) { return std::unique_ptr<Layer>(new LayerType(param)); });
  }

 private:
  std::map<std::string, Creator> creators_;
};

// Defined in layer_list.cpp: registers every built-in layer type.
void RegisterBuiltinLayers(LayerRegistry* registry);

}  // namespace crema
