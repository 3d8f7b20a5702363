#include "layers/lstm.hpp"

#include <cmath>

#include "core/math_functions.hpp"

namespace crema {

namespace {

float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

}  // namespace

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

void LSTMLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int H = H_, G = 4 * H_, NH = N_ * H_;
  float* hc = workspace();       // cont_t * h_{t-1}, N x H
  float* static_part = hc + NH;  // N x G
  float* gates = gates_->mutable_cpu_data();
  float* c = c_->mutable_cpu_data();
  float* h = h_->mutable_cpu_data();
  const float* cont = bottom[1]->cpu_data();
  const float* W_hc = blobs_[first_more_blob()]->cpu_data();
  ForwardInput(bottom, gates, static_part);
  InitialState(bottom, 0, h);
  InitialState(bottom, 1, c);
  float* output = top[0]->mutable_cpu_data();
  for (int t = 0; t < T_; ++t) {
    float* gates_t = gates + static_cast<size_t>(t) * N_ * G;
    const float* h_prev = h + static_cast<size_t>(t) * NH;
    const float* c_prev = c + static_cast<size_t>(t) * NH;
    float* c_t = c + static_cast<size_t>(t + 1) * NH;
    float* h_t = h + static_cast<size_t>(t + 1) * NH;
    const float* cont_t = cont + static_cast<size_t>(t) * N_;
    for (int n = 0; n < N_; ++n)
      for (int d = 0; d < H; ++d) hc[n * H + d] = cont_t[n] * h_prev[n * H + d];
    cpu_gemm(Transpose::kNo, Transpose::kYes, N_, G, H, 1.f, hc, W_hc, 1.f, gates_t);
    if (static_input_) cpu_axpy(N_ * G, 1.f, static_part, gates_t);
    for (int n = 0; n < N_; ++n) {
      float* g_n = gates_t + static_cast<size_t>(n) * G;
      for (int d = 0; d < H; ++d) {
        const float i = Sigmoid(g_n[d]), f = Sigmoid(g_n[H + d]), o = Sigmoid(g_n[2 * H + d]);
        const float g = std::tanh(g_n[3 * H + d]);
        g_n[d] = i;
        g_n[H + d] = f;
        g_n[2 * H + d] = o;
        g_n[3 * H + d] = g;
        const int k = n * H + d;
        c_t[k] = cont_t[n] * f * c_prev[k] + i * g;
        h_t[k] = o * std::tanh(c_t[k]);
      }
    }
    cpu_copy(NH, h_t, output + static_cast<size_t>(t) * NH);
  }
  FinalState(top, 0, h + static_cast<size_t>(T_) * NH);
  FinalState(top, 1, c + static_cast<size_t>(T_) * NH);
}

void LSTMLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  CheckNoContGradient(propagate_down);
  const int H = H_, G = 4 * H_, NH = N_ * H_;
  const int W_hc_index = first_more_blob();
  float* hc = workspace();        // N x H
  float* dh_next = hc + NH;       // gradient of h_{t-1} from step t on
  float* dc_next = dh_next + NH;  // gradient of c_{t-1} from step t on
  float* dhc = dc_next + NH;      // gradient of cont_t * h_{t-1}
  float* static_sum = dhc + NH;   // N x G
  const float* gates = gates_->cpu_data();
  float* gate_diff = gates_->mutable_cpu_diff();
  const float* c = c_->cpu_data();
  const float* h = h_->cpu_data();
  const float* cont = bottom[1]->cpu_data();
  const float* W_hc = blobs_[W_hc_index]->cpu_data();
  const float* top_diff = top[0]->cpu_diff();
  FinalStateDiff(top, 0, dh_next);
  FinalStateDiff(top, 1, dc_next);
  for (int t = T_ - 1; t >= 0; --t) {
    const float* gates_t = gates + static_cast<size_t>(t) * N_ * G;
    float* diff_t = gate_diff + static_cast<size_t>(t) * N_ * G;
    const float* c_prev = c + static_cast<size_t>(t) * NH;
    const float* c_t = c + static_cast<size_t>(t + 1) * NH;
    const float* h_prev = h + static_cast<size_t>(t) * NH;
    const float* top_diff_t = top_diff + static_cast<size_t>(t) * NH;
    const float* cont_t = cont + static_cast<size_t>(t) * N_;
    for (int n = 0; n < N_; ++n) {
      const float* g_n = gates_t + static_cast<size_t>(n) * G;
      float* d_n = diff_t + static_cast<size_t>(n) * G;
      for (int d = 0; d < H; ++d) {
        const int k = n * H + d;
        const float i = g_n[d], f = g_n[H + d], o = g_n[2 * H + d], g = g_n[3 * H + d];
        const float tanh_c = std::tanh(c_t[k]);
        const float dh = top_diff_t[k] + dh_next[k];
        const float dc = dc_next[k] + dh * o * (1.f - tanh_c * tanh_c);
        d_n[d] = dc * g * i * (1.f - i);
        d_n[H + d] = dc * cont_t[n] * c_prev[k] * f * (1.f - f);
        d_n[2 * H + d] = dh * tanh_c * o * (1.f - o);
        d_n[3 * H + d] = dc * i * (1.f - g * g);
        dc_next[k] = dc * cont_t[n] * f;
        hc[k] = cont_t[n] * h_prev[k];
      }
    }
    if (param_propagate_down(W_hc_index)) {
      cpu_gemm(Transpose::kYes, Transpose::kNo, G, H, N_, 1.f, diff_t, hc, 1.f, blobs_[W_hc_index]->mutable_cpu_diff());
    }
    cpu_gemm(Transpose::kNo, Transpose::kNo, N_, H, G, 1.f, diff_t, W_hc, 0.f, dhc);
    for (int n = 0; n < N_; ++n)
      for (int d = 0; d < H; ++d) dh_next[n * H + d] = cont_t[n] * dhc[n * H + d];
  }
  InitialStateDiff(bottom, propagate_down, 0, dh_next);
  InitialStateDiff(bottom, propagate_down, 1, dc_next);
  BackwardInput(bottom, propagate_down, gate_diff, static_sum);
}

}  // namespace crema
