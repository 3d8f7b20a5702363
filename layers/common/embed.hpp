// Embed: a learned lookup table. Each bottom value is an integer index in [0, input_dim) and selects a row of
// the weights; the top has the bottom's shape with num_output added as a last axis (a bottom of shape (T, N)
// gives (T, N, num_output)). embed_param: num_output, input_dim (both required), bias_term (default true),
// weight_filler, bias_filler. Parameters: weights (input_dim, num_output), bias (num_output).
// The indices get no gradient (they are not differentiable). An index is read as Caffe reads it, truncated toward
// zero (LabelClass): a fractional one (2.7 reads as 2) is named in a warning once for the layer; one that is not
// in range once truncated (-1, input_dim, NaN) is an error naming its value and position.
// Runs on the CPU and the GPU (the rules below; embed.cu compiles them). Both check the indices on the host,
// where data layers write them. On the GPU the weights' gradient is a gather, not a scatter of atomic adds:
// each used row adds the gradients of the positions that picked it, in increasing order of position (the CPU's
// order, so both give the same sums, every run), from a list sorted on the host.
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// One value of the top per call: its index's row of the weights, plus the bias.
struct EmbedForwardRule {
  const float* indices;
  const float* weights;
  const float* bias;  // nullptr without bias_term
  float* top;
  int num_output;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const int o = i % num_output;
    const float value = weights[static_cast<long long>(LabelClass(indices[i / num_output])) * num_output + o];
    top[i] = bias != nullptr ? value + bias[o] : value;
  }
};

// One value of a used row of the weights' gradient per call (rows used, then outputs). `picks` lists, for
// `used` rows: the rows, used + 1 offsets, then the positions that picked each row: row u's from
// picks[used + u] to picks[used + u + 1].
struct EmbedWeightGradientRule {
  const float* top_diff;
  const float* picks;
  float* weight_diff;
  int num_output, used;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const int u = i / num_output, o = i % num_output;
    const float* offsets = picks + used;
    const float* positions = offsets + used + 1;
    float* value = weight_diff + static_cast<long long>(picks[u]) * num_output + o;
    float total = *value;
    for (int q = static_cast<int>(offsets[u]); q < static_cast<int>(offsets[u + 1]); ++q)
      total += top_diff[static_cast<long long>(positions[q]) * num_output + o];
    *value = total;
  }
};

class EmbedLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Embed"; }
  // Backward reads the indices, not the output.
  bool BackwardReadsTop(int) const override { return false; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int) const override { return false; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // The index at `position`, truncated toward zero; throws where it is out of range, warns (once) if fractional.
  int Index(const Blob& indices, int position);
  int num_output_ = 0, input_dim_ = 0;
  bool bias_term_ = true;
};

}  // namespace crema
