// Crop: cuts the first bottom down to the sizes of the second from axis `axis` on, starting at the given
// offsets: top[i_0, ..., i_{N-1}] = bottom[i_0 + o_0, ..., i_{N-1} + o_{N-1}], with o_d = 0 for the axes before
// `axis` (they keep the first bottom's sizes).
//
// crop_param:
//   axis    the first axis cropped (default 2); negative counts from the end
//   offset  none (all 0), one for every cropped axis, or one per cropped axis
// Bottoms -> tops: data, reference -> 1. The top has the data's sizes before `axis` and the reference's from it
// on; both bottoms must have the same number of axes. No blobs. Backward writes the top's gradient back in
// place and zeros elsewhere; the reference gets no gradient (only its shape is read).
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class CropLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Crop"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // For every top element, the index of its value in the bottom.
  template <typename F>
  void ForEachPair(const Blob& bottom, const Blob& top, F f) const;

  std::vector<int> offsets_;  // one per axis of the bottom
};

}  // namespace crema
