#include "layers/loss/infogain_loss.hpp"

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"
#include "io/proto_io.hpp"
#include "layers/loss/loss_normalization.hpp"

namespace crema {

void InfogainLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const InfogainLossParameter& infogain_param = param_.infogain_loss_param();
  LayerParameter softmax_param;
  softmax_param.set_name(name() + "/softmax");
  softmax_param.set_type("Softmax");
  softmax_param.mutable_softmax_param()->set_axis(infogain_param.axis());
  softmax_ = std::make_unique<SoftmaxLayer>(softmax_param, shared_context());
  if (top.size() == 1 && prob_ == nullptr) prob_ = AddInternalBlob("probabilities", InternalLifetime::kUntilBackward);
  // The class axis is checked here so that its error names this layer's field rather than the softmax's.
  CanonicalAxis(*bottom[0], infogain_param.axis(), "infogain_loss_param.axis");
  softmax_->SetUp({bottom[0]}, {probabilities(top)});

  const LossParameter& loss_param = param_.loss_param();
  has_ignore_label_ = loss_param.has_ignore_label();
  ignore_label_ = loss_param.ignore_label();
  normalization_ = ChosenNormalization(loss_param, LossParameter::VALID);

  if (bottom.size() < 3) {
    const std::string& source = infogain_param.source();
    CREMA_CHECK(!source.empty()) << describe() << ": the infogain matrix H comes from a third bottom or from "
                                 << "infogain_loss_param.source (a .binaryproto file); neither is given";
    CREMA_CHECK(FileExists(source)) << describe() << ": infogain_loss_param.source '" << source
                                    << "' (the infogain matrix H) does not exist or cannot be read";
    BlobProto proto;
    ReadProtoFromBinaryFile(source, &proto);
    infogain_from_file_.FromProto(proto);
  }
}

void InfogainLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  softmax_->Reshape({bottom[0]}, {probabilities(top)});
  split_ = SplitAtClassAxis(*bottom[0], param_.infogain_loss_param().axis(), "infogain_loss_param.axis");
  CheckLabelCount(*bottom[1], *bottom[0], split_);
  const Blob& h = infogain(bottom);
  CREMA_CHECK(h.count() == split_.classes * split_.classes)
      << describe() << ": the infogain matrix H (shape " << h.shape_string() << ", from "
      << (bottom.size() > 2 ? "bottom 2" : "infogain_loss_param.source '" + param_.infogain_loss_param().source() + "'")
      << ") must hold " << split_.classes << " x " << split_.classes << " values for scores of shape "
      << bottom[0]->shape_string() << " with the classes along axis " << split_.axis;
  top[0]->Reshape({});
  RequestWorkspace(static_cast<size_t>(split_.outer) * split_.inner);  // the per-position loss terms
}

InfogainPosition InfogainLossLayer::PositionsOn(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  return {probabilities(top)->data_on(d),
          bottom[1]->data_on(d),
          infogain(bottom).data_on(d),
          split_.classes,
          split_.inner,
          has_ignore_label_,
          ignore_label_};
}

void InfogainLossLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  softmax_->Forward({bottom[0]}, {probabilities(top)});
  // The labels are checked on the host, where a data layer wrote them, before any rule indexes with them.
  const int valid = CheckLabels(*bottom[1], split_.classes, has_ignore_label_ ? &ignore_label_ : nullptr);
  valid_count_ = valid;
  const int positions = split_.outer * split_.inner;
  float* terms = workspace();
  for_each_element(context(), positions, InfogainTermRule{PositionsOn(bottom, top), kMinProbability, terms});
  const double loss = sum(context(), positions, terms);
  set(context(), 1, static_cast<float>(loss / LossNormalizer(normalization_, split_.outer, split_.inner, valid)),
      top[0]->mutable_data_on(device()));
}

void InfogainLossLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": cannot backpropagate to the labels (bottom 1); set "
                                  << "propagate_down: false for it";
  CREMA_CHECK(propagate_down.size() < 3 || !propagate_down[2])
      << describe() << ": cannot backpropagate to the infogain matrix (bottom 2); set propagate_down: false for it";
  if (!propagate_down[0]) return;
  const float normalizer = LossNormalizer(normalization_, split_.outer, split_.inner, valid_count_);
  for_each_element(context(), split_.outer * split_.inner,
                   InfogainGradientRule{PositionsOn(bottom, top), top[0]->diff_on(device()), normalizer,
                                        bottom[0]->mutable_diff_on(device())});
}

std::vector<Layer::HeldBuffer> InfogainLossLayer::HeldBuffers() const {
  if (infogain_from_file_.count() == 0) return {};
  const size_t bytes = sizeof(float) * infogain_from_file_.count();
  std::vector<HeldBuffer> held{{"H read from infogain_loss_param.source", bytes, Device::kCPU}};
  if (device() == Device::kGPU) held.push_back({"H read from infogain_loss_param.source", bytes, Device::kGPU});
  return held;
}

}  // namespace crema
