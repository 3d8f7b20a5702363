// The activations a Convolution, Deconvolution or InnerProduct applies to its own output when the inference
// rewrites fuse one into it (FusedActivation, layers/layer.hpp; net/fold.hpp): the rules of the ReLU, ELU, Sigmoid,
// TanH and Clip layers themselves, run over the top in place, on the layer's device.
#pragma once

#include "core/blob.hpp"
#include "core/context.hpp"
#include "layers/layer.hpp"

namespace crema {

// top = activation(top), value by value, with the activation layer's own rule (so a fused net computes what the
// unfused one does, bit for bit, where the engine leaves the activation to this).
void ApplyFusedActivation(Context& context, const FusedActivation& activation, Blob* top);
// The fused activation's backward in place on the top's gradient, with the activation layer's own rule (a ReLU of slope
// 0 or more, which reads the output's sign: what training fuses, Layer::set_fused_activation_with_backward).
void ApplyFusedActivationBackward(Context& context, const FusedActivation& activation, Blob* top);
// top += summand (a fused Eltwise SUM), value by value; both of one shape and layout.
void ApplyFusedSum(Context& context, const Blob& summand, Blob* top);

}  // namespace crema
