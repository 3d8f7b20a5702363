// The steps of the legacy-net upgrade (net/upgrade.hpp runs them in order), each usable and testable on its own.
// Every step changes `param` in place and adds one notice per kind of change to `notices`, starting with
// `origin` (the file or net it came from). A step that finds nothing to do changes nothing and adds nothing.
#pragma once

#include <string>
#include <vector>

#include "core/common.hpp"

namespace crema {

using Notices = std::vector<std::string>;

// upgrade_v0.cpp: Caffe's first format, a V0LayerParameter inside each `layers` entry, into V1 entries.
// "padding" layers disappear: their pad moves into the convolution or pooling that reads them, which then
// reads the padding layer's input. Throws naming the layer for a V0 type Caffe never had and for a padding
// layer that feeds anything but one convolution or pooling input.
bool NetHasV0Layers(const NetParameter& param);
void UpgradeV0Layers(NetParameter* param, const std::string& origin, Notices* notices);

// upgrade_v1.cpp: V1 `layers` entries (enum types, blobs_lr / weight_decay / param names as parallel lists) into
// today's `layer` entries, weights included. Throws when the net also has `layer` entries (which to keep?).
void UpgradeV1Layers(NetParameter* param, const std::string& origin, Notices* notices);
// Today's type name of a V1 enum type ("" for NONE, as Caffe).
std::string V1TypeName(V1LayerParameter::LayerType type);

// upgrade_fields.cpp: fields deprecated inside layers and nets of either form.
// scale, mean_file, crop_size and mirror in data_param / image_data_param / window_data_param move into
// transform_param. Where both say something, V1 entries keep the old field's value (Caffe's upgrade did) and
// `layer` entries transform_param's (what crema's data layers did with such nets).
bool NetHasDataTransformFields(const NetParameter& param);
void MoveDataTransformFields(NetParameter* param, const std::string& origin, Notices* notices);
// A BatchNorm layer with three param specs (Caffe's first BatchNorm asked for them) gets lr_mult and
// decay_mult 0 in each, the rest of the spec (a sharing name) kept: its blobs are statistics, not learned.
bool NetHasOldBatchNormSpecs(const NetParameter& param);
void FixBatchNormSpecs(NetParameter* param, const std::string& origin, Notices* notices);
// The net-level input / input_shape / input_dim as an Input layer (the upgrade_inputs pass's rewrite). Input
// names without any shape (old .caffemodels) are dropped: they describe nothing a weights file needs.
void MoveInputsIntoLayer(NetParameter* param, const std::string& origin, Notices* notices);

}  // namespace crema
