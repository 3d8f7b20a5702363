// Bias: adds a bias broadcast along some axes of the first bottom: top[o, d, i] = bottom[o, d, i] + bias[d],
// where the bias's shape equals the bottom's shape over axes [axis, axis + bias axes), o runs over the axes
// before them and i over the axes after.
//
// bias_param:
//   axis      the bottom's axis where the bias's shape starts (default 1); negative counts from the end; ignored
//             (taken as 0) when the bias is a scalar of no axes
//   num_axes  how many axes a learned bias spans (default 1; -1: to the end; 0: a scalar)
//   filler    initialises a learned bias (default constant 0)
// Bottoms -> tops: 1 or 2 -> 1 (in place allowed). With one bottom the bias is learned: one blob of shape
// bottom.shape[axis : axis + num_axes]. With two the second bottom is the bias (num_axes is then ignored: its
// own shape counts), and it gets a gradient when asked.
// Runs on the CPU and the GPU: forward is one rule on both (bias.cu compiles it); the bias's gradient is summed in
// double by the CPU's loops and by matrix-vector products against ones on the GPU (BroadcastSum).
// The broadcasting helpers below serve Scale and PReLU too.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// A bottom seen as outer x dim x inner around an operand (bias, scale) spanning dim values.
struct Broadcast {
  int axis = 0, outer = 1, dim = 1, inner = 1;
};

// The shape of a learned operand for `bottom`: shape[axis : axis + num_axes] (num_axes -1: to the end). `me`
// and `field` ("scale_param") name the layer and parameter in errors.
std::vector<int> BroadcastOperandShape(const std::string& me, const std::string& field, const Blob& bottom, int axis,
                                       int num_axes);
// How `operand` (whose shape must equal the bottom's from the canonical `axis` on, or which has no axes)
// broadcasts over `bottom`; throws naming both shapes.
Broadcast BroadcastOver(const std::string& me, const std::string& field, const Blob& bottom, int axis,
                        const Blob& operand, const char* operand_name);
// An operand broadcast as `g` says, as one value per channel of axis 1 (`channels` of them): where it has one value
// per channel there, or one value for all. False for other operands.
bool PerChannelValues(const Broadcast& g, const Blob& operand, int channels, std::vector<float>* values);

// out[d] = alpha * (the sum of values[o, d, i] over o and i) + beta * out[d], on the context's device, as
// matrix-vector products against ones: on the GPU cuBLAS's reduction, not one thread per d looping over outer *
// inner values. `scratch` holds BroadcastSumScratch(g) floats (the sums over i, when outer and inner both exceed 1).
size_t BroadcastSumScratch(const Broadcast& g);
void BroadcastSum(Context& context, const Broadcast& g, float alpha, const float* values, float beta, float* out,
                  float* scratch);

// y = x + bias, value j of the bottom taking bias[(j / inner) % dim].
struct BiasForwardRule {
  const float* x;
  const float* bias;
  float* y;
  int dim, inner;
  CREMA_HOST_DEVICE void operator()(int j) const { y[j] = x[j] + bias[j / inner % dim]; }
};

class BiasLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Bias"; }
  // Backward reads no data (it sums the top's gradient).
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // A learned bias per channel of axis 1, or one for every value: scale 1, shift the bias.
  bool ChannelAffine(int channels, std::vector<float>* scale, std::vector<float>* shift) const override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  Blob* BiasOf(const std::vector<Blob*>& bottom) const { return bottom.size() > 1 ? bottom[1] : params_[0].get(); }
  // The rule on the layer's device: Forward_cpu and Forward_gpu.
  void ForwardByRule(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);

  Broadcast geometry_;
};

}  // namespace crema
