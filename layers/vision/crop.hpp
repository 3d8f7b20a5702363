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
// Runs on the CPU and the GPU from the same rules (crop.cu compiles them): forward one top value per call,
// backward one bottom gradient value per call (a gather: the top's gradient or 0).
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// The crop's shapes and offsets by value (a kernel argument), the uncropped leading axes merged into one.
struct CropGeometry {
  int axes = 0;
  int bottom[Blob::kMaxAxes] = {}, top[Blob::kMaxAxes] = {}, offset[Blob::kMaxAxes] = {};
};

// Top value t: its bottom value, found axis by axis from the last.
struct CropForwardRule {
  const float* x;
  float* y;
  CropGeometry g;
  CREMA_HOST_DEVICE void operator()(int t) const {
    int rest = t;
    long long source = 0, place = 1;
    for (int a = g.axes - 1; a >= 0; --a) {
      source += (rest % g.top[a] + g.offset[a]) * place;
      rest /= g.top[a];
      place *= g.bottom[a];
    }
    y[t] = x[source];
  }
};

// Bottom value b: the gradient of the top value cropped from it, or 0 outside the crop.
struct CropBackwardRule {
  const float* dy;
  float* dx;
  CropGeometry g;
  CREMA_HOST_DEVICE void operator()(int b) const {
    int rest = b;
    long long source = 0, place = 1;
    bool inside = true;
    for (int a = g.axes - 1; a >= 0; --a) {
      const int coordinate = rest % g.bottom[a] - g.offset[a];
      rest /= g.bottom[a];
      inside = inside && coordinate >= 0 && coordinate < g.top[a];
      source += coordinate * place;
      place *= g.top[a];
    }
    dx[b] = inside ? dy[source] : 0.f;
  }
};

class CropLayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  const char* type() const override { return "Crop"; }
  // Backward reads no data (it places the top's gradient).
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  CropGeometry geometry_;
};

}  // namespace crema
