#include "layers/onednn_util.hpp"

#ifdef CREMA_USE_ONEDNN

#include <algorithm>
#include <cstdint>

namespace crema {
namespace onednn {

using dnnl::memory;

const dnnl::engine& CpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

int RightPadding(int in, int out, int pad, int extent, int stride) {
  const int right = std::max((out - 1) * stride + extent - in - pad, 0);
  return (in + pad + right - extent) / stride + 1 == out ? right : -1;
}

size_t Regions::Add(const memory::desc& desc) {
  const size_t offset = bytes_;
  bytes_ += (desc.get_size() + 63) / 64 * 64;
  largest_ = std::max(largest_, bytes_);
  return offset;
}

void Regions::Restart() { bytes_ = 0; }

size_t Regions::Floats() { return largest_ == 0 ? 0 : (largest_ + 64) / sizeof(float); }

Binder::Binder(float* workspace) : stream_(CpuEngine()) {
  const auto address = reinterpret_cast<uintptr_t>(workspace);
  base_ = reinterpret_cast<char*>((address + 63) / 64 * 64);
}

memory Binder::Plain(const memory::desc& user, const float* data) {
  return memory(user, CpuEngine(), const_cast<float*>(data));
}

memory Binder::In(const memory::desc& user, const float* data, const memory::desc& wanted, size_t region) {
  memory plain = Plain(user, data);
  if (wanted == user) return plain;
  memory copy(wanted, CpuEngine(), base_ + region);
  dnnl::reorder(plain, copy).execute(stream_, plain, copy);
  return copy;
}

memory Binder::Result(const memory::desc& user, float* data, const memory::desc& wanted, size_t region) {
  if (wanted == user) return memory(user, CpuEngine(), data);
  return memory(wanted, CpuEngine(), base_ + region);
}

void Binder::Out(const memory& result, const memory::desc& user, float* data) {
  if (result.get_desc() == user) return;
  memory plain(user, CpuEngine(), data);
  dnnl::reorder(result, plain).execute(stream_, const_cast<memory&>(result), plain);
}

memory Binder::Scratch(const memory::desc& desc, size_t region) { return memory(desc, CpuEngine(), base_ + region); }

}  // namespace onednn
}  // namespace crema

#endif  // CREMA_USE_ONEDNN
