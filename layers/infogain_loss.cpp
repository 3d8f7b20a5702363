#include "layers/infogain_loss.hpp"

#include <algorithm>
#include <cmath>

#include "core/math_functions.hpp"
#include "io/proto_io.hpp"
#include "layers/loss_normalization.hpp"

namespace crema {

void InfogainLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const InfogainLossParameter& infogain_param = param_.infogain_loss_param();
  LayerParameter softmax_param;
  softmax_param.set_name(name() + "/softmax");
  softmax_param.set_type("Softmax");
  softmax_param.mutable_softmax_param()->set_axis(infogain_param.axis());
  softmax_ = std::make_unique<SoftmaxLayer>(softmax_param, shared_context());
  if (top.size() == 1 && prob_ == nullptr) prob_ = AddInternalBlob("probabilities");
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
  if (param_.loss_weight_size() == 0) set_loss(0, 1.f);
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
}

void InfogainLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Blob* prob_blob = probabilities(top);
  softmax_->Forward({bottom[0]}, {prob_blob});
  const float* prob = prob_blob->cpu_data();
  const float* labels = bottom[1]->cpu_data();
  const float* h = infogain(bottom).cpu_data();
  const int classes = split_.classes, inner = split_.inner;
  double loss = 0;
  int valid = 0;
  for (int n = 0; n < split_.outer; ++n) {
    for (int j = 0; j < inner; ++j) {
      const int index = n * inner + j;
      if (ignored(labels[index])) continue;
      const int label = CheckedLabel(labels[index], index, *bottom[1], classes, has_ignore_label_);
      for (int l = 0; l < classes; ++l) {
        const float p = std::max(prob[(n * classes + l) * inner + j], kMinProbability);
        loss -= static_cast<double>(h[label * classes + l]) * std::log(p);
      }
      ++valid;
    }
  }
  valid_count_ = valid;
  top[0]->mutable_cpu_data()[0] = static_cast<float>(loss / LossNormalizer(normalization_, split_.outer, inner, valid));
}

void InfogainLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": cannot backpropagate to the labels (bottom 1); set "
                                  << "propagate_down: false for it";
  CREMA_CHECK(propagate_down.size() < 3 || !propagate_down[2])
      << describe() << ": cannot backpropagate to the infogain matrix (bottom 2); set propagate_down: false for it";
  if (!propagate_down[0]) return;
  const float* prob = probabilities(top)->cpu_data();
  const float* labels = bottom[1]->cpu_data();
  const float* h = infogain(bottom).cpu_data();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int classes = split_.classes, inner = split_.inner;
  const float scale = top[0]->cpu_diff()[0] / LossNormalizer(normalization_, split_.outer, inner, valid_count_);
  for (int n = 0; n < split_.outer; ++n) {
    for (int j = 0; j < inner; ++j) {
      const int index = n * inner + j;
      float* column = dx + n * classes * inner + j;
      if (ignored(labels[index])) {
        for (int l = 0; l < classes; ++l) column[l * inner] = 0.f;
        continue;
      }
      const int label = CheckedLabel(labels[index], index, *bottom[1], classes, has_ignore_label_);
      const float* row = h + label * classes;
      double row_sum = 0;
      for (int l = 0; l < classes; ++l) row_sum += row[l];
      for (int l = 0; l < classes; ++l) {
        const double p = prob[(n * classes + l) * inner + j];
        column[l * inner] = static_cast<float>(scale * (p * row_sum - row[l]));
      }
    }
  }
}

}  // namespace crema
