// The fuse_elements parameter pass (NetParameter.fuse_elements): runs of element layers become one Expression layer
// (layers/common/expression.hpp). A run is two or more consecutive layers of the types below, each with one bottom
// and one top, no parameters, no loss weight, no propagate_down, no forced engine and no recompute setting, each
// reading the top of the one before, which no other layer reads; the run's input and output are different blob
// names (a run entirely in place on its input is left as it is). The Expression layer reads the run's input
// (called x in the formula), writes the run's last top, and is named after the layers it replaces ("p1+t+p2").
// Formulas keep each layer's value and gradient, also at its kinks (ReLU's and ELU's at 0 as Caffe's).
#pragma once

#include <string>

#include "core/common.hpp"

namespace crema {

// The formula of one element layer applied to `x` (a formula in parentheses, or a name), or "" where the layer is
// not of a type the pass fuses (or has a setting it does not: a forced engine).
std::string ElementLayerFormula(const LayerParameter& layer, const std::string& x);

// The pass: `param` with its runs fused where param.fuse_elements() is set, else `param` as it is.
NetParameter FuseElementLayers(const NetParameter& param);

}  // namespace crema
