#include "layers/onednn_util.hpp"

#ifdef CREMA_USE_ONEDNN

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/threads.hpp"

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
  int threads;  // made for (oneDNN's kernels split their work for the threads there are when they are made)
  dnnl::reorder primitive;
};

}  // namespace

const dnnl::reorder& Reorder(const memory::desc& from, const memory::desc& to) {
  // Entries are never removed (a net has a few layout pairs; a process, a few dozen): references stay valid.
  static std::mutex mutex;
  static std::unordered_multimap<uint64_t, std::unique_ptr<CachedReorder>> cache;
  // A step on a lane (inside a parallel region) runs its reorders on one thread: they are made for one there.
  const int threads = CurrentThreadCount();
  const uint64_t key = DigestOf(to, DigestOf(from, 0xCBF29CE484222325ull)) ^ static_cast<uint64_t>(threads);
  std::lock_guard<std::mutex> lock(mutex);
  const auto [first, last] = cache.equal_range(key);
  for (auto entry = first; entry != last; ++entry)
    if (entry->second->from == from && entry->second->to == to && entry->second->threads == threads)
      return entry->second->primitive;
  OneThreadWhile one(threads == 1);
  auto made = std::make_unique<CachedReorder>(CachedReorder{
      from, to, threads, dnnl::reorder(dnnl::reorder::primitive_desc(CpuEngine(), from, CpuEngine(), to))});
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

memory::desc LayoutDesc(const std::vector<int>& shape, Layout layout, memory::data_type type) {
  return memory::desc(Dims({shape[0], shape[1], shape[2], shape[3]}), type, TagOf(layout));
}

memory::data_type DataTypeOf(ElementType type) {
  switch (type) {
    case ElementType::kUInt8:
      return memory::data_type::u8;
    case ElementType::kInt8:
      return memory::data_type::s8;
    case ElementType::kBfloat16:
      return memory::data_type::bf16;
    case ElementType::kFloat16:
      return memory::data_type::f16;
    case ElementType::kFloat32:
      break;
  }
  return memory::data_type::f32;
}

memory::desc BlobDesc(const Blob& blob) {
  return LayoutDesc(blob.shape(), blob.layout(), DataTypeOf(blob.data_type()));
}

Layout LayoutOf(const memory::desc& desc, const std::vector<int>& shape) {
  if (shape.size() != 4) return Layout::kPlain;
  const int channels = shape[1];
  const memory::data_type type = desc.data_type();  // an 8-bit primitive's output lies as a float one's would
  if (desc == LayoutDesc(shape, Layout::kChannelsLast, type)) return Layout::kChannelsLast;
  if (channels % 16 == 0 && desc == LayoutDesc(shape, Layout::kChannelBlocks16, type)) return Layout::kChannelBlocks16;
  if (channels % 8 == 0 && desc == LayoutDesc(shape, Layout::kChannelBlocks8, type)) return Layout::kChannelBlocks8;
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

dnnl::primitive_attr UserScratchpadWith(const FusedActivation& activation, bool sum, float sum_scale,
                                        memory::data_type sum_type) {
  dnnl::primitive_attr attr = UserScratchpad();
  if (!sum && activation.kind == FusedActivation::kNone) return attr;
  dnnl::post_ops ops;
  if (sum) ops.append_sum(sum_scale, 0, sum_type);
  if (activation.kind != FusedActivation::kNone)
    ops.append_eltwise(1.f, EltwiseAlgorithm(activation), activation.alpha, activation.beta);
  attr.set_post_ops(ops);
  return attr;
}

memory::desc WithDataType(const memory::desc& desc, memory::data_type type) {
  dnnl_memory_desc_t typed = desc.data;
  typed.data_type = memory::convert_to_c(type);
  return memory::desc(typed);
}

bool IsReference(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("ref") != std::string::npos;
}

void RunOnSources(const dnnl::primitive& primitive, const memory::desc& scratch_desc,
                  const std::vector<memory::desc>& sources, const std::vector<Blob*>& bottom,
                  const memory::desc& dst_desc, void* dst, float* workspace, size_t scratch, Bindings* bindings) {
  Binder bind(workspace, bindings);
  // Any number of sources (a DenseNet's concatenations have dozens): no fixed Args here.
  std::vector<memory> bound = {bind.Plain(dst_desc, dst), bind.Scratch(scratch_desc, scratch)};
  std::vector<dnnl_exec_arg_t> args = {{DNNL_ARG_DST, bound[0].get()}, {DNNL_ARG_SCRATCHPAD, bound[1].get()}};
  bound.reserve(bound.size() + bottom.size());
  for (size_t b = 0; b < bottom.size(); ++b) {
    bound.push_back(bind.Plain(sources[b], bottom[b]->cpu_bytes()));
    args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(b), bound.back().get()});
  }
  dnnl::error::wrap_c_api(
      dnnl_primitive_execute(primitive.get(), bind.stream().get(), static_cast<int>(args.size()), args.data()),
      "could not run a oneDNN primitive");
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

void Regions::Restart(size_t kept) { bytes_ = kept; }

size_t Regions::Floats() const { return largest_ == 0 ? 0 : (largest_ + 64) / sizeof(float); }

Args::Args(std::initializer_list<std::pair<int, memory>> args) {
  for (const auto& [arg, bound] : args) (*this)[arg] = bound;
}

memory& Args::operator[](int arg) {
  for (int i = 0; i < size_; ++i)
    if (args_[i].first == arg) return args_[i].second;
  CREMA_CHECK(size_ < kMost) << "a oneDNN call with more than " << kMost << " arguments";
  args_[size_].first = arg;
  return args_[size_++].second;
}

void Args::Run(const dnnl::primitive& primitive, dnnl::stream& stream) const {
  dnnl_exec_arg_t args[kMost];
  for (int i = 0; i < size_; ++i) args[i] = {args_[i].first, args_[i].second.get()};
  dnnl::error::wrap_c_api(dnnl_primitive_execute(primitive.get(), stream.get(), size_, args),
                          "could not run a oneDNN primitive");
}

void RunReorder(const dnnl::reorder& reorder, dnnl::stream& stream, const memory& from, const memory& to) {
  const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from.get()}, {DNNL_ARG_TO, to.get()}};
  dnnl::error::wrap_c_api(dnnl_primitive_execute(reorder.get(), stream.get(), 2, args), "could not run a reorder");
}

memory Bindings::Next(const memory::desc& desc, void* data) {
  if (next_ == entries_.size()) entries_.emplace_back();
  Entry& entry = entries_[next_++];
  // Descriptors made by oneDNN are zeroed before they are filled in, so equal ones have equal bytes; two equal
  // ones whose bytes differed would only cost a new memory.
  if (!entry.memory || std::memcmp(&entry.desc.data, &desc.data, sizeof(desc.data)) != 0) {
    entry = Entry{desc, memory(desc, CpuEngine(), data), data, nullptr};
  } else if (entry.data != data) {
    entry.memory.set_data_handle(data);
    entry.data = data;
  }
  return entry.memory;
}

const dnnl::reorder& Bindings::ReorderOfLastTwo() {
  CREMA_CHECK(next_ >= 2) << "a reorder asked for before its two memories";
  Entry& to = entries_[next_ - 1];
  if (to.reorder == nullptr) to.reorder = &Reorder(entries_[next_ - 2].desc, to.desc);
  return *to.reorder;
}

Binder::Binder(float* workspace, Bindings* bindings) : bindings_(bindings) {
  const auto address = reinterpret_cast<uintptr_t>(workspace);
  base_ = reinterpret_cast<char*>((address + 63) / 64 * 64);
  if (bindings_ != nullptr) bindings_->Restart();
}

memory Binder::Make(const memory::desc& desc, const void* data) {
  void* handle = const_cast<void*>(data);
  return bindings_ != nullptr ? bindings_->Next(desc, handle) : memory(desc, CpuEngine(), handle);
}

void Binder::ReorderLastTwo(const memory& from, const memory& to) {
  const dnnl::reorder& reorder =
      bindings_ != nullptr ? bindings_->ReorderOfLastTwo() : Reorder(from.get_desc(), to.get_desc());
  RunReorder(reorder, CpuStream(), from, to);
}

memory Binder::Plain(const memory::desc& user, const void* data) { return Make(user, data); }

memory Binder::In(const memory::desc& user, const void* data, const memory::desc& wanted, size_t region) {
  const memory plain = Make(user, data);
  if (wanted == user) return plain;
  const memory copy = Make(wanted, base_ + region);
  ReorderLastTwo(plain, copy);
  return copy;
}

memory Binder::Result(const memory::desc& user, void* data, const memory::desc& wanted, size_t region) {
  return wanted == user ? Make(user, data) : Make(wanted, base_ + region);
}

void Binder::Out(const memory& result, const memory::desc& user, void* data) {
  // Result() gave the buffer itself where the layouts agree, and a workspace region where they differ.
  if (result.get_data_handle() == data) return;
  // The result was the memory made last only where nothing was bound after it; otherwise it is bound again here.
  const memory from = Make(result.get_desc(), result.get_data_handle());
  const memory plain = Make(user, data);
  ReorderLastTwo(from, plain);
}

memory Binder::Scratch(const memory::desc& desc, size_t region) { return Make(desc, base_ + region); }

namespace {

// Where index x of each dimension of `desc` (blocked) puts a value: its inner blocks (innermost first, each times the
// blocks inside it), then the rest of x times the dimension's stride. A value lies at the sum over its dimensions.
std::vector<long long> DimensionOffsets(const dnnl_memory_desc_t& d, int dim) {
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  std::vector<long long> offsets(d.dims[dim]);
  for (long long x = 0; x < d.dims[dim]; ++x) {
    long long rest = x, offset = 0, inside = 1;
    for (int k = b.inner_nblks - 1; k >= 0; --k) {
      if (b.inner_idxs[k] == dim) {
        offset += (rest % b.inner_blks[k]) * inside;
        rest /= b.inner_blks[k];
      }
      inside *= b.inner_blks[k];
    }
    offsets[x] = offset + rest * b.strides[dim];
  }
  return offsets;
}

// The offsets of a convolution's weights (4-d, or 5-d with groups first) in `desc` as three lists: the leading
// dimensions' (outputs; groups and outputs), the inputs', the kernel positions'; a value lies at the sum of one of
// each.
struct WeightOffsets {
  explicit WeightOffsets(const dnnl_memory_desc_t& d) {
    const int n = d.ndims;
    leading = DimensionOffsets(d, 0);
    if (n == 5) {
      std::vector<long long> joined;
      for (long long g : leading)
        for (long long o : DimensionOffsets(d, 1)) joined.push_back(g + o);
      leading.swap(joined);
    }
    inputs = DimensionOffsets(d, n - 3);
    const std::vector<long long> rows = DimensionOffsets(d, n - 2), columns = DimensionOffsets(d, n - 1);
    for (long long r : rows)
      for (long long c : columns) positions.push_back(d.offset0 + r + c);
  }
  std::vector<long long> leading, inputs, positions;
};

}  // namespace

bool AddToPlain(const memory::desc& blocked, const float* from, const memory::desc& plain, float* to) {
  const dnnl_memory_desc_t &d = blocked.data, &u = plain.data;
  if (d.format_kind != dnnl_blocked || u.format_kind != dnnl_blocked || (d.ndims != 4 && d.ndims != 5) ||
      u.ndims != d.ndims)
    return false;
  for (int k = 0; k < d.ndims; ++k)
    if (d.dims[k] != u.dims[k]) return false;
  const WeightOffsets source(d), target(u);
  const int lead = static_cast<int>(source.leading.size()), channels = static_cast<int>(source.inputs.size());
  const int positions = static_cast<int>(source.positions.size());
  const long long count = static_cast<long long>(lead) * channels * positions;
#pragma omp parallel for schedule(static) if (count >= ParallelElementThreshold())
  for (int l = 0; l < lead; ++l)
    for (int i = 0; i < channels; ++i) {
      const float* a = from + source.leading[l] + source.inputs[i];
      float* b = to + target.leading[l] + target.inputs[i];
      for (int s = 0; s < positions; ++s) b[target.positions[s]] += a[source.positions[s]];
    }
  return true;
}

bool PairBlockedLayoutOf(const memory::desc& wanted, const memory::desc& user, PairBlockedLayout* layout) {
  const dnnl_memory_desc_t& w = wanted.data;
  const dnnl_memory_desc_t& u = user.data;
  if (w.ndims != 2 || u.ndims != 2 || w.data_type != dnnl_bf16 || u.data_type != dnnl_f32) return false;
  if (w.format_kind != dnnl_blocked || u.format_kind != dnnl_blocked || w.offset0 != 0 || u.offset0 != 0) return false;
  if (w.extra.flags != 0 || w.dims[0] != u.dims[0] || w.dims[1] != u.dims[1]) return false;
  const dnnl_blocking_desc_t& plain = u.format_desc.blocking;
  if (plain.inner_nblks != 0 || plain.strides[1] != 1 || plain.strides[0] != u.dims[1]) return false;  // rows
  const dnnl_blocking_desc_t& b = w.format_desc.blocking;
  // Pairs of the second dimension in blocks of the first ("AB8b64a2b"), or (transposed: the copy of the matrix's
  // transpose) pairs of the first in blocks of the second ("BA8a16b2a").
  if (b.inner_nblks != 3 || b.inner_idxs[1] == b.inner_idxs[0] || b.inner_idxs[2] != b.inner_idxs[0] ||
      b.inner_blks[2] != 2)
    return false;
  const int paired = b.inner_idxs[0], blocked = b.inner_idxs[1];  // dimension indices, 0 or 1
  const int64_t output_block = b.inner_blks[1], pairs = b.inner_blks[0], block = output_block * pairs * 2;
  // The blocks themselves lie whole and apart: each outer stride a multiple of a block.
  if (b.strides[0] % block != 0 || b.strides[1] % block != 0) return false;
  layout->transposed = blocked == 1;
  layout->outputs = w.dims[blocked];
  layout->inputs = w.dims[paired];
  layout->output_block = output_block;
  layout->pairs = pairs;
  layout->output_block_stride = b.strides[blocked];
  layout->input_block_stride = b.strides[paired];
  layout->bytes = wanted.get_size();
  // Every element of the padded blocks within the copy.
  const int64_t last = layout->Offset(w.padded_dims[blocked] - 1, w.padded_dims[paired] - 1);
  return static_cast<size_t>(last + 1) * sizeof(uint16_t) <= layout->bytes;
}

void WeightCache::Describe(const memory::desc& wanted, const memory::desc& user) {
  if (wanted == wanted_ && user == user_) return;
  wanted_ = wanted;
  user_ = user;
  derived_.reset();
  derived_memory_ = memory();
  copy_.reset();
  source_memory_ = memory();
  copy_memory_ = memory();
  reorder_ = nullptr;
  version_ = 0;
}

bool WritesDerivedWeights() {
  static const bool writes = [] {
    const char* setting = std::getenv("CREMA_DERIVED_WEIGHTS");
    return setting == nullptr || std::string(setting) != "0";
  }();
  return writes;
}

bool WeightCache::DeriveFrom(Blob* blob) {
  PairBlockedLayout layout;
  if (!WritesDerivedWeights()) return false;
  // A 1x1 convolution's weights (outputs x inputs x 1 x 1) are an inner product's: the same layouts without the unit
  // dimensions.
  memory::desc wanted = wanted_, user = user_;
  const memory::dims dims = wanted_.dims();
  if (dims.size() == 4 && dims[2] == 1 && dims[3] == 1 && user_.dims() == dims) {
    try {
      wanted = wanted_.reshape({dims[0], dims[1]});
      user = user_.reshape({dims[0], dims[1]});
    } catch (const dnnl::error&) {
      return false;  // a layout oneDNN cannot view in two dimensions
    }
  }
  if (!PairBlockedLayoutOf(wanted, user, &layout)) return false;
  if (!derived_) {
    derived_ = std::make_shared<Bfloat16BlockedCopy>(layout);
    derived_memory_ = memory(wanted_, CpuEngine(), derived_->data());
  }
  blob->AddDerivedCopy(derived_);
  return true;
}

size_t WeightCache::bytes() const {
  if (derived_) return derived_->bytes();
  return copy_ ? copy_->size() : 0;
}

memory WeightCache::Get(const Blob& blob, dnnl::stream& stream) {
  if (derived_) {
    // Written by the solver's update as it wrote the weights, or here where someone else wrote them.
    if (!derived_->IsCurrent(blob)) WriteDerivedCopy(blob, derived_.get());
    return derived_memory_;
  }
  float* data = const_cast<float*>(blob.cpu_data());
  if (!source_memory_) {
    source_memory_ = memory(user_, CpuEngine(), data);
  } else if (source_memory_.get_data_handle() != data) {
    source_memory_.set_data_handle(data);
  }
  if (plain()) return source_memory_;
  if (!copy_) {
    copy_ = std::make_shared<SyncedMemory>(wanted_.get_size());
    copy_memory_ = memory(wanted_, CpuEngine(), copy_->mutable_cpu_data());
    reorder_ = &Reorder(user_, wanted_);
  }
  if (blob.data_version() != version_ || data != source_) {
    RunReorder(*reorder_, stream, source_memory_, copy_memory_);
    version_ = blob.data_version();
    source_ = data;
  }
  return copy_memory_;
}

bool Int8Weights::Stale(const Blob& weights, const Blob* bias) const {
  if (weights.data_version() != weights_version_ || weights.cpu_data() != weights_data_) return true;
  return bias != nullptr && (bias->data_version() != bias_version_ || bias->cpu_data() != bias_data_);
}

void Int8Weights::Quantize(const Blob& weights, const Blob* bias, int outputs, int64_t output_stride,
                           int64_t input_stride, float input_scale, const std::string& who) {
  const int64_t inputs = weights.count() / outputs;
  const float* w = weights.cpu_data();
  values_.resize(weights.count());
  output_scales_.assign(outputs, 1.f);
  scaled_bias_.assign(bias ? outputs : 0, 0.f);
  for (int o = 0; o < outputs; ++o) {
    const float* row = w + o * output_stride;
    float largest = 0.f;
    bool finite = true;  // checked apart: std::max passes over a NaN
    for (int64_t i = 0; i < inputs; ++i) {
      largest = std::max(largest, std::abs(row[i * input_stride]));
      finite = finite && std::isfinite(row[i * input_stride]);
    }
    CREMA_CHECK(finite) << who << ": output " << o << "'s weights are not all finite numbers; they cannot be quantized";
    const float scale = largest > 0.f ? 127.f / largest : 1.f;
    int8_t* out = values_.data() + o * inputs;
    for (int64_t i = 0; i < inputs; ++i)
      out[i] = static_cast<int8_t>(std::min(127.f, std::max(-127.f, std::nearbyint(row[i * input_stride] * scale))));
    output_scales_[o] = 1.f / (input_scale * scale);
    if (bias) scaled_bias_[o] = bias->cpu_data()[o] * input_scale * scale;
  }
  weights_version_ = weights.data_version();
  weights_data_ = w;
  bias_version_ = bias ? bias->data_version() : 0;
  bias_data_ = bias ? bias->cpu_data() : nullptr;
}

const memory& Int8Weights::Place(const memory::desc& plain, const memory::desc& wanted) {
  if (!copy_ || copy_->size() != wanted.get_size()) copy_ = std::make_shared<SyncedMemory>(wanted.get_size());
  placed_ = memory(wanted, CpuEngine(), copy_->mutable_cpu_data());
  const memory from(plain, CpuEngine(), values_.data());
  RunReorder(Reorder(plain, wanted), CpuStream(), from, placed_);
  CpuStream().wait();
  return placed_;
}

dnnl::reorder QuantizingReorder(const memory::desc& from, const memory::desc& to, float scale) {
  dnnl::primitive_attr attr;
  attr.set_output_scales(0, {scale});
  return dnnl::reorder(dnnl::reorder::primitive_desc(CpuEngine(), from, CpuEngine(), to, attr));
}

Quantization Int8Reads(const Layer& layer, bool runs_int8, int bottom) {
  if (!runs_int8 || bottom != 0 || layer.layer_param().bottom_size() != 1) return {};
  return QuantizationOf(layer.layer_param().quantization(), layer.name());  // checked when it was reshaped
}

bool Int8Writes(const Layer& layer, bool runs_int8, int top) {
  const FusedActivation::Kind activation = layer.fused_activation().kind;
  return runs_int8 && top == 0 && layer.layer_param().bottom_size() == 1 &&
         (activation == FusedActivation::kNone || activation == FusedActivation::kReLU);
}

std::vector<float> Int8Weights::OutputScales(float top_scale) const {
  std::vector<float> scales = output_scales_;
  for (float& scale : scales) scale *= top_scale;
  return scales;
}

void CheckRemadeKeepsLayouts(const dnnl::primitive_desc_base& made, const dnnl::primitive_desc_base& remade,
                             const std::string& who) {
  CREMA_CHECK(remade.src_desc(0) == made.src_desc(0) && remade.dst_desc(0) == made.dst_desc(0) &&
              remade.scratchpad_desc().get_size() <= made.scratchpad_desc().get_size())
      << who << ": oneDNN chose other layouts for new weights";
}

void WarnInt8Refused(const std::string& who, const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    LOG(WARNING) << who << " runs in float, though set to 8 bits: oneDNN has no 8-bit kernels for it on this CPU ("
                 << why << "); other such layers of this run are not named";
  });
}

namespace {

// oneDNN's name for the instructions it found (or was limited to, DNNL_MAX_CPU_ISA), for messages.
std::string IsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "SSE4.1";
    case dnnl::cpu_isa::avx:
      return "AVX";
    case dnnl::cpu_isa::avx2:
      return "AVX2";
    case dnnl::cpu_isa::avx2_vnni:
      return "AVX2 with VNNI";
    case dnnl::cpu_isa::avx512_core:
      return "AVX-512";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "AVX-512 with VNNI";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "AVX-512 with BF16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "AMX";
    default:
      return "instruction set " + std::to_string(static_cast<int>(isa));
  }
}

}  // namespace

bool EffectiveIsaHas(dnnl::cpu_isa wanted) {
  const unsigned mask = static_cast<unsigned>(wanted);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & mask) == mask;
}

bool HasInt8DotProducts() {
  return EffectiveIsaHas(dnnl::cpu_isa::avx512_core_vnni) || EffectiveIsaHas(dnnl::cpu_isa::avx2_vnni);
}

bool Int8Allowed(const Layer& layer) {
  if (HasInt8DotProducts()) return true;
  WarnInt8Refused("layer '" + layer.name() + "' (" + layer.type() + ")",
                  "oneDNN runs " + IsaName(dnnl::get_effective_cpu_isa()) +
                      ", without VNNI's dot products, whose 8-bit kernels saturate their sums");
  return false;
}

bool HasBfloat16Kernels() { return EffectiveIsaHas(dnnl::cpu_isa::avx512_core_bf16); }

Precision EnginePrecision(const Layer& layer) {
  const Precision asked = layer.requested_precision();
  if (asked == Precision::kFloat32) return asked;
  std::string why;
  if (asked == Precision::kBfloat16 && HasBfloat16Kernels()) return asked;
  if (asked == Precision::kBfloat16)
    why = "this CPU has no bf16 instructions (oneDNN runs " + IsaName(dnnl::get_effective_cpu_isa()) +
          "; AVX512_BF16 or AMX computes bf16)";
  else
    why = "float16 computes on GPUs; on this CPU ask for bf16 (AVX512_BF16 or AMX) instead";
  static std::mutex mutex;
  static bool said[3] = {false, false, false};
  const std::lock_guard<std::mutex> lock(mutex);
  if (!said[static_cast<int>(asked)]) {
    said[static_cast<int>(asked)] = true;
    LOG(WARNING) << "layer '" << layer.name() << "' (" << layer.type() << ") computes in float32, though set to "
                 << PrecisionName(asked) << ": " << why << "; other such layers of this run are not named";
  }
  return Precision::kFloat32;
}

void WarnHalfRefused(const std::string& who, Precision precision, const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    LOG(WARNING) << who << " computes in float32, though set to " << PrecisionName(precision)
                 << ": oneDNN has no such kernels for it on this CPU (" << why
                 << "); other such layers of this run are not named";
  });
}

Passes::Passes(const memory::desc& user_src, const memory::desc& user_dst, const dnnl::primitive_desc_base& forward,
               const dnnl::primitive_desc_base& backward, bool backward_reads_src, memory::data_type src_diff_type,
               memory::data_type dst_diff_type)
    : user_src_(user_src),
      user_dst_(user_dst),
      user_diff_src_(WithDataType(user_src, src_diff_type)),
      user_diff_dst_(WithDataType(user_dst, dst_diff_type)),
      forward_pd_(forward),
      backward_pd_(backward),
      forward_(forward.get()),
      backward_(backward.get()),
      backward_reads_src_(backward_reads_src),
      forward_src_(forward.src_desc()),
      forward_dst_(forward.dst_desc()),
      forward_scratch_desc_(forward.scratchpad_desc()),
      workspace_desc_(forward.workspace_desc()),
      saved_floats_((forward.workspace_desc().get_size() + sizeof(float) - 1) / sizeof(float)) {
  // A pooling's or LRN's arithmetic is a few operations per value: its memory is what counts.
  one_thread_ = SmallWork(0, static_cast<double>(user_src.get_size() + user_dst.get_size()));
  src_ = regions_.AddCopy(forward.src_desc(), user_src);
  dst_ = regions_.AddCopy(forward.dst_desc(), user_dst);
  forward_scratch_ = regions_.Add(forward.scratchpad_desc());
  regions_.Restart();
  if (backward_reads_src_) backward_src_ = regions_.AddCopy(forward.src_desc(), user_src);
  diff_dst_ = regions_.AddCopy(backward.diff_dst_desc(), user_diff_dst_);
  diff_src_ = regions_.AddCopy(backward.diff_src_desc(), user_diff_src_);
  backward_scratch_ = regions_.Add(backward.scratchpad_desc());
}

void Passes::Forward(float* workspace, const void* src, void* dst, float* saved) {
  OneThreadWhile threads(one_thread_);
  Binder bind(workspace, &forward_bindings_);
  const memory result = bind.Result(user_dst_, dst, forward_dst_, dst_);
  Args args = {{DNNL_ARG_SRC, bind.In(user_src_, src, forward_src_, src_)},
               {DNNL_ARG_DST, result},
               {DNNL_ARG_SCRATCHPAD, bind.Scratch(forward_scratch_desc_, forward_scratch_)}};
  if (saved_floats_ > 0) args[DNNL_ARG_WORKSPACE] = bind.Plain(workspace_desc_, saved);
  args.Run(forward_, bind.stream());
  bind.Out(result, user_dst_, dst);
  bind.stream().wait();
}

void Passes::Backward(float* workspace, const void* src, const void* diff_dst, void* diff_src, float* saved) {
  Binder bind(workspace, &backward_bindings_);
  const memory result = bind.Result(user_diff_src_, diff_src, backward_pd_.diff_src_desc(), diff_src_);
  Args args = {{DNNL_ARG_DIFF_DST, bind.In(user_diff_dst_, diff_dst, backward_pd_.diff_dst_desc(), diff_dst_)},
               {DNNL_ARG_DIFF_SRC, result},
               {DNNL_ARG_SCRATCHPAD, bind.Scratch(backward_pd_.scratchpad_desc(), backward_scratch_)}};
  if (backward_reads_src_) args[DNNL_ARG_SRC] = bind.In(user_src_, src, forward_src_, backward_src_);
  if (saved_floats_ > 0) args[DNNL_ARG_WORKSPACE] = bind.Plain(workspace_desc_, saved);
  args.Run(backward_, bind.stream());
  bind.Out(result, user_diff_src_, diff_src);
  bind.stream().wait();
}

}  // namespace onednn
}  // namespace crema

#endif  // CREMA_USE_ONEDNN
