#include "layers/lstm_unit.hpp"

#include <cmath>
#include <string>

namespace crema {

namespace {

float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

}  // namespace

void LSTMUnitLayer::LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) {
  CREMA_CHECK(blobs_.empty()) << describe() << ": LSTMUnit has no learned parameters, but " << blobs_.size()
                              << " stored blob(s) came with it";
  gates_ = AddInternalBlob("gates");
}

void LSTMUnitLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& c_prev = *bottom[0];
  const Blob& x = *bottom[1];
  const Blob& cont = *bottom[2];
  const std::string shapes =
      "c_prev " + c_prev.shape_string() + ", x " + x.shape_string() + ", cont " + cont.shape_string();
  CREMA_CHECK(c_prev.num_axes() == 3 && c_prev.shape(0) == 1)
      << describe() << ": c_prev must have shape (1, N, H), but the bottoms are " << shapes;
  num_ = c_prev.shape(1);
  hidden_ = c_prev.shape(2);
  CREMA_CHECK(x.num_axes() == 3 && x.shape(0) == 1 && x.shape(1) == num_ && x.shape(2) == 4 * hidden_)
      << describe() << ": x (the gate inputs i, f, o, g) must have shape (1, N, 4H) = (1, " << num_ << ", "
      << 4 * hidden_ << ") for c_prev (1, N, H), but the bottoms are " << shapes;
  CREMA_CHECK(cont.num_axes() == 2 && cont.shape(0) == 1 && cont.shape(1) == num_)
      << describe() << ": cont must have shape (1, N) = (1, " << num_ << "), but the bottoms are " << shapes;
  top[0]->ReshapeLike(c_prev);
  top[1]->ReshapeLike(c_prev);
  gates_->ReshapeLike(x);
}

void LSTMUnitLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* c_prev = bottom[0]->cpu_data();
  const float* x = bottom[1]->cpu_data();
  const float* cont = bottom[2]->cpu_data();
  float* gates = gates_->mutable_cpu_data();
  float* c = top[0]->mutable_cpu_data();
  float* h = top[1]->mutable_cpu_data();
  const int H = hidden_;
  for (int n = 0; n < num_; ++n) {
    const float* xn = x + static_cast<size_t>(n) * 4 * H;
    float* gn = gates + static_cast<size_t>(n) * 4 * H;
    for (int d = 0; d < H; ++d) {
      const float i = Sigmoid(xn[d]), f = Sigmoid(xn[H + d]), o = Sigmoid(xn[2 * H + d]);
      const float g = std::tanh(xn[3 * H + d]);
      gn[d] = i;
      gn[H + d] = f;
      gn[2 * H + d] = o;
      gn[3 * H + d] = g;
      const size_t k = static_cast<size_t>(n) * H + d;
      c[k] = cont[n] * f * c_prev[k] + i * g;
      h[k] = o * std::tanh(c[k]);
    }
  }
}

void LSTMUnitLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                 const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[2]) << describe() << ": cont (the sequence continuation flags) has no gradient; "
                                  << "set propagate_down: false for it";
  if (!propagate_down[0] && !propagate_down[1]) return;
  const float* c_prev = bottom[0]->cpu_data();
  const float* cont = bottom[2]->cpu_data();
  const float* gates = gates_->cpu_data();
  const float* c_diff = top[0]->cpu_diff();
  const float* h_diff = top[1]->cpu_diff();
  float* c_prev_diff = propagate_down[0] ? bottom[0]->mutable_cpu_diff() : nullptr;
  float* x_diff = propagate_down[1] ? bottom[1]->mutable_cpu_diff() : nullptr;
  const int H = hidden_;
  for (int n = 0; n < num_; ++n) {
    const float* gn = gates + static_cast<size_t>(n) * 4 * H;
    for (int d = 0; d < H; ++d) {
      const float i = gn[d], f = gn[H + d], o = gn[2 * H + d], g = gn[3 * H + d];
      const size_t k = static_cast<size_t>(n) * H + d;
      const float c = cont[n] * f * c_prev[k] + i * g;
      const float tanh_c = std::tanh(c);
      const float dc = c_diff[k] + h_diff[k] * o * (1.f - tanh_c * tanh_c);
      if (c_prev_diff) c_prev_diff[k] = dc * cont[n] * f;
      if (x_diff) {
        float* dx = x_diff + static_cast<size_t>(n) * 4 * H;
        dx[d] = dc * g * i * (1.f - i);
        dx[H + d] = dc * cont[n] * c_prev[k] * f * (1.f - f);
        dx[2 * H + d] = h_diff[k] * tanh_c * o * (1.f - o);
        dx[3 * H + d] = dc * i * (1.f - g * g);
      }
    }
  }
}

}  // namespace crema
