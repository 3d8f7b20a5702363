// V1 nets: `layers` entries with an enum type and per-parameter-blob settings as parallel lists.
#include <algorithm>
#include <map>

#include "net/upgrade_steps.hpp"

namespace crema {
namespace {

void UpgradeV1Layer(const V1LayerParameter& v1, LayerParameter* layer) {
  if (v1.has_name()) layer->set_name(v1.name());
  if (v1.has_type()) layer->set_type(V1TypeName(v1.type()));
  *layer->mutable_bottom() = v1.bottom();
  *layer->mutable_top() = v1.top();
  *layer->mutable_include() = v1.include();
  *layer->mutable_exclude() = v1.exclude();
  *layer->mutable_loss_weight() = v1.loss_weight();
  *layer->mutable_blobs() = v1.blobs();
  // One ParamSpec per parameter blob that any of the four lists mentions; the lists may differ in length.
  const int specs = std::max({v1.param_size(), v1.blob_share_mode_size(), v1.blobs_lr_size(), v1.weight_decay_size()});
  for (int i = 0; i < specs; ++i) {
    ParamSpec* spec = layer->add_param();
    if (i < v1.param_size()) spec->set_name(v1.param(i));
    if (i < v1.blob_share_mode_size())
      spec->set_share_mode(v1.blob_share_mode(i) == V1LayerParameter::PERMISSIVE ? ParamSpec::PERMISSIVE
                                                                                 : ParamSpec::STRICT);
    if (i < v1.blobs_lr_size()) spec->set_lr_mult(v1.blobs_lr(i));
    if (i < v1.weight_decay_size()) spec->set_decay_mult(v1.weight_decay(i));
  }
  // Every per-type message of V1 (convolution_param, transform_param, ...) is today's message under today's
  // name, only at another field number: copy them by name, so that none can be missed.
  const auto* v1_reflection = v1.GetReflection();
  const auto* reflection = layer->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> set_fields;
  v1_reflection->ListFields(v1, &set_fields);
  for (const auto* field : set_fields) {
    const std::string& name = field->name();
    if (field->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE || field->is_repeated() || name.size() < 6 ||
        name.compare(name.size() - 6, 6, "_param") != 0)
      continue;
    const auto* target = LayerParameter::descriptor()->FindFieldByName(name);
    CREMA_CHECK(target != nullptr && target->message_type() == field->message_type())
        << "V1 layer '" << v1.name() << "': " << name << " has no counterpart in today's LayerParameter";
    reflection->MutableMessage(layer, target)->CopyFrom(v1_reflection->GetMessage(v1, field));
  }
}

}  // namespace

std::string V1TypeName(V1LayerParameter::LayerType type) {
  static const std::map<V1LayerParameter::LayerType, std::string> names = {
      {V1LayerParameter::NONE, ""},
      {V1LayerParameter::ABSVAL, "AbsVal"},
      {V1LayerParameter::ACCURACY, "Accuracy"},
      {V1LayerParameter::ARGMAX, "ArgMax"},
      {V1LayerParameter::BNLL, "BNLL"},
      {V1LayerParameter::CONCAT, "Concat"},
      {V1LayerParameter::CONTRASTIVE_LOSS, "ContrastiveLoss"},
      {V1LayerParameter::CONVOLUTION, "Convolution"},
      {V1LayerParameter::DATA, "Data"},
      {V1LayerParameter::DECONVOLUTION, "Deconvolution"},
      {V1LayerParameter::DROPOUT, "Dropout"},
      {V1LayerParameter::DUMMY_DATA, "DummyData"},
      {V1LayerParameter::EUCLIDEAN_LOSS, "EuclideanLoss"},
      {V1LayerParameter::ELTWISE, "Eltwise"},
      {V1LayerParameter::EXP, "Exp"},
      {V1LayerParameter::FLATTEN, "Flatten"},
      {V1LayerParameter::HDF5_DATA, "HDF5Data"},
      {V1LayerParameter::HDF5_OUTPUT, "HDF5Output"},
      {V1LayerParameter::HINGE_LOSS, "HingeLoss"},
      {V1LayerParameter::IM2COL, "Im2col"},
      {V1LayerParameter::IMAGE_DATA, "ImageData"},
      {V1LayerParameter::INFOGAIN_LOSS, "InfogainLoss"},
      {V1LayerParameter::INNER_PRODUCT, "InnerProduct"},
      {V1LayerParameter::LRN, "LRN"},
      {V1LayerParameter::MEMORY_DATA, "MemoryData"},
      {V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS, "MultinomialLogisticLoss"},
      {V1LayerParameter::MVN, "MVN"},
      {V1LayerParameter::POOLING, "Pooling"},
      {V1LayerParameter::POWER, "Power"},
      {V1LayerParameter::RELU, "ReLU"},
      {V1LayerParameter::SIGMOID, "Sigmoid"},
      {V1LayerParameter::SIGMOID_CROSS_ENTROPY_LOSS, "SigmoidCrossEntropyLoss"},
      {V1LayerParameter::SILENCE, "Silence"},
      {V1LayerParameter::SOFTMAX, "Softmax"},
      {V1LayerParameter::SOFTMAX_LOSS, "SoftmaxWithLoss"},
      {V1LayerParameter::SPLIT, "Split"},
      {V1LayerParameter::SLICE, "Slice"},
      {V1LayerParameter::TANH, "TanH"},
      {V1LayerParameter::WINDOW_DATA, "WindowData"},
      {V1LayerParameter::THRESHOLD, "Threshold"},
  };
  auto found = names.find(type);
  CREMA_CHECK(found != names.end()) << "V1 layer type " << static_cast<int>(type) << " has no name in today's form";
  return found->second;
}

void UpgradeV1Layers(NetParameter* param, const std::string& origin, Notices* notices) {
  if (param->layers_size() == 0) return;
  CREMA_CHECK(param->layer_size() == 0)
      << origin << ": the net has both `layer` entries (today's form) and legacy V1 `layers` entries ("
      << param->layer_size() << " and " << param->layers_size() << "); give all its layers in one form";
  for (const V1LayerParameter& v1 : param->layers()) UpgradeV1Layer(v1, param->add_layer());
  const int count = param->layers_size();
  param->clear_layers();
  notices->push_back(origin + ": upgraded " + std::to_string(count) +
                     " layer(s) from Caffe's V1 format (`layers` with enum types, blobs_lr, weight_decay) to `layer`");
}

}  // namespace crema
