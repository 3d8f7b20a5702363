#include "layers/recurrent/recurrent.hpp"

#include <algorithm>
#include <string>

#include "core/elementwise.hpp"
#include "core/filler.hpp"
#include "core/math_functions.hpp"

namespace crema {

void RecurrentLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const RecurrentParameter& param = param_.recurrent_param();
  const std::string me = describe();
  H_ = static_cast<int>(param.num_output());
  CREMA_CHECK(H_ > 0) << me << ": recurrent_param.num_output must be given and positive";
  static_input_ = static_cast<int>(bottom.size()) > MinBottomBlobs();
  CheckShapes(bottom);
  D_ = bottom[0]->count(2);
  D_static_ = static_input_ ? bottom[2]->count(1) : 0;

  const int G = gate_width();
  const std::vector<const char*> input_names = input_blob_names();
  std::vector<ParamBlob> blobs = {{input_names[0], {G, D_}, false}, {input_names[1], {G}, true}};
  if (static_input_) blobs.push_back({input_names[2], {G, D_static_}, false});
  for (const ParamBlob& more : more_param_blobs()) blobs.push_back(more);
  std::vector<std::vector<int>> shapes;
  std::vector<const char*> names;
  std::string listing;
  for (const ParamBlob& blob : blobs) {
    shapes.push_back(blob.shape);
    names.push_back(blob.name);
    listing += (listing.empty() ? "" : ", ") + std::string(blob.name);
  }
  if (!params_.empty()) {
    // Parameters from a .caffemodel, in Caffe's order.
    CREMA_CHECK(params_.size() == blobs.size())
        << me << ": the stored parameters hold " << params_.size() << " blob(s), but the layer needs " << blobs.size()
        << " (" << listing << ")" << (static_input_ ? ", with the static input" : "");
    AdoptStoredParameters(shapes, names);
  } else {
    for (const ParamBlob& blob : blobs) {
      params_.push_back(std::make_shared<Blob>(blob.shape));
      Fill(blob.bias ? param.bias_filler() : param.weight_filler(), params_.back().get(), random());
    }
  }
  if (!expose_hidden()) {
    for (int k = 0; k < num_states(); ++k) carry_.push_back(AddInternalBlob(std::string(state_name(k)) + "_carry"));
  }
  AddInternalBlobs();
}

void RecurrentLayer::CheckShapes(const std::vector<Blob*>& bottom) const {
  const std::string me = describe();
  const Blob& x = *bottom[0];
  const Blob& cont = *bottom[1];
  CREMA_CHECK(x.num_axes() >= 2) << me << ": x (bottom 0) must have at least 2 axes (T, N, ...), but has shape "
                                 << x.shape_string();
  const int T = x.shape(0), N = x.shape(1);
  CREMA_CHECK(cont.num_axes() == 2 && cont.shape(0) == T && cont.shape(1) == N)
      << me << ": cont (bottom 1) must have shape (T, N) = (" << T << ", " << N << ") for x of shape "
      << x.shape_string() << ", but has shape " << cont.shape_string();
  if (static_input_) {
    const Blob& x_static = *bottom[2];
    CREMA_CHECK(x_static.num_axes() >= 1 && x_static.shape(0) == N)
        << me << ": the static input x_static (bottom 2) must have N = " << N << " items on its first axis (x has "
        << "shape " << x.shape_string() << "), but has shape " << x_static.shape_string();
  }
  if (expose_hidden()) {
    for (int k = 0; k < num_states(); ++k) {
      const Blob& state = *bottom[state_bottom(k)];
      CREMA_CHECK(state.num_axes() == 3 && state.shape(0) == 1 && state.shape(1) == N && state.shape(2) == H_)
          << me << ": " << state_name(k) << "_0 (bottom " << state_bottom(k) << ") must have shape (1, N, H) = (1, "
          << N << ", " << H_ << ") with expose_hidden, but has shape " << state.shape_string();
    }
  }
}

void RecurrentLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CheckShapes(bottom);
  const std::string me = describe();
  CREMA_CHECK(bottom[0]->count(2) == D_) << me << ": x of shape " << bottom[0]->shape_string() << " has "
                                         << bottom[0]->count(2) << " values per item from axis 2, but the weights "
                                         << input_blob_names()[0] << " (shape " << params_[0]->shape_string()
                                         << ") expect " << D_;
  if (static_input_) {
    CREMA_CHECK(bottom[2]->count(1) == D_static_)
        << me << ": x_static of shape " << bottom[2]->shape_string() << " has " << bottom[2]->count(1)
        << " values per item, but the weights " << input_blob_names()[2] << " (shape " << params_[2]->shape_string()
        << ") expect " << D_static_;
  }
  T_ = bottom[0]->shape(0);
  N_ = bottom[0]->shape(1);
  top[0]->Reshape({T_, N_, H_});
  for (int k = 0; k < static_cast<int>(top.size()) - 1; ++k) top[1 + k]->Reshape({1, N_, H_});
  if (carry_N_ != N_) {
    for (Blob* carry : carry_) {
      carry->Reshape({1, N_, H_});
      carry->set_data(0.f);
    }
    carry_N_ = N_;
  }
  // Scratch: the recurrent part of one step's gate input (N*G), the static input's part or its gradient (N*G), or
  // backward's running state gradients (2*N*H).
  RequestWorkspace(static_cast<size_t>(N_) * std::max(gate_width(), 2 * H_));
  ReshapeInternalBlobs();
}

void RecurrentLayer::ForwardInput(const std::vector<Blob*>& bottom, float* gate_input, float* scratch) {
  const Device d = device();
  const int G = gate_width(), TN = T_ * N_;
  gemm(context(), Transpose::kNo, Transpose::kYes, TN, G, D_, 1.f, bottom[0]->data_on(d), params_[0]->data_on(d), 0.f,
       gate_input);
  gemm(context(), Transpose::kNo, Transpose::kNo, TN, G, 1, 1.f, context().ones(TN), params_[1]->data_on(d), 1.f,
       gate_input);
  if (!static_input_) return;
  // The static part (N, G), the same at every step: added to the T steps' rows (T, N*G) as a product with ones.
  gemm(context(), Transpose::kNo, Transpose::kYes, N_, G, D_static_, 1.f, bottom[2]->data_on(d), params_[2]->data_on(d),
       0.f, scratch);
  gemm(context(), Transpose::kNo, Transpose::kNo, T_, N_ * G, 1, 1.f, context().ones(T_), scratch, 1.f, gate_input);
}

void RecurrentLayer::BackwardInput(const std::vector<Blob*>& bottom, const std::vector<bool>& propagate_down,
                                   const float* gate_diff, float* scratch) {
  const Device d = device();
  const int G = gate_width(), TN = T_ * N_;
  if (param_propagate_down(0)) {
    gemm(context(), Transpose::kYes, Transpose::kNo, G, D_, TN, 1.f, gate_diff, bottom[0]->data_on(d), 1.f,
         params_[0]->mutable_diff_on(d));
  }
  if (param_propagate_down(1)) {
    gemv(context(), Transpose::kYes, TN, G, 1.f, gate_diff, context().ones(TN), 1.f, params_[1]->mutable_diff_on(d));
  }
  if (propagate_down[0]) {
    gemm(context(), Transpose::kNo, Transpose::kNo, TN, D_, G, 1.f, gate_diff, params_[0]->data_on(d), 0.f,
         bottom[0]->mutable_diff_on(d));
  }
  if (!static_input_ || (!param_propagate_down(2) && !propagate_down[2])) return;
  // The static part enters every time step: its gradient is the sum over t of the rows (T, N*G).
  float* static_sum = scratch;
  gemv(context(), Transpose::kYes, T_, N_ * G, 1.f, gate_diff, context().ones(T_), 0.f, static_sum);
  if (param_propagate_down(2)) {
    gemm(context(), Transpose::kYes, Transpose::kNo, G, D_static_, N_, 1.f, static_sum, bottom[2]->data_on(d), 1.f,
         params_[2]->mutable_diff_on(d));
  }
  if (propagate_down[2]) {
    gemm(context(), Transpose::kNo, Transpose::kNo, N_, D_static_, G, 1.f, static_sum, params_[2]->data_on(d), 0.f,
         bottom[2]->mutable_diff_on(d));
  }
}

void RecurrentLayer::InitialState(const std::vector<Blob*>& bottom, int k, float* dst) {
  const Blob* src = expose_hidden() ? bottom[state_bottom(k)] : carry_[k];
  copy(context(), N_ * H_, src->data_on(device()), dst);
}

void RecurrentLayer::FinalState(const std::vector<Blob*>& top, int k, const float* src) {
  Blob* dst = expose_hidden() ? top[1 + k] : carry_[k];
  copy(context(), N_ * H_, src, dst->mutable_data_on(device()));
}

const float* RecurrentLayer::FinalStateDiff(const std::vector<Blob*>& top, int k) const {
  return expose_hidden() ? top[1 + k]->diff_on(device()) : nullptr;
}

float* RecurrentLayer::InitialStateDiff(const std::vector<Blob*>& bottom, const std::vector<bool>& propagate_down,
                                        int k) const {
  if (!expose_hidden() || !propagate_down[state_bottom(k)]) return nullptr;
  return bottom[state_bottom(k)]->mutable_diff_on(device());
}

void RecurrentLayer::AccumulateRecurrentWeightDiff(const std::vector<Blob*>& bottom, float* gate_diff, const float* h,
                                                   Blob* weights) {
  const Device d = device();
  const int G = gate_width(), TN = T_ * N_;
  for_each_element(context(), TN * G, RecurrentContRule{bottom[1]->data_on(d), gate_diff, gate_diff, G});
  gemm(context(), Transpose::kYes, Transpose::kNo, G, H_, TN, 1.f, gate_diff, h, 1.f, weights->mutable_diff_on(d));
}

void RecurrentLayer::CheckNoContGradient(const std::vector<bool>& propagate_down) const {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": cont (the sequence continuation flags) has no gradient; "
                                  << "set propagate_down: false for it";
}

}  // namespace crema
