// Embed: a learned lookup table. Each bottom value is an integer index in [0, input_dim) and selects a row of
// the weights; the top has the bottom's shape with num_output added as a last axis (a bottom of shape (T, N)
// gives (T, N, num_output)). embed_param: num_output, input_dim (both required), bias_term (default true),
// weight_filler, bias_filler. Parameters: weights (input_dim, num_output), bias (num_output).
// The indices get no gradient (they are not differentiable); an index that is not an integer in range is an
// error naming its value and position.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class EmbedLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Embed"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int) const override { return false; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int Index(const Blob& indices, int position) const;
  int num_output_ = 0, input_dim_ = 0;
  bool bias_term_ = true;
};

}  // namespace crema
