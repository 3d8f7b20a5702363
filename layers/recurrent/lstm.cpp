#include "layers/recurrent/lstm.hpp"

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"

namespace crema {

void LSTMLayer::AddInternalBlobs() {
  gates_ = AddInternalBlob("gates");
  c_ = AddInternalBlob("c");
  h_ = AddInternalBlob("h");
}

void LSTMLayer::ReshapeInternalBlobs() {
  gates_->Reshape({T_, N_, 4 * H_});
  c_->Reshape({T_ + 1, N_, H_});
  h_->Reshape({T_ + 1, N_, H_});
}

void LSTMLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const int H = H_, G = 4 * H_, NH = N_ * H_;
  float* recurrent = workspace();  // h_{t-1} W_hc^T, N x G
  float* gates = gates_->mutable_data_on(d);
  float* c = c_->mutable_data_on(d);
  float* h = h_->mutable_data_on(d);
  const float* cont = bottom[1]->data_on(d);
  const float* W_hc = params_[first_more_blob()]->data_on(d);
  float* output = top[0]->mutable_data_on(d);
  ForwardInput(bottom, gates, recurrent);
  InitialState(bottom, 0, h);
  InitialState(bottom, 1, c);
  for (int t = 0; t < T_; ++t) {
    const size_t state = static_cast<size_t>(t) * NH;
    gemm(context(), Transpose::kNo, Transpose::kYes, N_, G, H, 1.f, h + state, W_hc, 0.f, recurrent);
    for_each_element(
        context(), NH,
        LSTMStepForwardRule{gates + static_cast<size_t>(t) * N_ * G, recurrent, cont + static_cast<size_t>(t) * N_,
                            c + state, c + state + NH, h + state + NH, output + state, H});
  }
  FinalState(top, 0, h + static_cast<size_t>(T_) * NH);
  FinalState(top, 1, c + static_cast<size_t>(T_) * NH);
}

void LSTMLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  CheckNoContGradient(propagate_down);
  const Device d = device();
  const int H = H_, G = 4 * H_, NH = N_ * H_;
  const int W_hc_index = first_more_blob();
  float* dc = workspace();   // the gradient of c_t from step t + 1 on, then of c_{t-1}
  float* dh_prev = dc + NH;  // diff_t W_hc: the gradient of cont_t h_{t-1}
  const float* gates = gates_->data_on(d);
  float* gate_diff = gates_->mutable_diff_on(d);
  const float* c = c_->data_on(d);
  const float* h = h_->data_on(d);
  const float* cont = bottom[1]->data_on(d);
  const float* W_hc = params_[W_hc_index]->data_on(d);
  const float* top_diff = top[0]->diff_on(d);
  const float* c_T_diff = FinalStateDiff(top, 1);
  if (c_T_diff != nullptr) {
    copy(context(), NH, c_T_diff, dc);
  } else {
    set(context(), NH, 0.f, dc);
  }
  float* h_0_diff = InitialStateDiff(bottom, propagate_down, 0);
  for (int t = T_ - 1; t >= 0; --t) {
    const size_t state = static_cast<size_t>(t) * NH;
    float* diff_t = gate_diff + static_cast<size_t>(t) * N_ * G;
    const bool last = t == T_ - 1;
    for_each_element(context(), NH,
                     LSTMStepBackwardRule{gates + static_cast<size_t>(t) * N_ * G, c + state, c + state + NH,
                                          top_diff + state, last ? FinalStateDiff(top, 0) : dh_prev,
                                          last ? nullptr : cont + static_cast<size_t>(t + 1) * N_,
                                          cont + static_cast<size_t>(t) * N_, dc, diff_t, H});
    if (t > 0 || h_0_diff != nullptr)
      gemm(context(), Transpose::kNo, Transpose::kNo, N_, H, G, 1.f, diff_t, W_hc, 0.f, dh_prev);
  }
  if (h_0_diff != nullptr && T_ > 0) {
    for_each_element(context(), NH, RecurrentContRule{cont, dh_prev, h_0_diff, H});
  } else if (h_0_diff != nullptr) {
    copy(context(), NH, FinalStateDiff(top, 0), h_0_diff);
  }
  float* c_0_diff = InitialStateDiff(bottom, propagate_down, 1);
  if (c_0_diff != nullptr) copy(context(), NH, dc, c_0_diff);
  BackwardInput(bottom, propagate_down, gate_diff, workspace());
  if (param_propagate_down(W_hc_index)) AccumulateRecurrentWeightDiff(bottom, gate_diff, h, params_[W_hc_index].get());
}

}  // namespace crema
