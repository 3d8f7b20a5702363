#include "layers/layer_registry.hpp"

namespace crema {

LayerRegistry& LayerRegistry::Global() {
  static LayerRegistry* registry = [] {
    auto* created = new LayerRegistry;
    RegisterBuiltinLayers(created);
    return created;
  }();
  return *registry;
}

void LayerRegistry::Add(const std::string& type, Creator creator) {
  CREMA_CHECK(!creators_.count(type)) << "layer type '" << type << "' is registered twice";
  creators_[type] = std::move(creator);
}

std::vector<std::string> LayerRegistry::Types() const {
  std::vector<std::string> types;
  for (const auto& entry : creators_) types.push_back(entry.first);
  return types;
}

std::unique_ptr<Layer> LayerRegistry::Create(const LayerParameter& param) const {
  auto found = creators_.find(param.type());
  if (found == creators_.end()) {
    std::string known;
    for (const auto& type : Types()) known += (known.empty() ? "" : ", ") + type;
    CREMA_FAIL() << "layer '" << param.name() << "' has unknown type '" << param.type()
                 << "'; known types: " << known;
  }
  return found->second(param);
}

}  // namespace crema
