#include "layers/onednn_util.hpp"

#ifdef CREMA_USE_ONEDNN

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace crema {
namespace onednn {

using dnnl::memory;

const dnnl::engine& CpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& CpuStream() {
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

namespace {

// A 64-bit FNV-1a digest of a memory descriptor's bytes (oneDNN zeroes a descriptor before filling it in, so equal
// descriptors have equal bytes; a lookup confirms with ==).
uint64_t DigestOf(const memory::desc& desc, uint64_t digest) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(&desc.data);
  for (size_t i = 0; i < sizeof(desc.data); ++i) digest = (digest ^ bytes[i]) * 0x100000001B3ull;
  return digest;
}

struct CachedReorder {
  memory::desc from, to;
  dnnl::reorder primitive;
};

}  // namespace

const dnnl::reorder& Reorder(const memory::desc& from, const memory::desc& to) {
  // Entries are never removed (a net has a few layout pairs; a process, a few dozen): references stay valid.
  static std::mutex mutex;
  static std::unordered_multimap<uint64_t, std::unique_ptr<CachedReorder>> cache;
  const uint64_t key = DigestOf(to, DigestOf(from, 0xCBF29CE484222325ull));
  std::lock_guard<std::mutex> lock(mutex);
  const auto [first, last] = cache.equal_range(key);
  for (auto entry = first; entry != last; ++entry)
    if (entry->second->from == from && entry->second->to == to) return entry->second->primitive;
  auto made = std::make_unique<CachedReorder>(
      CachedReorder{from, to, dnnl::reorder(dnnl::reorder::primitive_desc(CpuEngine(), from, CpuEngine(), to))});
  return cache.emplace(key, std::move(made))->second->primitive;
}

int RightPadding(int in, int out, int pad, int extent, int stride) {
  const int right = std::max((out - 1) * stride + extent - in - pad, 0);
  return (in + pad + right - extent) / stride + 1 == out ? right : -1;
}

memory::desc PlainDesc(const std::vector<int>& shape, memory::format_tag tag) {
  return memory::desc(Dims({shape[0], shape[1], shape[2], shape[3]}), memory::data_type::f32, tag);
}

memory::format_tag TagOf(Layout layout) {
  switch (layout) {
    case Layout::kChannelsLast:
      return memory::format_tag::nhwc;
    case Layout::kChannelBlocks8:
      return memory::format_tag::nChw8c;
    case Layout::kChannelBlocks16:
      return memory::format_tag::nChw16c;
    case Layout::kPlain:
      break;
  }
  return memory::format_tag::nchw;
}

memory::desc LayoutDesc(const std::vector<int>& shape, Layout layout) { return PlainDesc(shape, TagOf(layout)); }

memory::desc BlobDesc(const Blob& blob) { return LayoutDesc(blob.shape(), blob.layout()); }

Layout LayoutOf(const memory::desc& desc, const std::vector<int>& shape) {
  if (shape.size() != 4) return Layout::kPlain;
  const int channels = shape[1];
  if (desc == LayoutDesc(shape, Layout::kChannelsLast)) return Layout::kChannelsLast;
  if (channels % 16 == 0 && desc == LayoutDesc(shape, Layout::kChannelBlocks16)) return Layout::kChannelBlocks16;
  if (channels % 8 == 0 && desc == LayoutDesc(shape, Layout::kChannelBlocks8)) return Layout::kChannelBlocks8;
  return Layout::kPlain;
}

dnnl::primitive_attr UserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {

// oneDNN's eltwise algorithm for a fused activation (alpha and beta as FusedActivation has them: ReLU's negative
// slope, ELU's alpha, Clip's bounds).
dnnl::algorithm EltwiseAlgorithm(const FusedActivation& activation) {
  switch (activation.kind) {
    case FusedActivation::kELU:
      return dnnl::algorithm::eltwise_elu;
    case FusedActivation::kSigmoid:
      return dnnl::algorithm::eltwise_logistic;
    case FusedActivation::kTanH:
      return dnnl::algorithm::eltwise_tanh;
    case FusedActivation::kClip:
      return dnnl::algorithm::eltwise_clip;
    default:
      return dnnl::algorithm::eltwise_relu;
  }
}

}  // namespace

dnnl::primitive_attr UserScratchpadWith(const FusedActivation& activation, bool sum) {
  dnnl::primitive_attr attr = UserScratchpad();
  if (!sum && activation.kind == FusedActivation::kNone) return attr;
  dnnl::post_ops ops;
  if (sum) ops.append_sum(1.f);
  if (activation.kind != FusedActivation::kNone)
    ops.append_eltwise(1.f, EltwiseAlgorithm(activation), activation.alpha, activation.beta);
  attr.set_post_ops(ops);
  return attr;
}

bool IsReference(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("ref") != std::string::npos;
}

void RunOnSources(const dnnl::primitive& primitive, const dnnl::primitive_desc_base& pd,
                  const std::vector<memory::desc>& sources, const std::vector<Blob*>& bottom,
                  const memory::desc& dst_desc, float* dst, float* workspace, size_t scratch) {
  Binder bind(workspace);
  std::unordered_map<int, memory> args = {{DNNL_ARG_DST, memory(dst_desc, CpuEngine(), dst)},
                                          {DNNL_ARG_SCRATCHPAD, bind.Scratch(pd.scratchpad_desc(), scratch)}};
  for (size_t b = 0; b < bottom.size(); ++b)
    args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(b)] = bind.Plain(sources[b], bottom[b]->cpu_data());
  primitive.execute(bind.stream(), args);
  bind.stream().wait();
}

size_t Regions::Add(const memory::desc& desc) {
  const size_t offset = bytes_;
  bytes_ += (desc.get_size() + 63) / 64 * 64;
  largest_ = std::max(largest_, bytes_);
  return offset;
}

size_t Regions::AddCopy(const memory::desc& wanted, const memory::desc& user) {
  return wanted == user ? 0 : Add(wanted);
}

void Regions::Restart() { bytes_ = 0; }

size_t Regions::Floats() const { return largest_ == 0 ? 0 : (largest_ + 64) / sizeof(float); }

Binder::Binder(float* workspace) {
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
  Reorder(user, wanted).execute(CpuStream(), plain, copy);
  return copy;
}

memory Binder::Result(const memory::desc& user, float* data, const memory::desc& wanted, size_t region) {
  if (wanted == user) return memory(user, CpuEngine(), data);
  return memory(wanted, CpuEngine(), base_ + region);
}

void Binder::Out(const memory& result, const memory::desc& user, float* data) {
  if (result.get_desc() == user) return;
  memory plain(user, CpuEngine(), data);
  Reorder(result.get_desc(), user).execute(CpuStream(), const_cast<memory&>(result), plain);
}

memory Binder::Scratch(const memory::desc& desc, size_t region) { return memory(desc, CpuEngine(), base_ + region); }

void WeightCache::Describe(const memory::desc& wanted, const memory::desc& user) {
  if (wanted == wanted_ && user == user_) return;
  wanted_ = wanted;
  user_ = user;
  copy_.reset();
  version_ = 0;
}

memory WeightCache::Get(const Blob& blob, dnnl::stream& stream) {
  const float* data = blob.cpu_data();
  memory source(user_, CpuEngine(), const_cast<float*>(data));
  if (plain()) return source;
  if (!copy_) copy_ = std::make_shared<SyncedMemory>(wanted_.get_size());
  memory copy(wanted_, CpuEngine(), copy_->mutable_cpu_data());
  if (blob.data_version() != version_ || data != source_) {
    Reorder(user_, wanted_).execute(stream, source, copy);
    version_ = blob.data_version();
    source_ = data;
  }
  return copy;
}

Passes::Passes(const memory::desc& user_src, const memory::desc& user_dst, const dnnl::primitive_desc_base& forward,
               const dnnl::primitive_desc_base& backward, bool backward_reads_src)
    : user_src_(user_src),
      user_dst_(user_dst),
      forward_pd_(forward),
      backward_pd_(backward),
      forward_(forward.get()),
      backward_(backward.get()),
      backward_reads_src_(backward_reads_src),
      saved_floats_((forward.workspace_desc().get_size() + sizeof(float) - 1) / sizeof(float)) {
  src_ = regions_.AddCopy(forward.src_desc(), user_src);
  dst_ = regions_.AddCopy(forward.dst_desc(), user_dst);
  forward_scratch_ = regions_.Add(forward.scratchpad_desc());
  regions_.Restart();
  if (backward_reads_src_) backward_src_ = regions_.AddCopy(forward.src_desc(), user_src);
  diff_dst_ = regions_.AddCopy(backward.diff_dst_desc(), user_dst);
  diff_src_ = regions_.AddCopy(backward.diff_src_desc(), user_src);
  backward_scratch_ = regions_.Add(backward.scratchpad_desc());
}

void Passes::Forward(float* workspace, const float* src, float* dst, float* saved) {
  Binder bind(workspace);
  const memory result = bind.Result(user_dst_, dst, forward_pd_.dst_desc(), dst_);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, bind.In(user_src_, src, forward_pd_.src_desc(), src_)},
      {DNNL_ARG_DST, result},
      {DNNL_ARG_SCRATCHPAD, bind.Scratch(forward_pd_.scratchpad_desc(), forward_scratch_)}};
  if (saved_floats_ > 0) args[DNNL_ARG_WORKSPACE] = bind.Plain(forward_pd_.workspace_desc(), saved);
  forward_.execute(bind.stream(), args);
  bind.Out(result, user_dst_, dst);
  bind.stream().wait();
}

void Passes::Backward(float* workspace, const float* src, const float* diff_dst, float* diff_src, float* saved) {
  Binder bind(workspace);
  const memory result = bind.Result(user_src_, diff_src, backward_pd_.diff_src_desc(), diff_src_);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_DIFF_DST, bind.In(user_dst_, diff_dst, backward_pd_.diff_dst_desc(), diff_dst_)},
      {DNNL_ARG_DIFF_SRC, result},
      {DNNL_ARG_SCRATCHPAD, bind.Scratch(backward_pd_.scratchpad_desc(), backward_scratch_)}};
  if (backward_reads_src_) args[DNNL_ARG_SRC] = bind.In(user_src_, src, forward_pd_.src_desc(), backward_src_);
  if (saved_floats_ > 0) args[DNNL_ARG_WORKSPACE] = bind.Plain(forward_pd_.workspace_desc(), saved);
  backward_.execute(bind.stream(), args);
  bind.Out(result, user_src_, diff_src);
  bind.stream().wait();
}

}  // namespace onednn
}  // namespace crema

#endif  // CREMA_USE_ONEDNN
