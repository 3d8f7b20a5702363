// The fuse_elements parameter pass (NetParameter.fuse_elements): runs of element layers become one Expression layer
// (layers/common/expression.hpp). A run is two or more consecutive layers of the types below and Eltwise layers
// (SUM, PROD, MAX) and Expression layers (one formula, no reductions, no axis settings), each with one top, no
// parameters, no loss weight, no propagate_down, no forced engine and no recompute setting, each but the first reading
// the top of the one before, which no other layer reads, and otherwise only blobs from before the run (a residual sum
// and its ReLU; a gate x * sigmoid(x)); the run's output is not one of its inputs (a run in place on its input is left
// as it is). The Expression layer reads the run's inputs (called x, x1, x2, ... in the formula), writes the run's last
// top, and is named after the layers it replaces ("p1+t+p2"). Formulas keep each layer's value and gradient, also at
// its kinks (ReLU's and ELU's at 0 as Caffe's).
//
// The fuse_for_training pass (after the layouts are planned, over a built net that trains: a TRAIN net, or
// one with force_backward; where the net folds, NetParameter.fold and --fold) gives a step the work of the steps in
// place after it, which go, where one pass over memory can do what several did:
// - a BatchNorm step followed by a Scale step in place on its top (a learned scale per channel, with or without a
//   bias) and, optionally, a ReLU step of slope 0 in place after that (a ResNet's BatchNorm, Scale and ReLU): the
//   BatchNorm runs all three (BatchNormLayer::AbsorbAffine: one pass writes the activations from the normalized values,
//   backward reads them and the gradient twice, instead of ten passes forward and eleven backward). The Scale's
//   parameters stay its own (files, solvers and Python see them); the BatchNorm's step adds to their gradients.
// - an Eltwise SUM step whose bottoms share the top's layout, followed by a ReLU step (slope >= 0) in place on its
//   top (a residual sum and its ReLU): the SUM runs the ReLU (EltwiseLayer::AbsorbReLU).
// - a Convolution or Deconvolution step on oneDNN's engine followed by a ReLU step (slope >= 0) in place on its top:
//   the primitive computes the ReLU as its post-op, and the layer's Backward runs the ReLU's backward before its own
//   (Layer::set_fused_activation_with_backward).
// Where the GPU code runs (on a GPU, or rehearsed on the host), the first kind (the native engine's GPU rules and
// cuDNN's engine, BatchNormAffine: the normalization's pass writes the activations, backward's passes give the Scale's
// gradients with the input's), the second (EltwiseForwardRule's `rectify`) and the last, only where the producer's
// engine applies the ReLU in a pass it makes anyway (Layer::AppliesActivationInItsOwnPass): a cuDNN convolution's fused
// bias and ReLU in float32, and the 16-bit top of a Convolution, Deconvolution or InnerProduct computing in float16 or
// bf16 (which may then pass to the next such layer in 16 bits), or of a MAX pooling in such a net. Net::rewrites()
// lists what was fused. Not where the net logs debug_info from the start (it names each layer's values). Such a net,
// planned later for forward alone, gets no inference rewrites (net/fold.hpp).
#pragma once

#include <string>
#include <vector>

#include "core/common.hpp"
#include "net/net.hpp"

namespace crema {

// The formula of one element layer applied to `x` (a formula in parentheses, or a name), or "" where the layer is
// not of a type the pass fuses (or has a setting it does not: a forced engine).
std::string ElementLayerFormula(const LayerParameter& layer, const std::string& x);

// The formula of an Eltwise layer over its operands (formulas or names), or "" where it is not one the pass fuses.
std::string EltwiseFormula(const LayerParameter& layer, const std::vector<std::string>& operands);

// The formula of a one-top Expression layer without reductions or axis settings over its operands, or "".
std::string ExpressionFormula(const LayerParameter& layer, const std::vector<std::string>& operands);

// The pass: `param` with its runs fused where param.fuse_elements() is set, else `param` as it is.
NetParameter FuseElementLayers(const NetParameter& param);

// The fuse_for_training pass over a built net.
void FuseForTraining(Net* net);

}  // namespace crema
