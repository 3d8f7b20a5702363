// The layer contract. A layer reads its bottom blobs and writes its top blobs in Forward, and turns top
// gradients into bottom (and parameter) gradients in Backward. It knows nothing of nets or solvers.
//
// A concrete layer:
//   - declares its arity (ExactNumBottomBlobs() etc.); the base class checks it once in SetUp;
//   - checks its parameters in LayerSetUp (naming the layer and field in any error) and creates its
//     parameter blobs there;
//   - computes its top shapes in Reshape, which runs at set-up and whenever a bottom's shape changes;
//   - implements Forward_cpu / Backward_cpu, and Forward_gpu / Backward_gpu when it has GPU code (until then
//     the GPU slots fail with an error naming the layer).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "core/common.hpp"
#include "core/random.hpp"

namespace crema {

class Layer {
 public:
  explicit Layer(const LayerParameter& param);
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // Checks arity, runs LayerSetUp and Reshape, and records the loss weights of the tops.
  void SetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  virtual void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {}
  virtual void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) = 0;

  // Runs the forward pass on the current device and returns the weighted loss of the tops.
  float Forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  void Backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom);

  virtual const char* type() const = 0;
  const std::string& name() const { return param_.name(); }
  const LayerParameter& layer_param() const { return param_; }
  Phase phase() const { return param_.phase(); }

  // Learned parameters (weights, biases).
  std::vector<std::shared_ptr<Blob>>& blobs() { return blobs_; }

  // Writes the layer's parameter and its blobs (with diffs if asked) for a .caffemodel.
  virtual void ToProto(LayerParameter* param, bool write_diff = false) const;

  // Declared arity; -1 means "no constraint".
  virtual int ExactNumBottomBlobs() const { return -1; }
  virtual int MinBottomBlobs() const { return -1; }
  virtual int MaxBottomBlobs() const { return -1; }
  virtual int ExactNumTopBlobs() const { return -1; }
  virtual int MinTopBlobs() const { return -1; }
  virtual int MaxTopBlobs() const { return -1; }
  virtual bool EqualNumBottomTopBlobs() const { return false; }
  // When true, the net creates anonymous tops up to MinTopBlobs/ExactNumTopBlobs if fewer are named.
  virtual bool AutoTopBlobs() const { return false; }
  // Whether force_backward may ask for the gradient of this bottom (false for labels, say).
  virtual bool AllowForceBackward(int bottom_index) const { return true; }
  // Whether top i may be the same blob as bottom i (in-place execution).
  virtual bool AllowsInPlace() const { return false; }

  float loss(int top_index) const { return top_index < static_cast<int>(loss_.size()) ? loss_[top_index] : 0.f; }
  void set_loss(int top_index, float weight);

  bool param_propagate_down(int index) const {
    return index < static_cast<int>(param_propagate_down_.size()) && param_propagate_down_[index];
  }
  void set_param_propagate_down(int index, bool value);

  // Runtime state for an exact resume (data cursors, random streams). The default saves the layer's
  // random stream if it has used one.
  virtual void SaveRuntimeState(LayerRuntimeState* state) const;
  virtual void RestoreRuntimeState(const LayerRuntimeState& state);
  // True for layers that read a data set (their cursor must be saved with the solver state).
  virtual bool HasRuntimeState() const { return random_ != nullptr; }

 protected:
  virtual void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) = 0;
  virtual void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) = 0;
  // Default GPU slots fail clearly; a layer with CUDA code overrides them.
  virtual void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  virtual void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom);

  // This layer's own random stream, seeded from the context's seed and the layer's name on first use.
  RandomStream* random();

  // Parameters that came with the LayerParameter (from a .caffemodel) must have the shapes this prototxt
  // implies; names[i] says what blob i is in errors ("weights", "bias"). Legacy files store every blob as 4-d
  // (num, channels, height, width), so the expected shape padded with leading ones is accepted too, and the
  // blob then takes the expected shape.
  void AdoptStoredParameters(const std::vector<std::vector<int>>& expected, const std::vector<const char*>& names);

  // The index in [0, num_axes) of `axis`, the value of this layer's parameter `field` (e.g.
  // "softmax_param.axis"), for `blob`; negative axes count from the end. Throws naming the layer, the field
  // and the blob's shape when the axis is out of range.
  int CanonicalAxis(const Blob& blob, int axis, const std::string& field) const;

  // "layer 'conv1' (Convolution)": the prefix of every error message about this layer.
  std::string describe() const;

  LayerParameter param_;
  std::vector<std::shared_ptr<Blob>> blobs_;
  std::vector<bool> param_propagate_down_;
  std::vector<float> loss_;

 private:
  void CheckArity(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const;
  std::unique_ptr<RandomStream> random_;
};

}  // namespace crema
