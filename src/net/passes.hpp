// The built-in passes over a net, each a plain function that can be run and tested on its own.
//
// Parameter passes (NetParameter -> NetParameter, before any layer exists):
//   upgrade_legacy  Caffe's V0 and V1 nets and deprecated fields in today's form (net/upgrade.hpp)
//   filter          keep the layers whose include/exclude rules match the net's state (phase, level, stages)
//   upgrade_inputs  turn the deprecated net-level input / input_shape / input_dim into an Input layer
//   fuse_elements   with NetParameter.fuse_elements: runs of element layers become one Expression (net/fuse.hpp)
//   insert_splits   give every reader of a blob read more than once its own copy through a Split layer
// After-build passes (over a built net: its steps, layers and blobs):
//   decide_backward which steps run backward, and to which bottoms they send gradients
//   plan_layouts    keep a blob in its writer's layout where every reader takes it (core/layout.hpp)
//   fuse_for_training  in a net that trains on the CPU, a BatchNorm runs the Scale and ReLU in place after it, and
//                   a SUM or a oneDNN convolution the ReLU after it (net/fuse.hpp)
// After-weights passes (once the weights are loaded; Net::RunAfterWeightsPasses): the inference rewrites of
// net/fold.hpp, for a net that runs forward only, then plan_element_types (8-bit blobs between 8-bit steps).
//
// Adding a pass: write it here as a function, add it to NetPasses::Default() (passes.cpp) at the stage it
// belongs to, and test it on its own (tests/test_net_foundation.cpp, NetPassesTest). docs/architecture.md has a worked
// example.
#pragma once

#include "core/common.hpp"
#include "net/net.hpp"

namespace crema {

bool StateMeetsRule(const NetState& state, const NetStateRule& rule);
NetParameter FilterNet(const NetParameter& param);
NetParameter UpgradeInputs(const NetParameter& param);
NetParameter InsertSplits(const NetParameter& param);

// Sets each step's needs_backward and propagate_down: a forward sweep finds the blobs that depend on something
// learnable (or on a bottom force_backward asks for); a backward sweep keeps only the steps that feed a loss.
void DecideBackward(Net* net);

// Keeps each blob that is not a net output in the layout its writer offers (Layer::OffersLayout) when every
// layer reading it takes that layout (Layer::ReadsLayout): a run of oneDNN layers then passes its own layouts
// along, and reorders happen only where the run meets other layers. The changed steps are reshaped at once.
// CREMA_LAYOUTS=plain skips it (every blob plain, for comparisons).
void PlanLayouts(Net* net);

// Keeps each blob that is not a net output, nor read from outside the plan, in 8-bit integers where its writer can
// write them (Layer::WritesQuantized) and every step reading it quantizes it in one way (Layer::ReadsQuantized):
// 8-bit convolutions then pass their integers from one to the next, a quarter of the bytes and no conversion, the
// same values the readers would have quantized (core/element_type.hpp). The changed steps are reshaped at once.
// CREMA_ELEMENT_TYPES=float skips it (every blob in floats, for comparisons and for reading every blob).
void PlanElementTypes(Net* net);

}  // namespace crema
