// LRN on cuDNN (see cudnn_lrn.hpp).
#include "layers/normalization/cudnn_lrn.hpp"

#ifdef CREMA_USE_CUDNN

#include <sstream>

namespace crema {

std::string CudnnLRNLayer::Refusal(const EngineQuery& query) {
  const LRNParameter& param = query.param.lrn_param();
  if (param.norm_region() != LRNParameter::ACROSS_CHANNELS)
    return "cuDNN's LRN runs across channels only (its divisive normalisation is not Caffe's WITHIN_CHANNEL)";
  std::ostringstream why;
  if (param.local_size() < cudnn::kLRNMinWindow || param.local_size() > cudnn::kLRNMaxWindow) {
    why << "cuDNN's LRN windows span " << cudnn::kLRNMinWindow << " to " << cudnn::kLRNMaxWindow
        << " channels (local_size " << param.local_size() << ")";
    return why.str();
  }
  // Compared as the doubles cuDNN is given: a prototxt's k: 1e-5 is the float just below, which cuDNN refuses.
  if (static_cast<double>(param.k()) < cudnn::kLRNMinK) {
    why << "cuDNN's LRN needs k >= " << cudnn::kLRNMinK << " (k " << param.k() << ")";
    return why.str();
  }
  if (static_cast<double>(param.beta()) < cudnn::kLRNMinBeta) {
    why << "cuDNN's LRN needs beta >= " << cudnn::kLRNMinBeta << " (beta " << param.beta() << ")";
    return why.str();
  }
  return "";
}

void CudnnLRNLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReadParameters();  // no scale blob: cuDNN's backward works from x, y and dy
  const std::string why = Refusal(EngineQuery{param_, {}, Device::kGPU});
  CREMA_CHECK(why.empty()) << describe() << ": the cudnn engine cannot compute this LRN (" << why
                           << "; its refusal should have said so)";
}

void CudnnLRNLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& input = *bottom[0];
  ReadShape(input);
  top[0]->ReshapeLike(input);
  empty_ = input.count() == 0;
  if (empty_) return;
  desc_.SetPacked(input.shape());
  lrn_.Set(static_cast<unsigned>(size_), alpha_, beta_, k_);
  RequestWorkspace(input.count());  // backward's y, computed again
}

void CudnnLRNLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (empty_) return;
  const Device d = device();
  cudnn::LRNForward(context(), lrn_, desc_, bottom[0]->data_on(d), top[0]->mutable_data_on(d));
}

void CudnnLRNLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                 const std::vector<Blob*>& bottom) {
  if (!propagate_down[0] || empty_) return;
  const Device d = device();
  const float* x = bottom[0]->data_on(d);
  float* y = workspace();
  cudnn::LRNForward(context(), lrn_, desc_, x, y);
  cudnn::LRNBackward(context(), lrn_, desc_, y, top[0]->diff_on(d), x, bottom[0]->mutable_diff_on(d));
}

}  // namespace crema

#endif  // CREMA_USE_CUDNN
