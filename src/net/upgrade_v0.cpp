// V0 nets: each `layers` entry holds bottom, top and a V0LayerParameter with every parameter inline.
#include <map>
#include <sstream>

#include "net/upgrade_steps.hpp"

namespace crema {
namespace {

const std::map<std::string, V1LayerParameter::LayerType>& V0Types() {
  static const std::map<std::string, V1LayerParameter::LayerType> types = {
      {"accuracy", V1LayerParameter::ACCURACY},
      {"bnll", V1LayerParameter::BNLL},
      {"concat", V1LayerParameter::CONCAT},
      {"conv", V1LayerParameter::CONVOLUTION},
      {"data", V1LayerParameter::DATA},
      {"dropout", V1LayerParameter::DROPOUT},
      {"euclidean_loss", V1LayerParameter::EUCLIDEAN_LOSS},
      {"flatten", V1LayerParameter::FLATTEN},
      {"hdf5_data", V1LayerParameter::HDF5_DATA},
      {"hdf5_output", V1LayerParameter::HDF5_OUTPUT},
      {"im2col", V1LayerParameter::IM2COL},
      {"images", V1LayerParameter::IMAGE_DATA},
      {"infogain_loss", V1LayerParameter::INFOGAIN_LOSS},
      {"innerproduct", V1LayerParameter::INNER_PRODUCT},
      {"lrn", V1LayerParameter::LRN},
      {"multinomial_logistic_loss", V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS},
      {"pool", V1LayerParameter::POOLING},
      {"relu", V1LayerParameter::RELU},
      {"sigmoid", V1LayerParameter::SIGMOID},
      {"softmax", V1LayerParameter::SOFTMAX},
      {"softmax_loss", V1LayerParameter::SOFTMAX_LOSS},
      {"split", V1LayerParameter::SPLIT},
      {"tanh", V1LayerParameter::TANH},
      {"window_data", V1LayerParameter::WINDOW_DATA},
  };
  return types;
}

const char* const kPadding = "padding";

std::string Describe(const V1LayerParameter& entry) {
  return "V0 layer '" + entry.layer().name() + "' (" + entry.layer().type() + ")";
}

// Removes the padding layers; each layer that read one reads the padding layer's input with its pad instead.
void FoldPaddingLayers(NetParameter* param, std::vector<std::string>* folded) {
  std::map<std::string, const V1LayerParameter*> producer;  // the latest entry that wrote each blob
  google::protobuf::RepeatedPtrField<V1LayerParameter> kept;
  for (const V1LayerParameter& entry : param->layers()) {
    V1LayerParameter upgraded = entry;
    for (int b = 0; b < entry.bottom_size(); ++b) {
      auto found = producer.find(entry.bottom(b));
      if (found == producer.end()) continue;
      const V1LayerParameter& padding = *found->second;
      if (padding.layer().type() != kPadding) continue;
      const std::string& type = entry.layer().type();
      CREMA_CHECK(type == "conv" || type == "pool")
          << Describe(padding) << " feeds " << Describe(entry) << "; a padding layer can only feed a conv or pool "
          << "layer, which takes its pad";
      CREMA_CHECK(entry.bottom_size() == 1)
          << Describe(padding) << " feeds " << Describe(entry) << ", which has " << entry.bottom_size()
          << " inputs; its pad can only move into a layer with one";
      CREMA_CHECK(padding.bottom_size() == 1 && padding.top_size() == 1)
          << Describe(padding) << " has " << padding.bottom_size() << " input(s) and " << padding.top_size()
          << " output(s); a padding layer has one of each";
      upgraded.mutable_layer()->set_pad(padding.layer().pad());
      upgraded.set_bottom(b, padding.bottom(0));
      folded->push_back("'" + padding.layer().name() + "' into '" + entry.layer().name() + "'");
    }
    for (const std::string& top : entry.top()) producer[top] = &entry;
    if (entry.layer().type() != kPadding) *kept.Add() = std::move(upgraded);
  }
  param->mutable_layers()->Swap(&kept);
}

using V0 = V0LayerParameter;
using V1 = V1LayerParameter;
using Setter = void (*)(const V0&, V1*);

// Where one V0 field goes for each V0 type that takes it ("" for every type).
struct FieldRule {
  const char* field;
  std::vector<std::pair<const char*, Setter>> destinations;
};

const std::vector<FieldRule>& FieldRules() {
  static const std::vector<FieldRule> rules = {
      {"num_output",
       {{"conv", [](const V0& v0, V1* v1) { v1->mutable_convolution_param()->set_num_output(v0.num_output()); }},
        {"innerproduct",
         [](const V0& v0, V1* v1) { v1->mutable_inner_product_param()->set_num_output(v0.num_output()); }}}},
      {"biasterm",
       {{"conv", [](const V0& v0, V1* v1) { v1->mutable_convolution_param()->set_bias_term(v0.biasterm()); }},
        {"innerproduct",
         [](const V0& v0, V1* v1) { v1->mutable_inner_product_param()->set_bias_term(v0.biasterm()); }}}},
      {"weight_filler",
       {{"conv",
         [](const V0& v0, V1* v1) { *v1->mutable_convolution_param()->mutable_weight_filler() = v0.weight_filler(); }},
        {"innerproduct",
         [](const V0& v0, V1* v1) {
           *v1->mutable_inner_product_param()->mutable_weight_filler() = v0.weight_filler();
         }}}},
      {"bias_filler",
       {{"conv",
         [](const V0& v0, V1* v1) { *v1->mutable_convolution_param()->mutable_bias_filler() = v0.bias_filler(); }},
        {"innerproduct",
         [](const V0& v0, V1* v1) { *v1->mutable_inner_product_param()->mutable_bias_filler() = v0.bias_filler(); }}}},
      {"pad",
       {{"conv", [](const V0& v0, V1* v1) { v1->mutable_convolution_param()->add_pad(v0.pad()); }},
        {"pool", [](const V0& v0, V1* v1) { v1->mutable_pooling_param()->set_pad(v0.pad()); }}}},
      {"kernelsize",
       {{"conv", [](const V0& v0, V1* v1) { v1->mutable_convolution_param()->add_kernel_size(v0.kernelsize()); }},
        {"pool", [](const V0& v0, V1* v1) { v1->mutable_pooling_param()->set_kernel_size(v0.kernelsize()); }}}},
      {"group", {{"conv", [](const V0& v0, V1* v1) { v1->mutable_convolution_param()->set_group(v0.group()); }}}},
      {"stride",
       {{"conv", [](const V0& v0, V1* v1) { v1->mutable_convolution_param()->add_stride(v0.stride()); }},
        {"pool", [](const V0& v0, V1* v1) { v1->mutable_pooling_param()->set_stride(v0.stride()); }}}},
      // The two enums list the same methods under the same numbers.
      {"pool",
       {{"pool",
         [](const V0& v0, V1* v1) {
           v1->mutable_pooling_param()->set_pool(static_cast<PoolingParameter::PoolMethod>(v0.pool()));
         }}}},
      {"dropout_ratio",
       {{"dropout", [](const V0& v0, V1* v1) { v1->mutable_dropout_param()->set_dropout_ratio(v0.dropout_ratio()); }}}},
      {"local_size", {{"lrn", [](const V0& v0, V1* v1) { v1->mutable_lrn_param()->set_local_size(v0.local_size()); }}}},
      {"alpha", {{"lrn", [](const V0& v0, V1* v1) { v1->mutable_lrn_param()->set_alpha(v0.alpha()); }}}},
      {"beta", {{"lrn", [](const V0& v0, V1* v1) { v1->mutable_lrn_param()->set_beta(v0.beta()); }}}},
      {"k", {{"lrn", [](const V0& v0, V1* v1) { v1->mutable_lrn_param()->set_k(v0.k()); }}}},
      {"source",
       {{"data", [](const V0& v0, V1* v1) { v1->mutable_data_param()->set_source(v0.source()); }},
        {"hdf5_data", [](const V0& v0, V1* v1) { v1->mutable_hdf5_data_param()->set_source(v0.source()); }},
        {"images", [](const V0& v0, V1* v1) { v1->mutable_image_data_param()->set_source(v0.source()); }},
        {"window_data", [](const V0& v0, V1* v1) { v1->mutable_window_data_param()->set_source(v0.source()); }},
        {"infogain_loss", [](const V0& v0, V1* v1) { v1->mutable_infogain_loss_param()->set_source(v0.source()); }}}},
      {"batchsize",
       {{"data", [](const V0& v0, V1* v1) { v1->mutable_data_param()->set_batch_size(v0.batchsize()); }},
        {"hdf5_data", [](const V0& v0, V1* v1) { v1->mutable_hdf5_data_param()->set_batch_size(v0.batchsize()); }},
        {"images", [](const V0& v0, V1* v1) { v1->mutable_image_data_param()->set_batch_size(v0.batchsize()); }},
        {"window_data",
         [](const V0& v0, V1* v1) { v1->mutable_window_data_param()->set_batch_size(v0.batchsize()); }}}},
      // The preprocessing fields go to transform_param whatever the type, as in Caffe's upgrade.
      {"scale", {{"", [](const V0& v0, V1* v1) { v1->mutable_transform_param()->set_scale(v0.scale()); }}}},
      {"meanfile", {{"", [](const V0& v0, V1* v1) { v1->mutable_transform_param()->set_mean_file(v0.meanfile()); }}}},
      {"cropsize", {{"", [](const V0& v0, V1* v1) { v1->mutable_transform_param()->set_crop_size(v0.cropsize()); }}}},
      {"mirror", {{"", [](const V0& v0, V1* v1) { v1->mutable_transform_param()->set_mirror(v0.mirror()); }}}},
      {"rand_skip",
       {{"data", [](const V0& v0, V1* v1) { v1->mutable_data_param()->set_rand_skip(v0.rand_skip()); }},
        {"images", [](const V0& v0, V1* v1) { v1->mutable_image_data_param()->set_rand_skip(v0.rand_skip()); }}}},
      {"shuffle_images",
       {{"images", [](const V0& v0, V1* v1) { v1->mutable_image_data_param()->set_shuffle(v0.shuffle_images()); }}}},
      {"new_height",
       {{"images", [](const V0& v0, V1* v1) { v1->mutable_image_data_param()->set_new_height(v0.new_height()); }}}},
      {"new_width",
       {{"images", [](const V0& v0, V1* v1) { v1->mutable_image_data_param()->set_new_width(v0.new_width()); }}}},
      {"new_num", {}},
      {"new_channels", {}},
      {"concat_dim",
       {{"concat", [](const V0& v0, V1* v1) { v1->mutable_concat_param()->set_concat_dim(v0.concat_dim()); }}}},
      {"det_fg_threshold",
       {{"window_data",
         [](const V0& v0, V1* v1) { v1->mutable_window_data_param()->set_fg_threshold(v0.det_fg_threshold()); }}}},
      {"det_bg_threshold",
       {{"window_data",
         [](const V0& v0, V1* v1) { v1->mutable_window_data_param()->set_bg_threshold(v0.det_bg_threshold()); }}}},
      {"det_fg_fraction",
       {{"window_data",
         [](const V0& v0, V1* v1) { v1->mutable_window_data_param()->set_fg_fraction(v0.det_fg_fraction()); }}}},
      {"det_context_pad",
       {{"window_data",
         [](const V0& v0, V1* v1) { v1->mutable_window_data_param()->set_context_pad(v0.det_context_pad()); }}}},
      {"det_crop_mode",
       {{"window_data",
         [](const V0& v0, V1* v1) { v1->mutable_window_data_param()->set_crop_mode(v0.det_crop_mode()); }}}},
      {"hdf5_output_param",
       {{"hdf5_output", [](const V0& v0, V1* v1) { *v1->mutable_hdf5_output_param() = v0.hdf5_output_param(); }}}},
  };
  return rules;
}

// Moves one V0 definition into the V1 fields of its entry. Fields the layer's type does not take (Caffe ignored
// them too) are listed in `ignored`.
void UpgradeV0Layer(V1LayerParameter* entry, std::vector<std::string>* ignored) {
  const V0LayerParameter v0 = entry->layer();
  entry->clear_layer();
  const std::string& type = v0.type();
  if (v0.has_name()) entry->set_name(v0.name());
  if (v0.has_type()) {
    auto found = V0Types().find(type);
    if (found == V0Types().end()) {
      std::ostringstream known;
      for (const auto& [name, unused] : V0Types()) known << (known.tellp() > 0 ? ", " : "") << name;
      CREMA_FAIL() << "V0 layer '" << v0.name() << "' has type '" << type << "', which Caffe's V0 format never had; "
                   << "known types: " << known.str() << ", " << kPadding;
    }
    entry->set_type(found->second);
  }
  *entry->mutable_blobs() = v0.blobs();
  *entry->mutable_blobs_lr() = v0.blobs_lr();
  *entry->mutable_weight_decay() = v0.weight_decay();
  const auto* reflection = v0.GetReflection();
  for (const FieldRule& rule : FieldRules()) {
    const auto* field = V0LayerParameter::descriptor()->FindFieldByName(rule.field);
    CREMA_CHECK(field != nullptr) << "the V0 upgrade names a field V0LayerParameter lacks: " << rule.field;
    if (!reflection->HasField(v0, field)) continue;
    bool taken = false;
    for (const auto& [destination_type, set] : rule.destinations) {
      if (*destination_type != '\0' && type != destination_type) continue;
      set(v0, entry);
      taken = true;
    }
    if (!taken) ignored->push_back("'" + v0.name() + "' (" + type + ") " + rule.field);
  }
}

std::string JoinList(const std::vector<std::string>& items) {
  std::string joined;
  for (const auto& item : items) joined += (joined.empty() ? "" : ", ") + item;
  return joined;
}

}  // namespace

bool NetHasV0Layers(const NetParameter& param) {
  for (const auto& entry : param.layers())
    if (entry.has_layer()) return true;
  return false;
}

void UpgradeV0Layers(NetParameter* param, const std::string& origin, Notices* notices) {
  if (!NetHasV0Layers(*param)) return;
  std::vector<std::string> folded;
  FoldPaddingLayers(param, &folded);
  int upgraded = 0;
  std::vector<std::string> ignored;
  for (V1LayerParameter& entry : *param->mutable_layers()) {
    if (!entry.has_layer()) continue;
    UpgradeV0Layer(&entry, &ignored);
    ++upgraded;
  }
  std::ostringstream notice;
  notice << origin << ": upgraded " << upgraded << " layer(s) from Caffe's V0 format (`layers { layer { ... } }`)";
  if (!folded.empty()) notice << ", folding padding layer(s) " << JoinList(folded);
  notices->push_back(notice.str());
  if (!ignored.empty())
    notices->push_back(
        origin + ": ignored V0 fields that their layer's type does not take (as Caffe did): " + JoinList(ignored));
}

}  // namespace crema
