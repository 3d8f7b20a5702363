#include "layers/layer.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/half_products.hpp"
#include "core/math_functions.hpp"
#include "layers/neuron/fused_activation.hpp"

namespace crema {

Layer::Layer(const LayerParameter& param, std::shared_ptr<Context> context)
    : param_(param), context_(context ? std::move(context) : std::make_shared<Context>()) {
  // Parameters stored in the LayerParameter (a .caffemodel layer, or a net built from one) come in with it.
  for (int i = 0; i < param_.blobs_size(); ++i) {
    params_.push_back(std::make_shared<Blob>());
    params_.back()->FromProto(param_.blobs(i));
  }
  param_.clear_blobs();
}

Precision SchemaPrecision(::caffe::Precision precision) {
  switch (precision) {
    case ::caffe::BFLOAT16:
      return Precision::kBfloat16;
    case ::caffe::FLOAT16:
      return Precision::kFloat16;
    default:
      return Precision::kFloat32;
  }
}

Precision Layer::requested_precision() const {
  return param_.has_precision() ? SchemaPrecision(param_.precision()) : context_->precision();
}

std::string Layer::describe() const { return "layer '" + name() + "' (" + type() + ")"; }

void Layer::CheckArity(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const {
  const int nb = static_cast<int>(bottom.size());
  const int nt = static_cast<int>(top.size());
  if (ExactNumBottomBlobs() >= 0)
    CREMA_CHECK(nb == ExactNumBottomBlobs())
        << describe() << " takes " << ExactNumBottomBlobs() << " bottom blob(s), but " << nb << " are given";
  if (MinBottomBlobs() >= 0)
    CREMA_CHECK(nb >= MinBottomBlobs()) << describe() << " takes at least " << MinBottomBlobs()
                                        << " bottom blob(s), but " << nb << " are given";
  if (MaxBottomBlobs() >= 0)
    CREMA_CHECK(nb <= MaxBottomBlobs()) << describe() << " takes at most " << MaxBottomBlobs()
                                        << " bottom blob(s), but " << nb << " are given";
  if (ExactNumTopBlobs() >= 0)
    CREMA_CHECK(nt == ExactNumTopBlobs())
        << describe() << " produces " << ExactNumTopBlobs() << " top blob(s), but " << nt << " are named";
  if (MinTopBlobs() >= 0)
    CREMA_CHECK(nt >= MinTopBlobs()) << describe() << " produces at least " << MinTopBlobs() << " top blob(s), but "
                                     << nt << " are named";
  if (MaxTopBlobs() >= 0)
    CREMA_CHECK(nt <= MaxTopBlobs()) << describe() << " produces at most " << MaxTopBlobs() << " top blob(s), but "
                                     << nt << " are named";
  if (EqualNumBottomTopBlobs())
    CREMA_CHECK(nb == nt) << describe() << " needs as many tops as bottoms, but has " << nb << " bottom(s) and " << nt
                          << " top(s)";
}

Quantization QuantizationOf(const QuantizationParameter& q, const std::string& who) {
  CREMA_CHECK(std::isfinite(q.input_scale()) && q.input_scale() > 0)
      << who << ": quantization.input_scale must be a positive number (it is " << q.input_scale() << ")";
  return {q.input_unsigned() ? ElementType::kUInt8 : ElementType::kInt8, q.input_scale()};
}

std::vector<Blob*> Layer::OwnBottoms(const std::vector<Blob*>& bottom) const {
  if (!fused_sum_) return bottom;
  CREMA_CHECK(!bottom.empty()) << describe() << ": a fused sum needs its summand as the last bottom";
  return std::vector<Blob*>(bottom.begin(), bottom.end() - 1);
}

void Layer::ReshapeAll(const std::vector<Blob*>& all_bottoms, const std::vector<Blob*>& top) {
  const std::vector<Blob*> bottom = OwnBottoms(all_bottoms);
  summand_ = fused_sum_ ? all_bottoms.back() : nullptr;
  try {
    Reshape(bottom, top);
  } catch (...) {
    summand_ = nullptr;
    throw;
  }
  summand_ = nullptr;
}

void Layer::SetUp(const std::vector<Blob*>& all_bottoms, const std::vector<Blob*>& top) {
  const std::vector<Blob*> bottom = OwnBottoms(all_bottoms);
  CheckArity(bottom, top);
  LayerSetUp(bottom, top);
  CREMA_CHECK(lent_taken_ == lent_internal_.size())
      << describe() << ": the layer it is part of lent it " << lent_internal_.size() << " internal blob(s), but it "
      << "took " << lent_taken_;
  MakeTopViews(bottom, top);
  ReshapeAll(all_bottoms, top);
  if (fused_sum_)
    CREMA_CHECK(all_bottoms.back()->shape() == top[0]->shape())
        << describe() << ": the summand of its fused sum has shape " << all_bottoms.back()->shape_string()
        << ", its top " << top[0]->shape_string();
  // Loss weights: explicit ones from the prototxt win over the layer's defaults (a loss's 1).
  if (param_.loss_weight_size() > 0) {
    CREMA_CHECK(param_.loss_weight_size() == static_cast<int>(top.size()))
        << describe() << ": loss_weight is given " << param_.loss_weight_size() << " time(s), but the layer has "
        << top.size() << " top(s); give one per top";
    for (int i = 0; i < param_.loss_weight_size(); ++i) set_loss(i, param_.loss_weight(i));
  } else {
    for (int i = 0; i < static_cast<int>(top.size()); ++i)
      if (DefaultLossWeight(i) != 0.f) set_loss(i, DefaultLossWeight(i));
  }
  if (param_propagate_down_.size() < params_.size()) param_propagate_down_.resize(params_.size(), true);
}

void Layer::AdoptStoredParameters(const std::vector<std::vector<int>>& expected,
                                  const std::vector<const char*>& names) {
  CREMA_CHECK(params_.size() == expected.size())
      << describe() << ": the stored parameters hold " << params_.size() << " blob(s), but the layer needs "
      << expected.size() << " (bias_term is " << (expected.size() > 1 ? "true" : "false") << ")";
  for (size_t i = 0; i < expected.size(); ++i) {
    Blob& blob = *params_[i];
    std::vector<int> legacy = expected[i];
    while (legacy.size() < 4) legacy.insert(legacy.begin(), 1);
    CREMA_CHECK(blob.shape() == expected[i] || blob.shape() == legacy)
        << describe() << ": the stored " << names[i] << " blob has shape " << blob.shape_string()
        << ", but the layer's parameters give " << ShapeString(expected[i]);
    blob.Reshape(expected[i]);
  }
}

int Layer::CanonicalAxis(const Blob& blob, int axis, const std::string& field) const {
  CREMA_CHECK(axis >= -blob.num_axes() && axis < blob.num_axes())
      << describe() << ": " << field << " " << axis << " is outside the input of shape " << blob.shape_string();
  return blob.CanonicalAxisIndex(axis);
}

Layer::ClassAxis Layer::SplitAtClassAxis(const Blob& blob, int axis, const std::string& field) const {
  const int canonical = CanonicalAxis(blob, axis, field);
  return ClassAxis{canonical, blob.count(0, canonical), blob.shape(canonical), blob.count(canonical + 1)};
}

void Layer::CheckLabelCount(const Blob& labels, const Blob& scores, const ClassAxis& split) const {
  CREMA_CHECK(labels.count() == split.outer * split.inner)
      << describe() << ": the labels (shape " << labels.shape_string() << ") must hold one label per prediction, "
      << split.outer * split.inner << " for scores of shape " << scores.shape_string()
      << " with the classes along axis " << split.axis;
}

int Layer::CheckLabels(const Blob& labels, int classes, const int* ignore_label, std::vector<int>* per_class) {
  const float* values = labels.cpu_data();
  int valid = 0;
  for (int index = 0; index < labels.count(); ++index) {
    const float value = values[index];
    // Only a value whose truncation fits an int has a class to compare; written so that NaN has none.
    const bool readable = value > -2147483648.f && value < 2147483648.f;
    const bool ignored = readable && ignore_label != nullptr && LabelClass(value) == *ignore_label;
    CREMA_CHECK(ignored || (value > -1.f && value < static_cast<float>(classes)))
        << describe() << ": label " << value << " at index " << index << " of the labels (shape "
        << labels.shape_string() << ") is not a class in [0, " << classes << ")"
        << (ignore_label != nullptr ? " and is not the ignore_label" : "");
    std::ostringstream named;
    named << "label " << value << " at index " << index << " of the labels";
    NoteFractional(value, named.str());
    if (ignored) continue;
    if (per_class != nullptr) ++(*per_class)[LabelClass(value)];
    ++valid;
  }
  return valid;
}

void Layer::NoteFractional(float value, const std::string& named) {
  if (warned_fractional_ || std::trunc(value) == value) return;
  warned_fractional_ = true;
  LOG(WARNING) << describe() << ": " << named << " is not a whole number; read as " << LabelClass(value)
               << ", truncated toward zero as Caffe does (said once for this layer)";
}

bool Layer::BackwardReadsInPlace(int index) const {
  return BackwardReadsTop(index) || (BackwardReadsBottom(index) && (index != 0 || kept_input_ == nullptr));
}

void Layer::KeepInputWhenInPlace(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (bottom[0] == top[0] && kept_input_ == nullptr)
    kept_input_ = AddInternalBlob("input", InternalLifetime::kUntilBackward);
}

bool Layer::BorrowKeptInput(const Blob* source, const std::string& source_name) {
  if (kept_input_ == nullptr) return false;
  borrowed_input_ = source;
  borrowed_name_ = source_name;
  if (source != nullptr) kept_input_->Reshape({0});  // else the next Reshape sizes the copy again
  return true;
}

void Layer::ReshapeKeptInput(const Blob& bottom) {
  if (kept_input_ == nullptr) return;
  // Where no backward will run, nothing reads the copy; where another layer's values stand in for it, none is made.
  kept_input_->Reshape(backward_planned() && borrowed_input_ == nullptr ? bottom.shape() : std::vector<int>{0});
  if (borrowed_input_ != nullptr && backward_planned()) {
    CREMA_CHECK(borrowed_input_->count() == bottom.count() && borrowed_input_->layout() == bottom.layout())
        << describe() << ": reads its input in backward from '" << borrowed_name_ << "' (shape "
        << borrowed_input_->shape_string() << ", " << LayoutName(borrowed_input_->layout())
        << " layout), which no longer matches the input (shape " << bottom.shape_string() << ", "
        << LayoutName(bottom.layout()) << " layout)";
  }
}

void Layer::KeepInput(const Blob& bottom) {
  const Device d = device();
  if (kept_input_ != nullptr && borrowed_input_ == nullptr && backward_planned())
    copy(*context_, bottom.count(), bottom.data_on(d), kept_input_->mutable_data_on(d));
}

void Layer::set_loss(int top_index, float weight) {
  if (static_cast<int>(loss_.size()) <= top_index) loss_.resize(top_index + 1, 0.f);
  loss_[top_index] = weight;
}

void Layer::ZeroParamGradientInBackward(int index) {
  CREMA_CHECK(WritesZeroedParamGradients() && param_propagate_down(index))
      << describe() << ": parameter " << index << "'s gradient cannot be left for its backward to write";
  if (static_cast<int>(zero_pending_.size()) <= index) zero_pending_.resize(index + 1, false);
  zero_pending_[index] = true;
}

float Layer::ParamGradientKeep(int index) {
  if (!param_gradient_zero_pending(index)) return 1.f;
  zero_pending_[index] = false;
  return 0.f;
}

void Layer::set_param_propagate_down(int index, bool value) {
  if (static_cast<int>(param_propagate_down_.size()) <= index) param_propagate_down_.resize(index + 1, true);
  param_propagate_down_[index] = value;
}

float Layer::Forward(const std::vector<Blob*>& all_bottoms, const std::vector<Blob*>& top) {
  const Device device = this->device();
  // No copy of the bottoms on every pass of every layer: only a fused sum's layer leaves one out.
  std::vector<Blob*> own;
  const std::vector<Blob*>& bottom = fused_sum_ ? (own = OwnBottoms(all_bottoms)) : all_bottoms;
  summand_ = fused_sum_ ? all_bottoms.back() : nullptr;
  if (RunsGpuCode()) {
    Forward_gpu(bottom, top);
  } else {
    Forward_cpu(bottom, top);
  }
  if (fused_sum_ && !ComputesFusedSum()) {
    CREMA_CHECK(!ComputesFusedActivation()) << describe() << ": its engine applies the activation before the sum";
    ApplyFusedSum(context(), *summand_, top[0]);
  }
  summand_ = nullptr;
  if (fused_activation_.kind != FusedActivation::kNone && !ComputesFusedActivation())
    for (Blob* blob : top) ApplyFusedActivation(context(), fused_activation_, blob);
  // A top with a loss weight contributes weight * sum(top) to the objective: its diff is set to the weight (so
  // that backward starts from it) and the loss is the dot product of data and diff, on the device.
  double loss = 0;
  for (size_t i = 0; i < top.size(); ++i) {
    const float weight = this->loss(static_cast<int>(i));
    if (weight == 0.f) continue;
    const int n = top[i]->count();
    set(context(), n, weight, top[i]->mutable_diff_on(device));
    loss += dot(context(), n, top[i]->data_on(device), top[i]->diff_on(device));
  }
  return static_cast<float>(loss);
}

void Layer::AbsorbChannelAffine(const std::vector<float>&, const std::vector<float>&) {
  CREMA_FAIL() << describe() << " cannot absorb a per-channel scale and shift into its parameters";
}

std::string FusedActivation::describe() const {
  std::ostringstream out;
  switch (kind) {
    case kNone:
      return "none";
    case kReLU:
      out << "ReLU";
      if (alpha != 0.f) out << "(negative_slope " << alpha << ")";
      break;
    case kELU:
      out << "ELU(alpha " << alpha << ")";
      break;
    case kSigmoid:
      return "Sigmoid";
    case kTanH:
      return "TanH";
    case kClip:
      out << "Clip(" << alpha << ", " << beta << ")";
      break;
  }
  return out.str();
}

void Layer::set_fused_activation_with_backward(const FusedActivation& activation) {
  CREMA_CHECK(activation.kind == FusedActivation::kReLU && activation.alpha >= 0.f)
      << describe() << ": only a ReLU of slope 0 or more fuses into a layer that runs backward, not "
      << activation.describe();
  fused_activation_ = activation;
  activation_with_backward_ = true;
}

void Layer::Backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                     const std::vector<Blob*>& bottom) {
  CREMA_CHECK(fused_activation_.kind == FusedActivation::kNone || activation_with_backward_)
      << describe() << " has the activation " << fused_activation_.describe()
      << " fused into it for inference, and no backward pass";
  // The ReLU's backward, in place on the output's gradient (as the ReLU's own step in place left it).
  if (activation_with_backward_)
    for (Blob* blob : top) ApplyFusedActivationBackward(context(), fused_activation_, blob);
  if (RunsGpuCode()) {
    Backward_gpu(top, propagate_down, bottom);
  } else {
    Backward_cpu(top, propagate_down, bottom);
  }
}

void Layer::MakeTopViews(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const {
  for (const TopView& view : TopViews(static_cast<int>(top.size()))) {
    CREMA_CHECK(top[view.top] != bottom[view.bottom])
        << describe() << " cannot run in place (top " << view.top << " is its bottom " << view.bottom
        << "); give the top a name of its own";
    top[view.top]->ViewOf(*bottom[view.bottom], view.diff);
  }
}

void Layer::LendInternalBlobs(std::vector<std::shared_ptr<Blob>> blobs) {
  lent_internal_ = std::move(blobs);
  lent_taken_ = 0;
}

Blob* Layer::AddInternalBlob(const std::string& what, InternalLifetime lifetime) {
  internal_blobs_.push_back(lent_taken_ < lent_internal_.size() ? lent_internal_[lent_taken_++]
                                                                : std::make_shared<Blob>());
  internal_blob_names_.push_back(name() + "." + what);
  internal_lifetimes_.push_back(lifetime);
  return internal_blobs_.back().get();
}

void Layer::RequestWorkspace(size_t floats) {
  workspace_floats_ = floats;
  // A layer on its own sizes a buffer of its own here; a net's shared workspace is sized by the net after every
  // Reshape.
  if (workspace_is_shared_) return;
  if (!workspace_) workspace_ = std::make_shared<Blob>();
  if (static_cast<size_t>(workspace_->count()) < floats) workspace_->Reshape({static_cast<int>(floats)});
}

bool Layer::RunsGpuCode() const { return device() == Device::kGPU || context_->gpu_code_on_host(); }

Precision Layer::GpuCodePrecision() const {
  const Precision want = requested_precision();
  return want != Precision::kFloat32 && RunsGpuCode() && DeviceMultipliesIn(*context_, want) ? want
                                                                                             : Precision::kFloat32;
}

Quantization Layer::HalfOperands(Precision half, int bottom) const {
  // The summand follows the layer's own bottoms (one at least; a layer made alone may name none).
  const bool summand = fused_sum_ && bottom >= std::max(1, param_.bottom_size());
  return half == Precision::kFloat32 || summand ? Quantization{} : Quantization{HalfElementType(half), 1.f};
}

Quantization Layer::HalfInput(bool reads_half) const {
  return reads_half ? Quantization{HalfElementType(GpuCodePrecision()), 1.f} : Quantization{};
}

bool Layer::BottomIsHalf(const Blob& blob, int bottom, bool reads_half) const {
  if (!IsHalfType(blob.data_type())) return false;
  CREMA_CHECK(reads_half && blob.data_type() == HalfElementType(GpuCodePrecision()))
      << describe() << ": bottom " << bottom << " lies in " << ElementTypeName(blob.data_type())
      << ", which this layer does not read";
  return true;
}

bool Layer::WritesHalfTop(Precision half, ElementType type) const {
  const bool relu_or_none =
      fused_activation_.kind == FusedActivation::kNone || fused_activation_.kind == FusedActivation::kReLU;
  return half != Precision::kFloat32 && type == HalfElementType(half) && !fused_sum_ && relu_or_none;
}

bool Layer::HalfTopApplies(const FusedActivation& activation) const {
  return activation.kind == FusedActivation::kReLU && GpuCodePrecision() != Precision::kFloat32;
}

HalfTopFinish Layer::HalfTopFinishOf(const float* bias, int spatial, int channels) const {
  HalfTopFinish finish;
  finish.bias = bias;
  finish.spatial = spatial;
  finish.channels = channels;
  finish.relu = fused_activation_.kind == FusedActivation::kReLU;
  finish.slope = fused_activation_.alpha;
  return finish;
}

bool Layer::AnyHalfTop(const std::vector<Blob*>& top) {
  return std::any_of(top.begin(), top.end(), [](const Blob* blob) { return IsHalfType(blob->data_type()); });
}

void Layer::FinishFloatTops(const std::vector<Blob*>& top) {
  if (fused_activation_.kind == FusedActivation::kNone) return;
  for (Blob* blob : top)
    if (!IsHalfType(blob->data_type())) ApplyFusedActivation(*context_, fused_activation_, blob);
}

float* Layer::workspace() {
  CREMA_CHECK(workspace_ && static_cast<size_t>(workspace_->count()) >= workspace_floats_)
      << describe() << ": the workspace holds " << (workspace_ ? workspace_->count() : 0) << " values, but the layer "
      << "asked for " << workspace_floats_ << " (the net sizes it after every Reshape)";
  return workspace_->mutable_data_on(device());
}

void Layer::Forward_gpu(const std::vector<Blob*>&, const std::vector<Blob*>&) {
  CREMA_FAIL() << describe() << (engine_.empty() ? "" : " engine '" + engine_ + "'")
               << ": forward is not implemented on the GPU yet; run on the CPU (no --gpu flag, or solver_mode: CPU)";
}

void Layer::Backward_gpu(const std::vector<Blob*>&, const std::vector<bool>&, const std::vector<Blob*>&) {
  CREMA_FAIL() << describe() << (engine_.empty() ? "" : " engine '" + engine_ + "'")
               << ": backward is not implemented on the GPU yet; run on the CPU (no --gpu flag, or solver_mode: CPU)";
}

void Layer::ToProto(LayerParameter* param, bool write_diff) const {
  *param = param_;
  param->clear_blobs();
  for (const auto& blob : params_) blob->ToProto(param->add_blobs(), write_diff);
}

RandomStream* Layer::random() {
  if (!random_) {
    random_ = std::make_unique<RandomStream>(RandomStream::DeriveSeed(context_->random_seed(), name()));
  }
  return random_.get();
}

bool Layer::Replayable() const {
  return std::find(internal_lifetimes_.begin(), internal_lifetimes_.end(), InternalLifetime::kAcrossPasses) ==
         internal_lifetimes_.end();
}

void Layer::PrepareReplay() { replay_random_ = random_ ? std::make_unique<RandomStream>(*random_) : nullptr; }

void Layer::Replay(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  random_ = replay_random_ ? std::make_unique<RandomStream>(*replay_random_) : nullptr;
  const bool updates = ForwardUpdatesParams();
  const Device d = device();
  if (updates) {
    replay_params_.resize(params_.size());
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!replay_params_[i]) replay_params_[i] = std::make_shared<Blob>();
      replay_params_[i]->ReshapeLike(*params_[i]);
      copy(*context_, params_[i]->count(), params_[i]->data_on(d), replay_params_[i]->mutable_data_on(d));
    }
  }
  Forward(bottom, top);
  if (updates)
    for (size_t i = 0; i < params_.size(); ++i)
      copy(*context_, params_[i]->count(), replay_params_[i]->data_on(d), params_[i]->mutable_data_on(d));
}

void Layer::SaveRuntimeState(LayerRuntimeState* state) const {
  state->set_layer(name());
  if (random_) state->set_random_stream(random_->Save());
}

void Layer::RestoreRuntimeState(const LayerRuntimeState& state) {
  if (state.has_random_stream()) random()->Restore(state.random_stream());
}

}  // namespace crema
