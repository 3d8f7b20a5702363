#include "layers/recurrent/rnn.hpp"

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"

namespace crema {

void RNNLayer::AddInternalBlobs() {
  h_ = AddInternalBlob("h");
  o_ = AddInternalBlob("o");
}

void RNNLayer::ReshapeInternalBlobs() {
  h_->Reshape({T_ + 1, N_, H_});
  o_->Reshape({T_, N_, H_});
}

void RNNLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const int H = H_, NH = N_ * H_, TN = T_ * N_;
  const int W_hh_index = first_more_blob();
  float* recurrent = workspace();  // h_{t-1} W_hh^T, N x H
  float* h = h_->mutable_data_on(d);
  const float* cont = bottom[1]->data_on(d);
  const float* W_hh = params_[W_hh_index]->data_on(d);
  // The pre-activations of h_1..h_T are built in place, then squashed step by step.
  ForwardInput(bottom, h + NH, recurrent);
  InitialState(bottom, 0, h);
  for (int t = 0; t < T_; ++t) {
    gemm(context(), Transpose::kNo, Transpose::kYes, N_, H, H, 1.f, h + static_cast<size_t>(t) * NH, W_hh, 0.f,
         recurrent);
    for_each_element(
        context(), NH,
        RNNStepForwardRule{h + static_cast<size_t>(t + 1) * NH, recurrent, cont + static_cast<size_t>(t) * N_, H});
  }
  float* o = o_->mutable_data_on(d);
  gemm(context(), Transpose::kNo, Transpose::kYes, TN, H, H, 1.f, h + NH, params_[W_hh_index + 1]->data_on(d), 0.f, o);
  gemm(context(), Transpose::kNo, Transpose::kNo, TN, H, 1, 1.f, context().ones(TN),
       params_[W_hh_index + 2]->data_on(d), 1.f, o);
  for_each_element(context(), TN * H, RNNOutputRule{o, top[0]->mutable_data_on(d)});
  FinalState(top, 0, h + static_cast<size_t>(T_) * NH);
}

void RNNLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  CheckNoContGradient(propagate_down);
  const Device d = device();
  const int H = H_, NH = N_ * H_, TN = T_ * N_;
  const int W_hh_index = first_more_blob(), W_ho_index = W_hh_index + 1, b_o_index = W_hh_index + 2;
  float* dh_prev = workspace();  // diff_t W_hh: the gradient of cont_t h_{t-1}, N x H
  const float* h = h_->data_on(d);
  float* h_diff = h_->mutable_diff_on(d);
  float* o_diff = o_->mutable_diff_on(d);
  const float* cont = bottom[1]->data_on(d);
  // Output squashing and projection: o_diff is the gradient of W_ho h_t + b_o.
  for_each_element(context(), TN * H, RNNOutputBackwardRule{o_->data_on(d), top[0]->diff_on(d), o_diff});
  if (param_propagate_down(W_ho_index)) {
    gemm(context(), Transpose::kYes, Transpose::kNo, H, H, TN, 1.f, o_diff, h + NH, 1.f,
         params_[W_ho_index]->mutable_diff_on(d));
  }
  if (param_propagate_down(b_o_index)) {
    gemv(context(), Transpose::kYes, TN, H, 1.f, o_diff, context().ones(TN), 1.f,
         params_[b_o_index]->mutable_diff_on(d));
  }
  // h_diff (rows 1..T) first holds the gradient of h_t from the outputs, then that of its pre-activation.
  gemm(context(), Transpose::kNo, Transpose::kNo, TN, H, H, 1.f, o_diff, params_[W_ho_index]->data_on(d), 0.f,
       h_diff + NH);
  const float* W_hh = params_[W_hh_index]->data_on(d);
  float* h_0_diff = InitialStateDiff(bottom, propagate_down, 0);
  for (int t = T_ - 1; t >= 0; --t) {
    float* diff_t = h_diff + static_cast<size_t>(t + 1) * NH;
    const bool last = t == T_ - 1;
    for_each_element(
        context(), NH,
        RNNStepBackwardRule{h + static_cast<size_t>(t + 1) * NH, diff_t, last ? FinalStateDiff(top, 0) : dh_prev,
                            last ? nullptr : cont + static_cast<size_t>(t + 1) * N_, H});
    if (t > 0 || h_0_diff != nullptr)
      gemm(context(), Transpose::kNo, Transpose::kNo, N_, H, H, 1.f, diff_t, W_hh, 0.f, dh_prev);
  }
  if (h_0_diff != nullptr && T_ > 0) {
    for_each_element(context(), NH, RecurrentContRule{cont, dh_prev, h_0_diff, H});
  } else if (h_0_diff != nullptr) {
    copy(context(), NH, FinalStateDiff(top, 0), h_0_diff);
  }
  BackwardInput(bottom, propagate_down, h_diff + NH, workspace());
  if (param_propagate_down(W_hh_index))
    AccumulateRecurrentWeightDiff(bottom, h_diff + NH, h, params_[W_hh_index].get());
}

}  // namespace crema
