// Net: turns a NetParameter into a fixed execution plan over layers and blobs, and runs it.
//
// Building a net is a pipeline of passes over data, each a function of its own:
//   FilterNet      keep the layers whose include/exclude rules match the net's phase, level and stages
//   UpgradeInputs  turn the deprecated net-level `input` fields into an Input layer
//   InsertSplits   give every consumer of a multiply-read blob its own copy (a Split layer)
//   build          create layers, wire blobs by name (in place where top == bottom), set up shapes,
//                  decide which steps need backward, collect and share learnable parameters
// The result is `plan()`: an ordered list of steps, each naming the layer and the blobs it reads and writes.
// Forward runs the steps in order, Backward in reverse. Later passes (memory planning, fusion) rewrite this
// plan; layers never see the net.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "layers/layer.hpp"

namespace crema {

struct PlanStep {
  int layer = -1;                    // index into layers()
  std::vector<int> bottoms;          // blob ids read
  std::vector<int> tops;             // blob ids written
  std::vector<bool> propagate_down;  // per bottom: compute its gradient
  bool needs_backward = false;
};

class Net {
 public:
  // Builds the net for `param`'s own state (param.state()).
  explicit Net(const NetParameter& param);
  // Reads a prototxt and builds it for the given phase, level and stages (overriding the file's state).
  Net(const std::string& path, Phase phase, int level = 0, const std::vector<std::string>& stages = {});

  // Runs the plan forward; returns the weighted sum of the loss tops.
  float Forward();
  // Runs one step of the plan (tools that time or inspect single steps use these).
  float ForwardStep(size_t step);
  void BackwardStep(size_t step);
  // Runs the plan backward from the loss tops, accumulating into parameter gradients.
  void Backward();
  float ForwardBackward() {
    float loss = Forward();
    Backward();
    return loss;
  }
  // Sets every learnable parameter's gradient to zero.
  void ClearParamDiffs();

  // Copies parameters from a trained net (by layer name; shapes must match). Layers absent from this net
  // are skipped with a log line.
  void CopyTrainedLayersFrom(const NetParameter& trained);
  // From a .caffemodel (binary) or, if the name ends in .prototxt/.txt, a text NetParameter.
  void CopyTrainedLayersFrom(const std::string& path);
  // Makes this net use `other`'s parameter memory for every layer present in both (test nets share the
  // training net's weights this way).
  void ShareTrainedLayersWith(const Net& other);
  // The net's layers with their parameters, as written to a .caffemodel.
  void ToProto(NetParameter* param, bool write_diff = false) const;

  // Runtime state of every layer that has one (data cursors, random streams), tagged with `net_name`.
  void SaveRuntimeState(const std::string& net_name, SolverState* state) const;
  void RestoreRuntimeState(const std::string& net_name, const SolverState& state);

  const std::string& name() const { return name_; }
  Phase phase() const { return phase_; }
  const std::vector<PlanStep>& plan() const { return plan_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  const std::vector<std::string>& layer_names() const { return layer_names_; }
  const std::vector<std::shared_ptr<Blob>>& blobs() const { return blobs_; }
  const std::vector<std::string>& blob_names() const { return blob_names_; }
  bool has_blob(const std::string& name) const { return blob_index_.count(name) > 0; }
  bool has_layer(const std::string& name) const { return layer_index_.count(name) > 0; }
  // Throw crema::Error naming the missing blob or layer.
  Blob* blob_by_name(const std::string& name) const;
  Layer* layer_by_name(const std::string& name) const;
  // Tops of Input layers, and blobs that no layer reads.
  const std::vector<Blob*>& input_blobs() const { return input_blobs_; }
  const std::vector<Blob*>& output_blobs() const { return output_blobs_; }
  const std::vector<int>& output_blob_indices() const { return output_blob_indices_; }
  float blob_loss_weight(int blob_id) const { return blob_loss_weights_[blob_id]; }

  // The parameters a solver updates (one entry per shared group), with their multipliers.
  const std::vector<Blob*>& learnable_params() const { return learnable_params_; }
  const std::vector<float>& params_lr() const { return params_lr_; }
  const std::vector<float>& params_weight_decay() const { return params_weight_decay_; }

  // After a forward that produced a non-finite loss: names the first layer and top that hold a NaN or an
  // infinity ("" when every top is finite).
  std::string DescribeFirstNonFinite() const;

  // Bytes held by activation blobs (data only), as the plan stands.
  size_t activation_bytes() const;

  // The passes (public for tests and tools).
  static NetParameter FilterNet(const NetParameter& param);
  static bool StateMeetsRule(const NetState& state, const NetStateRule& rule);
  static NetParameter UpgradeInputs(const NetParameter& param);
  static NetParameter InsertSplits(const NetParameter& param);

 private:
  void Build(const NetParameter& param);
  int AddTop(const LayerParameter& layer_param, int top_index, std::vector<int>* step_tops,
             const std::vector<int>& step_bottoms);
  void DecideBackward();
  void CollectParams();

  std::string name_;
  Phase phase_ = TEST;
  bool force_backward_ = false;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::string> layer_names_;
  std::map<std::string, int> layer_index_;
  std::vector<std::shared_ptr<Blob>> blobs_;
  std::vector<std::string> blob_names_;
  std::map<std::string, int> blob_index_;
  std::vector<float> blob_loss_weights_;
  std::vector<PlanStep> plan_;
  std::vector<bool> inserted_split_;  // per layer: added by InsertSplits, not written to .caffemodel
  std::vector<Blob*> input_blobs_;
  std::vector<Blob*> output_blobs_;
  std::vector<int> output_blob_indices_;
  std::vector<Blob*> learnable_params_;
  std::vector<float> params_lr_;
  std::vector<float> params_weight_decay_;
};

}  // namespace crema
