#include "layers/rnn.hpp"

#include <cmath>

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

void RNNLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int H = H_, NH = N_ * H_, TNH = T_ * NH;
  const int W_hh_index = first_more_blob();
  float* hc = workspace();       // cont_t * h_{t-1}, N x H
  float* static_part = hc + NH;  // N x H
  float* h = h_->mutable_cpu_data();
  const float* cont = bottom[1]->cpu_data();
  // The pre-activations of h_1..h_T are built in place, then squashed.
  ForwardInput(bottom, h + NH, static_part);
  InitialState(bottom, 0, h);
  for (int t = 0; t < T_; ++t) {
    const float* h_prev = h + static_cast<size_t>(t) * NH;
    float* h_t = h + static_cast<size_t>(t + 1) * NH;
    const float* cont_t = cont + static_cast<size_t>(t) * N_;
    for (int n = 0; n < N_; ++n)
      for (int d = 0; d < H; ++d) hc[n * H + d] = cont_t[n] * h_prev[n * H + d];
    cpu_gemm(Transpose::kNo, Transpose::kYes, N_, H, H, 1.f, hc, blobs_[W_hh_index]->cpu_data(), 1.f, h_t);
    if (static_input_) cpu_axpy(NH, 1.f, static_part, h_t);
    for (int k = 0; k < NH; ++k) h_t[k] = std::tanh(h_t[k]);
  }
  float* o = o_->mutable_cpu_data();
  const int TN = T_ * N_;
  cpu_gemm(Transpose::kNo, Transpose::kYes, TN, H, H, 1.f, h + NH, blobs_[W_hh_index + 1]->cpu_data(), 0.f, o);
  cpu_gemm(Transpose::kNo, Transpose::kNo, TN, H, 1, 1.f, context().ones(TN), blobs_[W_hh_index + 2]->cpu_data(), 1.f,
           o);
  for (int k = 0; k < TNH; ++k) o[k] = std::tanh(o[k]);
  cpu_copy(TNH, o, top[0]->mutable_cpu_data());
  FinalState(top, 0, h + static_cast<size_t>(T_) * NH);
}

void RNNLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  CheckNoContGradient(propagate_down);
  const int H = H_, NH = N_ * H_, TN = T_ * N_, TNH = T_ * NH;
  const int W_hh_index = first_more_blob(), W_ho_index = W_hh_index + 1, b_o_index = W_hh_index + 2;
  float* hc = workspace();       // N x H
  float* dh_next = hc + NH;      // gradient of h_{t-1} from step t on
  float* dhc = dh_next + NH;     // gradient of cont_t * h_{t-1}
  float* static_sum = dhc + NH;  // N x H
  const float* h = h_->cpu_data();
  float* h_diff = h_->mutable_cpu_diff();
  const float* o = o_->cpu_data();
  float* o_diff = o_->mutable_cpu_diff();
  const float* cont = bottom[1]->cpu_data();
  // Output squashing and projection: o_diff is the gradient of W_ho h_t + b_o.
  const float* top_diff = top[0]->cpu_diff();
  for (int k = 0; k < TNH; ++k) o_diff[k] = top_diff[k] * (1.f - o[k] * o[k]);
  if (param_propagate_down(W_ho_index)) {
    cpu_gemm(Transpose::kYes, Transpose::kNo, H, H, TN, 1.f, o_diff, h + NH, 1.f,
             blobs_[W_ho_index]->mutable_cpu_diff());
  }
  if (param_propagate_down(b_o_index)) {
    cpu_gemv(Transpose::kYes, TN, H, 1.f, o_diff, context().ones(TN), 1.f, blobs_[b_o_index]->mutable_cpu_diff());
  }
  // h_diff (rows 1..T) first holds the gradient of h_t from the outputs, then that of its pre-activation.
  cpu_gemm(Transpose::kNo, Transpose::kNo, TN, H, H, 1.f, o_diff, blobs_[W_ho_index]->cpu_data(), 0.f, h_diff + NH);
  FinalStateDiff(top, 0, dh_next);
  const float* W_hh = blobs_[W_hh_index]->cpu_data();
  for (int t = T_ - 1; t >= 0; --t) {
    const float* h_prev = h + static_cast<size_t>(t) * NH;
    const float* h_t = h + static_cast<size_t>(t + 1) * NH;
    float* diff_t = h_diff + static_cast<size_t>(t + 1) * NH;
    const float* cont_t = cont + static_cast<size_t>(t) * N_;
    for (int n = 0; n < N_; ++n) {
      for (int d = 0; d < H; ++d) {
        const int k = n * H + d;
        diff_t[k] = (diff_t[k] + dh_next[k]) * (1.f - h_t[k] * h_t[k]);
        hc[k] = cont_t[n] * h_prev[k];
      }
    }
    if (param_propagate_down(W_hh_index)) {
      cpu_gemm(Transpose::kYes, Transpose::kNo, H, H, N_, 1.f, diff_t, hc, 1.f, blobs_[W_hh_index]->mutable_cpu_diff());
    }
    cpu_gemm(Transpose::kNo, Transpose::kNo, N_, H, H, 1.f, diff_t, W_hh, 0.f, dhc);
    for (int n = 0; n < N_; ++n)
      for (int d = 0; d < H; ++d) dh_next[n * H + d] = cont_t[n] * dhc[n * H + d];
  }
  InitialStateDiff(bottom, propagate_down, 0, dh_next);
  BackwardInput(bottom, propagate_down, h_diff + NH, static_sum);
}

}  // namespace crema
