#include "layers/common/onednn_concat.hpp"

#ifdef CREMA_USE_ONEDNN

#include <cstring>

#include "core/bf16_vectors.hpp"
#include "layers/onednn_util.hpp"

namespace crema {

using dnnl::memory;
using onednn::CpuEngine;

struct OneDnnConcatLayer::Primitives {
  std::vector<memory::desc> bottoms;  // in their layouts
  std::vector<memory::desc> parts;    // each bottom's part of the top (sub-memories of the top's layout)
  // The same for the gradients, in floats whatever type the data has (bf16 passed through in training).
  std::vector<memory::desc> diff_bottoms, diff_parts;
  std::vector<int> channels;          // each bottom's channels
  dnnl::concat::primitive_desc forward;
  dnnl::concat forward_primitive;
  memory::desc top, scratch_desc;                        // the top's layout and the scratchpad's, queried once
  size_t scratch = 0;                                    // oneDNN's scratchpad, in the workspace
  onednn::Bindings forward_bindings, backward_bindings;  // the memories of the last call, kept for the next
  // Whether every bottom and the top share one layout in which an image's channels lie in one stretch of memory
  // (plain, or channel blocks, whose channel counts are multiples of the block): then each image of the top is its
  // bottoms' images one after another, and the join is one copy per bottom and image. oneDNN's concat walked 16-channel
  // blocks in small pieces (GoogLeNet's inception_3b at batch 1: 0.8 ms for 1.5 MB; the copies take under 0.1).
  bool by_images = false;
};

namespace {

// Runs part(n, b, offset) for every image n and bottom b: `offset` is where bottom b's `sizes[b]` values of image n lie
// in the top, whose images (`top_image` values each) are their bottoms' images one after another. Over the threads
// where there are enough bytes (`bytes` a value).
template <typename Part>
void ForEachImagePart(int images, const std::vector<long long>& sizes, long long top_image, size_t bytes,
                      const Part& part) {
  const long long total = static_cast<long long>(images) * top_image * static_cast<long long>(bytes);
#pragma omp parallel for if (images > 1 && total >= (1LL << 22))
  for (int n = 0; n < images; ++n) {
    long long offset = static_cast<long long>(n) * top_image;
    for (size_t b = 0; b < sizes.size(); ++b) {
      part(n, b, offset);
      offset += sizes[b];
    }
  }
}

// Each bottom's values per image, as ForEachImagePart takes them.
std::vector<long long> ImageSizes(const std::vector<Blob*>& bottom) {
  std::vector<long long> sizes;
  for (const Blob* b : bottom) sizes.push_back(b->count(1));
  return sizes;
}

// The top's float gradient out to its bottoms' gradients, image by image: each bottom's stretch copied where its
// gradient is float, rounded to bf16 (ToBfloat16's rounding, oneDNN's reorders' on this CPU) where the plan keeps it in
// bf16; nothing for a bottom that asks for none.
void SplitGradientByImages(const Blob& top, const std::vector<bool>& propagate_down, const std::vector<Blob*>& bottom) {
  const float* gradient = top.cpu_diff();
  std::vector<void*> into(bottom.size(), nullptr);
  for (size_t b = 0; b < bottom.size(); ++b)
    if (propagate_down[b]) into[b] = bottom[b]->mutable_cpu_diff_bytes();
  const std::vector<long long> sizes = ImageSizes(bottom);
  ForEachImagePart(top.shape(0), sizes, top.count(1), sizeof(float), [&](int n, size_t b, long long offset) {
    if (into[b] == nullptr) return;
    if (bottom[b]->diff_type() == ElementType::kBfloat16) {
      RoundToBfloat16(gradient + offset, sizes[b], static_cast<uint16_t*>(into[b]) + n * sizes[b]);
    } else {
      std::memcpy(static_cast<float*>(into[b]) + n * sizes[b], gradient + offset, sizes[b] * sizeof(float));
    }
  });
}

}  // namespace

OneDnnConcatLayer::OneDnnConcatLayer(const LayerParameter& param, std::shared_ptr<Context> context)
    : ConcatLayer(param, std::move(context)) {}

OneDnnConcatLayer::~OneDnnConcatLayer() = default;

std::string OneDnnConcatLayer::Refusal(const EngineQuery& query) {
  for (const std::vector<int>& shape : query.bottom_shapes)
    if (shape.size() != 4) return "takes 4-d bottoms only";
  const ConcatParameter& param = query.param.concat_param();
  const int axis = param.has_concat_dim() ? static_cast<int>(param.concat_dim())
                                          : (param.axis() < 0 ? param.axis() + 4 : param.axis());
  if (axis != 1) return "joins along the channel axis (1) only";
  return "";
}

Layout OneDnnConcatLayer::OffersLayout(int, const std::vector<Layout>& bottom_layouts) const {
  bool shared = true;
  for (Layout layout : bottom_layouts) shared = shared && layout == bottom_layouts[0];
  if (shared) return bottom_layouts[0];
  // Mixed: the first channel-blocked bottom's blocks where every bottom's channels fill whole blocks, so that each
  // part of the top starts on a block; oneDNN's concat reorders the others into their parts. GoogLeNet's inception
  // outputs join blocked branches with a channels-last one (a 5x5 convolution after a reduction to 24 channels, which
  // would be padded in blocks): a plain top there cost its four readers a reorder each, forward and backward.
  for (Layout layout : bottom_layouts) {
    if (layout != Layout::kChannelBlocks8 && layout != Layout::kChannelBlocks16) continue;
    if (primitives_ == nullptr) return Layout::kPlain;
    const int block = ChannelBlock(layout, 0);
    for (int c : primitives_->channels)
      if (c % block != 0) return Layout::kPlain;
    return layout;
  }
  return Layout::kPlain;
}

void OneDnnConcatLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ConcatLayer::Reshape(bottom, top);  // checks the bottoms and shapes the top, as the native engine does
  CREMA_CHECK(axis_ == 1 && top[0]->num_axes() == 4)
      << describe() << ": the onednn engine joins 4-d bottoms along axis 1 (its refusal should have said so)";
  auto p = std::make_unique<Primitives>();
  const memory::desc whole = onednn::BlobDesc(*top[0]);
  const memory::desc diff_whole = onednn::WithDataType(whole, memory::data_type::f32);
  int channel = 0;
  for (const Blob* b : bottom) {
    p->bottoms.push_back(onednn::BlobDesc(*b));
    p->diff_bottoms.push_back(onednn::WithDataType(p->bottoms.back(), b->diff_type() == ElementType::kBfloat16
                                                                          ? memory::data_type::bf16
                                                                          : memory::data_type::f32));
    p->channels.push_back(b->shape(1));
    const memory::dims dims = onednn::Dims({b->shape(0), b->shape(1), b->shape(2), b->shape(3)});
    const memory::dims offsets = onednn::Dims({0, channel, 0, 0});
    p->parts.push_back(whole.submemory_desc(dims, offsets));
    p->diff_parts.push_back(diff_whole.submemory_desc(dims, offsets));
    channel += b->shape(1);
  }
  const Layout layout = top[0]->layout();
  p->by_images = layout != Layout::kChannelsLast;
  for (const Blob* b : bottom) p->by_images = p->by_images && b->layout() == layout;
  p->forward = dnnl::concat::primitive_desc(whole, 1, p->bottoms, CpuEngine(), onednn::UserScratchpad());
  p->forward_primitive = dnnl::concat(p->forward);
  onednn::Regions regions;
  p->top = p->forward.dst_desc();
  p->scratch_desc = p->forward.scratchpad_desc();
  p->scratch = regions.Add(p->scratch_desc);
  RequestWorkspace(regions.Floats());
  primitives_ = std::move(p);
}

void OneDnnConcatLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Primitives& p = *primitives_;
  if (p.by_images) {
    const size_t bytes = ElementBytes(top[0]->data_type());  // 8-bit blobs too
    std::vector<const char*> from;
    for (const Blob* b : bottom) from.push_back(static_cast<const char*>(b->cpu_bytes()));
    char* to = static_cast<char*>(top[0]->mutable_cpu_bytes());
    const std::vector<long long> sizes = ImageSizes(bottom);
    ForEachImagePart(top[0]->shape(0), sizes, top[0]->count(1), bytes, [&](int n, size_t b, long long offset) {
      std::memcpy(to + offset * bytes, from[b] + n * sizes[b] * bytes, sizes[b] * bytes);
    });
    return;
  }
  onednn::RunOnSources(p.forward_primitive, p.scratch_desc, p.bottoms, bottom, p.top, top[0]->mutable_cpu_bytes(),
                       workspace(), p.scratch, &p.forward_bindings);
}

void OneDnnConcatLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  Primitives& p = *primitives_;
  if (p.by_images) return SplitGradientByImages(*top[0], propagate_down, bottom);
  onednn::Binder bind(workspace(), &p.backward_bindings);
  for (size_t b = 0; b < bottom.size(); ++b) {
    if (!propagate_down[b]) continue;
    const memory part = bind.Plain(p.diff_parts[b], top[0]->cpu_diff());
    const memory gradient = bind.Plain(p.diff_bottoms[b], bottom[b]->mutable_cpu_diff_bytes());
    onednn::RunReorder(onednn::Reorder(p.diff_parts[b], p.diff_bottoms[b]), bind.stream(), part, gradient);
  }
  bind.stream().wait();
}

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
