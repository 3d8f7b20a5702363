// The one list of built-in layers. Adding a layer: include its header and add one line here.
#include "layers/layer_registry.hpp"

namespace crema {

void RegisterBuiltinLayers(LayerRegistry* registry) {
  (void)registry;
}

}  // namespace crema
