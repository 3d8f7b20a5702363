// Deprecated fields inside otherwise current definitions: data layers' own preprocessing fields, BatchNorm's
// param specs, net-level inputs.
#include "net/passes.hpp"
#include "net/upgrade_steps.hpp"

namespace crema {
namespace {

std::string JoinList(const std::vector<std::string>& items) {
  std::string joined;
  for (const auto& item : items) joined += (joined.empty() ? "" : ", ") + item;
  return joined;
}

// DataParameter, ImageDataParameter and WindowDataParameter carry the same four deprecated fields.
template <typename DataLayerParameter>
bool HasTransformFields(const DataLayerParameter& p) {
  return p.has_scale() || p.has_mean_file() || p.has_crop_size() || p.has_mirror();
}

// Moves the four fields into `transform`; where both hold one, the old field's value replaces transform_param's
// only when `old_field_wins`. Returns what happened to each field ("scale, mirror").
template <typename DataLayerParameter>
std::string MoveTransformFields(DataLayerParameter* p, TransformationParameter* transform, bool old_field_wins) {
  std::string moved;
  auto move = [&](const char* name, bool has, bool transform_has, auto set) {
    if (!has) return;
    moved += moved.empty() ? "" : ", ";
    moved += name;
    if (transform_has && !old_field_wins) {
      moved += " (dropped: transform_param sets it)";
      return;
    }
    set();
  };
  move("scale", p->has_scale(), transform->has_scale(), [&] { transform->set_scale(p->scale()); });
  move("mean_file", p->has_mean_file(), transform->has_mean_file(), [&] { transform->set_mean_file(p->mean_file()); });
  move("crop_size", p->has_crop_size(), transform->has_crop_size(), [&] { transform->set_crop_size(p->crop_size()); });
  move("mirror", p->has_mirror(), transform->has_mirror(), [&] { transform->set_mirror(p->mirror()); });
  p->clear_scale();
  p->clear_mean_file();
  p->clear_crop_size();
  p->clear_mirror();
  return moved;
}

// Moves the deprecated fields of a layer of either form; "" when it has none.
template <typename Layer>
std::string MoveFieldsOf(Layer* layer, bool is_data, bool is_image_data, bool is_window_data, bool old_field_wins) {
  if (is_data && HasTransformFields(layer->data_param()))
    return MoveTransformFields(layer->mutable_data_param(), layer->mutable_transform_param(), old_field_wins);
  if (is_image_data && HasTransformFields(layer->image_data_param()))
    return MoveTransformFields(layer->mutable_image_data_param(), layer->mutable_transform_param(), old_field_wins);
  if (is_window_data && HasTransformFields(layer->window_data_param()))
    return MoveTransformFields(layer->mutable_window_data_param(), layer->mutable_transform_param(), old_field_wins);
  return "";
}

bool IsOldBatchNorm(const LayerParameter& layer) {
  if (layer.type() != "BatchNorm" || layer.param_size() != 3) return false;
  for (const ParamSpec& spec : layer.param())
    if (spec.lr_mult() != 0.f || spec.decay_mult() != 0.f) return true;
  return false;
}

}  // namespace

bool NetHasDataTransformFields(const NetParameter& param) {
  for (const V1LayerParameter& v1 : param.layers()) {
    if ((v1.type() == V1LayerParameter::DATA && HasTransformFields(v1.data_param())) ||
        (v1.type() == V1LayerParameter::IMAGE_DATA && HasTransformFields(v1.image_data_param())) ||
        (v1.type() == V1LayerParameter::WINDOW_DATA && HasTransformFields(v1.window_data_param())))
      return true;
  }
  for (const LayerParameter& layer : param.layer()) {
    if ((layer.type() == "Data" && HasTransformFields(layer.data_param())) ||
        (layer.type() == "ImageData" && HasTransformFields(layer.image_data_param())) ||
        (layer.type() == "WindowData" && HasTransformFields(layer.window_data_param())))
      return true;
  }
  return false;
}

void MoveDataTransformFields(NetParameter* param, const std::string& origin, Notices* notices) {
  std::vector<std::string> moved;
  for (V1LayerParameter& v1 : *param->mutable_layers()) {
    const std::string fields =
        MoveFieldsOf(&v1, v1.type() == V1LayerParameter::DATA, v1.type() == V1LayerParameter::IMAGE_DATA,
                     v1.type() == V1LayerParameter::WINDOW_DATA, /*old_field_wins=*/true);
    if (!fields.empty()) moved.push_back("'" + v1.name() + "': " + fields);
  }
  for (LayerParameter& layer : *param->mutable_layer()) {
    const std::string fields = MoveFieldsOf(&layer, layer.type() == "Data", layer.type() == "ImageData",
                                            layer.type() == "WindowData", /*old_field_wins=*/false);
    if (!fields.empty()) moved.push_back("'" + layer.name() + "': " + fields);
  }
  if (moved.empty()) return;
  std::string list;
  for (const auto& layer : moved) list += (list.empty() ? "" : "; ") + layer;
  notices->push_back(origin +
                     ": moved the deprecated preprocessing fields of data layers from their data parameters "
                     "into transform_param: " +
                     list);
}

bool NetHasOldBatchNormSpecs(const NetParameter& param) {
  for (const LayerParameter& layer : param.layer())
    if (IsOldBatchNorm(layer)) return true;
  return false;
}

void FixBatchNormSpecs(NetParameter* param, const std::string& origin, Notices* notices) {
  std::vector<std::string> fixed;
  for (LayerParameter& layer : *param->mutable_layer()) {
    if (!IsOldBatchNorm(layer)) continue;
    for (ParamSpec& spec : *layer.mutable_param()) {
      spec.set_lr_mult(0.f);
      spec.set_decay_mult(0.f);
    }
    fixed.push_back("'" + layer.name() + "'");
  }
  if (fixed.empty()) return;
  notices->push_back(origin + ": BatchNorm layer(s) " + JoinList(fixed) +
                     " give 3 param specs (Caffe's first BatchNorm definition); set their lr_mult and decay_mult to "
                     "0, as the mean and variance are statistics, not learned");
}

void MoveInputsIntoLayer(NetParameter* param, const std::string& origin, Notices* notices) {
  if (param->input_size() == 0) return;
  std::vector<std::string> names(param->input().begin(), param->input().end());
  for (auto& name : names) name = "'" + name + "'";
  if (param->input_shape_size() == 0 && param->input_dim_size() == 0) {
    param->clear_input();
    notices->push_back(origin + ": dropped the net-level input name(s) " + JoinList(names) +
                       ", which have no shape (as old .caffemodel files store them)");
    return;
  }
  *param = UpgradeInputs(*param);
  notices->push_back(origin + ": turned the deprecated net-level input(s) " + JoinList(names) +
                     " (input, input_shape / input_dim) into an Input layer named 'input'");
}

}  // namespace crema
