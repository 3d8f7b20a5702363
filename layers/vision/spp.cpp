#include "layers/vision/spp.hpp"

#include <string>

#include "core/math_functions.hpp"

namespace crema {

void SPPLayer::LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) {
  const SPPParameter& param = param_.spp_param();
  CREMA_CHECK(param.has_pyramid_height() && param.pyramid_height() >= 1 && param.pyramid_height() <= 16)
      << describe() << ": spp_param.pyramid_height must be given, from 1 to 16";
  levels_ = static_cast<int>(param.pyramid_height());
  for (int l = 0; l < levels_; ++l) pooled_.push_back(AddInternalBlob("level" + std::to_string(l)));
  if (levels_ > 1) level_gradient_ = AddInternalBlob("level_gradient");
  const auto pool = param.pool();
  if (pool == SPPParameter::MAX || pool == SPPParameter::STOCHASTIC) {
    for (int l = 0; l < levels_; ++l) {
      AddInternalBlob("level" + std::to_string(l) + (pool == SPPParameter::MAX ? ".argmax" : ".sample"),
                      InternalLifetime::kUntilBackward);
      level_kept_.push_back(internal_blobs().back());
    }
  }
}

void SPPLayer::BuildLevels(const Blob& input) {
  height_ = input.shape(2);
  width_ = input.shape(3);
  pools_.clear();
  for (int l = 0; l < levels_; ++l) {
    const int bins = 1 << l;
    LayerParameter level;
    level.set_name(name() + ".level" + std::to_string(l));
    level.set_type("Pooling");
    level.set_phase(phase());
    PoolingParameter* pooling = level.mutable_pooling_param();
    pooling->set_pool(static_cast<PoolingParameter::PoolMethod>(param_.spp_param().pool()));
    const int kernel_h = (height_ + bins - 1) / bins, kernel_w = (width_ + bins - 1) / bins;
    pooling->set_kernel_h(kernel_h);
    pooling->set_kernel_w(kernel_w);
    pooling->set_stride_h(kernel_h);
    pooling->set_stride_w(kernel_w);
    pooling->set_pad_h((kernel_h * bins - height_ + 1) / 2);
    pooling->set_pad_w((kernel_w * bins - width_ + 1) / 2);
    pools_.push_back(std::make_unique<PoolingLayer>(level, shared_context()));
    if (!level_kept_.empty()) pools_.back()->LendInternalBlobs({level_kept_[l]});
    Blob* in = const_cast<Blob*>(&input);
    pools_.back()->SetUp({in}, {pooled_[l]});
    CREMA_CHECK(pooled_[l]->shape(2) == bins && pooled_[l]->shape(3) == bins)
        << describe() << ": level " << l << " of an input of " << height_ << " x " << width_ << " gives "
        << pooled_[l]->shape(2) << " x " << pooled_[l]->shape(3) << " bins instead of " << bins << " x " << bins
        << "; the input is too small for spp_param.pyramid_height " << levels_;
  }
}

void SPPLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& input = *bottom[0];
  CREMA_CHECK(input.num_axes() == 4) << describe() << ": takes 4-d input (N, C, H, W), but the input has shape "
                                     << input.shape_string();
  if (input.shape(2) != height_ || input.shape(3) != width_) BuildLevels(input);
  for (int l = 0; l < levels_; ++l) pools_[l]->Reshape({bottom[0]}, {pooled_[l]});
  if (levels_ == 1) {
    top[0]->ReshapeLike(*pooled_[0]);
  } else {
    int per_channel = 0;
    for (int l = 0; l < levels_; ++l) per_channel += 1 << (2 * l);
    top[0]->Reshape({input.shape(0), input.shape(1) * per_channel});
    level_gradient_->ViewOf(input, false);  // the bottom's data; a gradient of its own
  }
}

// Item n of level l occupies C * bins^2 values of top item n, after the levels before it.
void SPPLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const int item = top[0]->count(1);
  int offset = 0;
  for (int l = 0; l < levels_; ++l) {
    pools_[l]->Forward({bottom[0]}, {pooled_[l]});
    const int size = pooled_[l]->count(1);
    for_each_element(context(), pooled_[l]->count(),
                     SPPLevelCopyRule{pooled_[l]->data_on(d), top[0]->mutable_data_on(d), size, item, offset, true});
    offset += size;
  }
}

void SPPLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const Device d = device();
  const int item = top[0]->count(1);
  int offset = 0;
  for (int l = 0; l < levels_; ++l) {
    const int size = pooled_[l]->count(1);
    for_each_element(context(), pooled_[l]->count(),
                     SPPLevelCopyRule{top[0]->diff_on(d), pooled_[l]->mutable_diff_on(d), size, item, offset, false});
    offset += size;
    // Pooling's backward overwrites its bottom's gradient: the first level writes the bottom's, the others
    // write their own and are added to it.
    Blob* target = l == 0 ? bottom[0] : level_gradient_;
    pools_[l]->Backward({pooled_[l]}, {true}, {target});
    if (l > 0) axpy(context(), bottom[0]->count(), 1.f, level_gradient_->diff_on(d), bottom[0]->mutable_diff_on(d));
  }
}

}  // namespace crema
