#include "layers/vision/bf16_winograd.hpp"

#ifdef CREMA_USE_ONEDNN

#include <algorithm>
#include <cstring>
#include <sstream>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/bf16_vectors.hpp"
#include "core/blob.hpp"
#include "core/common.hpp"
#include "core/threads.hpp"
#include "core/vector_clones.hpp"
#include "layers/onednn_util.hpp"

namespace crema {

using dnnl::memory;
using Tag = memory::format_tag;

namespace {

constexpr int kBlock = 16;      // channels a vector
constexpr int kPositions = 16;  // the 4 x 4 transformed tile
constexpr size_t kAlign = 64;   // bytes: every stretch of the workspace starts on a cache line

size_t AlignedBytes(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// G f G^T of `count` kernels of 9 weights each, lying one after another from `kernels` (turned half a turn first where
// `turned`), into `to`: position p's transform of kernel k at to[p * plane + k]. Sixteen kernels at a time in AVX-512
// where built for it (the same arithmetic, operation for operation, as the loop for the rest).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
template <typename V>
CREMA_ALWAYS_INLINE void TransformKernel(const V (&f)[3][3], float* to, size_t plane) {
  V gf[4][3];  // G f
  for (int x = 0; x < 3; ++x) {
    gf[0][x] = f[0][x];
    gf[1][x] = (f[0][x] + f[1][x] + f[2][x]) * .5f;
    gf[2][x] = (f[0][x] - f[1][x] + f[2][x]) * .5f;
    gf[3][x] = f[2][x];
  }
  for (int r = 0; r < 4; ++r) {
    const V row[4] = {gf[r][0], (gf[r][0] + gf[r][1] + gf[r][2]) * .5f, (gf[r][0] - gf[r][1] + gf[r][2]) * .5f,
                      gf[r][2]};
    for (int c = 0; c < 4; ++c) std::memcpy(to + (r * 4 + c) * plane, &row[c], sizeof(V));
  }
}

#if CREMA_BF16_LOOPS

// 16 kernels `stride` floats apart from `kernels`, each as 3 x 3 vectors over the 16 (turned where `turned`).
CREMA_BF16_INLINE void GatherKernels16(const float* kernels, int stride, bool turned, __m512 (&f)[3][3]) {
  const __m512i at = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                        _mm512_set1_epi32(stride));
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 3; ++x)
      f[y][x] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xffff, at,
                                         kernels + (turned ? (2 - y) * 3 + (2 - x) : y * 3 + x), 4);
}

CREMA_BF16_TARGET void TransformKernels16(const float* kernels, bool turned, float* to, size_t plane) {
  __m512 f[3][3];
  GatherKernels16(kernels, 9, turned, f);
  TransformKernel(f, to, plane);
}

// The same for 16 kernels `stride` floats apart, rounded to bf16: position p's 16 values at to[p * plane].
CREMA_BF16_TARGET void TransformKernelsToBfloat16(const float* kernels, int stride, bool turned, uint16_t* to,
                                                  size_t plane) {
  __m512 f[3][3];
  GatherKernels16(kernels, stride, turned, f);
  float transforms[kPositions * 16];
  TransformKernel(f, transforms, 16);
  for (int position = 0; position < kPositions; ++position)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + position * plane),
                        Rounded(_mm512_loadu_ps(transforms + position * 16)));
}
#endif
#pragma GCC diagnostic pop

void TransformKernels(const float* kernels, int count, bool turned, float* to, size_t plane) {
  int k = 0;
#if CREMA_BF16_LOOPS
  for (; k + 16 <= count; k += 16) TransformKernels16(kernels + k * 9, turned, to + k, plane);
#endif
  for (; k < count; ++k) {
    float f[3][3];
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 3; ++x) f[y][x] = kernels[k * 9 + (turned ? (2 - y) * 3 + (2 - x) : y * 3 + x)];
    TransformKernel(f, to + k, plane);
  }
}

}  // namespace

// One pass: a convolution of the kind (the forward, or the input gradient's), `inputs` channels over height x width,
// padded, to `outputs` channels over out_h x out_w, in tiles of 2 x 2 outputs; or the weights' gradient, over the
// forward's tiles.
struct Bfloat16Winograd::Pass {
  enum Kind { kForward, kInputGradient, kWeightGradient };
  Kind kind = kForward;
  int num = 0, inputs = 0, outputs = 0, height = 0, width = 0, pad_h = 0, pad_w = 0, out_h = 0, out_w = 0;
  bool turned = false;  // the input gradient's: weights (inputs x outputs) turned half a turn
  int tiles_h = 0, tiles_w = 0;
  int64_t tiles = 0;  // over all images
  int chunk = 0;      // tiles a chunk
  int threads = 1;
  // A thread's stretch of the workspace: the chunk's transformed tiles [position][tile][input] in bf16 (the matmul's
  // source, batched over the positions), its sums [position][tile][output] in floats, the matmul's scratchpad. The
  // weights' gradient: the transformed input tiles, the transformed output gradient's [position][tile][output] in
  // bf16, the thread's sums over its chunks [position][output][input] in floats, and its sums of the output gradient
  // for the bias.
  size_t tiles_bytes = 0, sums_bytes = 0, scratch_bytes = 0, thread_bytes = 0;
  size_t gradient_tiles_bytes = 0, bias_bytes = 0;
  dnnl::matmul::primitive_desc matmul_desc, adding_desc;
  dnnl::matmul matmul, adding;    // adding: the weights' gradient's, adding to what its output holds
  memory transformed;             // U, [position][input][output] in bf16, in the matmul's layout
  uint64_t version = 0;           // the weights' data_version when transformed (0: never)
  const float* source = nullptr;  // and their data

  Pass(const WinogradShape& s, Kind pass, int thread_count)
      : kind(pass), turned(pass == kInputGradient), threads(thread_count) {
    num = s.num;
    if (turned) {
      inputs = s.outputs;
      outputs = s.inputs;
      height = s.out_h;
      width = s.out_w;
      pad_h = 2 - s.pad_h;
      pad_w = 2 - s.pad_w;
      out_h = s.height;
      out_w = s.width;
    } else {
      inputs = s.inputs;
      outputs = s.outputs;
      height = s.height;
      width = s.width;
      pad_h = s.pad_h;
      pad_w = s.pad_w;
      out_h = s.out_h;
      out_w = s.out_w;
    }
    tiles_h = (out_h + 1) / 2;
    tiles_w = (out_w + 1) / 2;
    tiles = static_cast<int64_t>(num) * tiles_h * tiles_w;
    if (kind == kWeightGradient) {
      // Each chunk's product adds into the thread's sums (a sum post-op), which it reads and writes whole: a longer
      // chunk reads them fewer times.
      chunk = 256;
      const memory::dim m = outputs, k = chunk, n = inputs;
      // The output gradient's tiles lie [position][tile][output]: read as [position][output][tile].
      const memory::desc src({kPositions, m, k}, memory::data_type::bf16, Tag::acb);
      const memory::desc tiles_in({kPositions, k, n}, memory::data_type::bf16, Tag::abc);
      const memory::desc dst({kPositions, m, n}, memory::data_type::f32, Tag::abc);
      // A thread's first chunk writes its sums; the next add to them.
      MakeMatmul(src, tiles_in, dst, onednn::UserScratchpad());
      dnnl::primitive_attr attr = onednn::UserScratchpad();
      dnnl::post_ops add;
      add.append_sum(1.f);
      attr.set_post_ops(add);
      OneThreadWhile one(true);
      adding_desc = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, tiles_in, dst), attr, onednn::CpuEngine());
      adding = dnnl::matmul(adding_desc);
      tiles_bytes = AlignedBytes(sizeof(uint16_t) * kPositions * chunk * inputs);
      gradient_tiles_bytes = AlignedBytes(sizeof(uint16_t) * kPositions * chunk * outputs);
      sums_bytes = AlignedBytes(sizeof(float) * kPositions * outputs * inputs);
      bias_bytes = AlignedBytes(sizeof(float) * outputs);
    } else {
      // The sums of a chunk in about half an L2 cache (1.5 MB at 192 outputs measured as fast; more spilled).
      chunk = outputs <= 256 ? 128 : 64;
      const memory::dim m = chunk, k = inputs, n = outputs;
      const memory::desc src({kPositions, m, k}, memory::data_type::bf16, Tag::abc);
      const memory::desc weights({kPositions, k, n}, memory::data_type::bf16, Tag::any);
      const memory::desc dst({kPositions, m, n}, memory::data_type::f32, Tag::abc);
      MakeMatmul(src, weights, dst, onednn::UserScratchpad());
      transformed = memory(matmul_desc.weights_desc(), onednn::CpuEngine());
      tiles_bytes = AlignedBytes(sizeof(uint16_t) * kPositions * chunk * inputs);
      sums_bytes = AlignedBytes(sizeof(float) * kPositions * chunk * outputs);
    }
    scratch_bytes = AlignedBytes(std::max(matmul_desc.scratchpad_desc().get_size(),
                                          adding ? adding_desc.scratchpad_desc().get_size() : size_t{0}));
    thread_bytes = tiles_bytes + gradient_tiles_bytes + sums_bytes + bias_bytes + scratch_bytes;
  }

  void MakeMatmul(const memory::desc& src, const memory::desc& weights, const memory::desc& dst,
                  const dnnl::primitive_attr& attr) {
    // Made for the one thread it runs on (within a chunk).
    OneThreadWhile one(true);
    matmul_desc = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, onednn::CpuEngine());
    matmul = dnnl::matmul(matmul_desc);
  }

  // The weights' transforms, where the pass has them.
  size_t HeldBytes() const { return transformed ? transformed.get_desc().get_size() : 0; }

  // Tile `index` (over all images, row by row): its image, and its first output row and column.
  struct Tile {
    int n, oy, ox;
  };
  Tile TileOf(int64_t index) const {
    const int64_t per_image = static_cast<int64_t>(tiles_h) * tiles_w;
    const int rest = static_cast<int>(index % per_image);
    return {static_cast<int>(index / per_image), 2 * (rest / tiles_w), 2 * (rest % tiles_w)};
  }

  // The threads' stretches, or the weights' transforms in floats before them (the forward's and the input gradient's).
  size_t WorkspaceFloats() const {
    const size_t transforms = kind == kWeightGradient ? 0 : static_cast<size_t>(kPositions) * inputs * outputs;
    return std::max((thread_bytes * threads + kAlign) / sizeof(float), transforms);
  }

  // U from the float weights (Caffe's outputs x inputs x 3 x 3 of the forward), where they changed, computed in floats
  // in `workspace` (WorkspaceFloats).
  void Transform(const Blob& weights, float* workspace) {
    const float* w = weights.cpu_data();
    if (version != 0 && weights.data_version() == version && w == source) return;
    version = weights.data_version();
    source = w;
    const size_t plane = static_cast<size_t>(inputs) * outputs;
#if CREMA_BF16_LOOPS
    // Where the matmul reads them as they lie ([position][input][output]), rounded straight into place, 16 outputs at
    // a time (the forward's kernels of 16 outputs lie an output's kernels apart, the input gradient's next to each
    // other).
    if (transformed.get_desc() == memory::desc({kPositions, inputs, outputs}, memory::data_type::bf16, Tag::abc)) {
      auto* u = static_cast<uint16_t*>(transformed.get_data_handle());
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(inputs) * outputs >= 4096)
      for (int i = 0; i < inputs; ++i)
        for (int o = 0; o < outputs; o += 16)
          TransformKernelsToBfloat16(
              turned ? w + (static_cast<size_t>(i) * outputs + o) * 9 : w + (static_cast<size_t>(o) * inputs + i) * 9,
              turned ? 9 : inputs * 9, turned, u + static_cast<size_t>(i) * outputs + o, plane);
      return;
    }
#endif
    // Each kernel's 9 weights lie together, kernels in Caffe's order (the forward's outputs, then inputs): the loops
    // run over them in that order, the outer over the threads, and write the transforms as [position][outer][inner]
    // (the forward's [position][output][input], which the reorder below reads as such).
    const int outer = turned ? inputs : outputs, inner = turned ? outputs : inputs;
    float* u = workspace;
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(inputs) * outputs >= 4096)
    for (int a = 0; a < outer; ++a)
      TransformKernels(w + static_cast<size_t>(a) * inner * 9, inner, turned, u + static_cast<size_t>(a) * inner,
                       plane);
    // Rounded to bf16 by oneDNN's reorder (to nearest even, as ToBfloat16) into the matmul's layout.
    const memory::desc plain_desc({kPositions, inputs, outputs}, memory::data_type::f32, turned ? Tag::abc : Tag::acb);
    memory from(plain_desc, onednn::CpuEngine(), u);
    dnnl::stream stream(onednn::CpuEngine());
    onednn::RunReorder(onednn::Reorder(plain_desc, matmul_desc.weights_desc()), stream, from, transformed);
    stream.wait();
  }
};

#if CREMA_BF16_LOOPS

namespace {

// One 4 x 4 patch of 16 channels, V = B^T d B, rounded, stored at `to` (16 positions, `position_stride` apart).
CREMA_BF16_INLINE void TransformPatch(const __m512 (&d)[4][4], uint16_t* to, size_t position_stride) {
  __m512 t[4][4];  // B^T d
  for (int x = 0; x < 4; ++x) {
    t[0][x] = _mm512_sub_ps(d[0][x], d[2][x]);
    t[1][x] = _mm512_add_ps(d[1][x], d[2][x]);
    t[2][x] = _mm512_sub_ps(d[2][x], d[1][x]);
    t[3][x] = _mm512_sub_ps(d[1][x], d[3][x]);
  }
  for (int r = 0; r < 4; ++r) {
    const __m512 v[4] = {_mm512_sub_ps(t[r][0], t[r][2]), _mm512_add_ps(t[r][1], t[r][2]),
                         _mm512_sub_ps(t[r][2], t[r][1]), _mm512_sub_ps(t[r][1], t[r][3])};
    for (int c = 0; c < 4; ++c)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + (r * 4 + c) * position_stride), Rounded(v[c]));
  }
}

// The transformed tiles of chunk tiles [first, first + count) of `pass` from `src` (16-channel blocks), into `to`
// ([position][tile][input], bf16); the chunk's tiles past the last are zeros.
template <typename T>
CREMA_BF16_TARGET void TransformInputs(const Bfloat16Winograd::Pass& p, const T* src, int64_t first, int count,
                                       uint16_t* to) {
  const int blocks = p.inputs / kBlock;
  const size_t plane = static_cast<size_t>(p.height) * p.width * kBlock;
  const size_t position_stride = static_cast<size_t>(p.chunk) * p.inputs;
  for (int t = 0; t < p.chunk; ++t) {
    uint16_t* tile = to + static_cast<size_t>(t) * p.inputs;
    const int64_t index = first + t;
    if (t >= count) {
      for (int position = 0; position < kPositions; ++position)
        std::memset(tile + position * position_stride, 0, sizeof(uint16_t) * p.inputs);
      continue;
    }
    const Bfloat16Winograd::Pass::Tile at = p.TileOf(index);
    const int n = at.n, y0 = at.oy - p.pad_h, x0 = at.ox - p.pad_w;
    const bool inside = y0 >= 0 && x0 >= 0 && y0 + 4 <= p.height && x0 + 4 <= p.width;
    for (int b = 0; b < blocks; ++b) {
      const T* image = src + (static_cast<size_t>(n) * blocks + b) * plane;
      __m512 d[4][4];
      if (inside) {
        for (int y = 0; y < 4; ++y)
          for (int x = 0; x < 4; ++x)
            d[y][x] = LoadBfloat16Values(image + (static_cast<size_t>(y0 + y) * p.width + x0 + x) * kBlock);
      } else {
        for (int y = 0; y < 4; ++y)
          for (int x = 0; x < 4; ++x) {
            const int iy = y0 + y, ix = x0 + x;
            d[y][x] = iy >= 0 && iy < p.height && ix >= 0 && ix < p.width
                          ? LoadBfloat16Values(image + (static_cast<size_t>(iy) * p.width + ix) * kBlock)
                          : _mm512_setzero_ps();
          }
      }
      TransformPatch(d, tile + b * kBlock, position_stride);
    }
  }
}

// The outputs of chunk tiles [first, first + count) from their sums `m` ([position][tile][output]): A^T M A, plus
// `bias`, through the ReLU where `relu`, stored into `dst` (16-channel blocks).
template <typename T>
CREMA_BF16_TARGET void TransformOutputs(const Bfloat16Winograd::Pass& p, const float* m, int64_t first, int count,
                                        const float* bias, bool relu, float relu_slope, T* dst) {
  const int blocks = p.outputs / kBlock;
  const size_t plane = static_cast<size_t>(p.out_h) * p.out_w * kBlock;
  const size_t position_stride = static_cast<size_t>(p.chunk) * p.outputs;
  const __m512 slope = _mm512_set1_ps(relu_slope);
  for (int t = 0; t < count; ++t) {
    const auto [n, oy, ox] = p.TileOf(first + t);
    const int rows = std::min(2, p.out_h - oy), columns = std::min(2, p.out_w - ox);
    for (int b = 0; b < blocks; ++b) {
      const float* sums = m + static_cast<size_t>(t) * p.outputs + b * kBlock;
      __m512 s[2][4];  // A^T M
      for (int c = 0; c < 4; ++c) {
        const __m512 q0 = _mm512_loadu_ps(sums + (0 * 4 + c) * position_stride);
        const __m512 q1 = _mm512_loadu_ps(sums + (1 * 4 + c) * position_stride);
        const __m512 q2 = _mm512_loadu_ps(sums + (2 * 4 + c) * position_stride);
        const __m512 q3 = _mm512_loadu_ps(sums + (3 * 4 + c) * position_stride);
        s[0][c] = _mm512_add_ps(_mm512_add_ps(q0, q1), q2);
        s[1][c] = _mm512_sub_ps(_mm512_sub_ps(q1, q2), q3);
      }
      const __m512 add = bias != nullptr ? _mm512_loadu_ps(bias + b * kBlock) : _mm512_setzero_ps();
      T* image = dst + (static_cast<size_t>(n) * blocks + b) * plane;
      for (int r = 0; r < rows; ++r) {
        const __m512 out[2] = {_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[r][0], s[r][1]), s[r][2]), add),
                               _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s[r][1], s[r][2]), s[r][3]), add)};
        for (int c = 0; c < columns; ++c)
          Store16(image + (static_cast<size_t>(oy + r) * p.out_w + ox + c) * kBlock,
                  relu ? Leaky16(out[c], slope) : out[c]);
      }
    }
  }
}

// The output gradient's tiles of chunk tiles [first, first + count) of `p` (the weights' gradient's), from `diff_dst`
// (16-channel blocks, read rounded to bf16): A dY A^T of each 2 x 2 output tile (0 past the output's edge), rounded,
// into `to` ([position][tile][output], bf16; the chunk's tiles past the last are zeros); each rounded value added to
// its output's `bias` sum (every output lies in one tile).
template <typename T>
CREMA_BF16_TARGET void TransformGradients(const Bfloat16Winograd::Pass& p, const T* diff_dst, int64_t first, int count,
                                          uint16_t* to, float* bias) {
  const int blocks = p.outputs / kBlock;
  const size_t plane = static_cast<size_t>(p.out_h) * p.out_w * kBlock;
  const size_t position_stride = static_cast<size_t>(p.chunk) * p.outputs;
  for (int t = 0; t < p.chunk; ++t) {
    uint16_t* tile = to + static_cast<size_t>(t) * p.outputs;
    if (t >= count) {
      for (int position = 0; position < kPositions; ++position)
        std::memset(tile + position * position_stride, 0, sizeof(uint16_t) * p.outputs);
      continue;
    }
    const auto [n, oy, ox] = p.TileOf(first + t);
    const int rows = std::min(2, p.out_h - oy), columns = std::min(2, p.out_w - ox);
    for (int b = 0; b < blocks; ++b) {
      const T* image = diff_dst + (static_cast<size_t>(n) * blocks + b) * plane;
      __m512 g[2][2];
      for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 2; ++c)
          g[r][c] = r < rows && c < columns
                        ? LoadBfloat16Values(image + (static_cast<size_t>(oy + r) * p.out_w + ox + c) * kBlock)
                        : _mm512_setzero_ps();
      _mm512_storeu_ps(bias + b * kBlock,
                       _mm512_add_ps(_mm512_loadu_ps(bias + b * kBlock),
                                     _mm512_add_ps(_mm512_add_ps(g[0][0], g[0][1]), _mm512_add_ps(g[1][0], g[1][1]))));
      __m512 z[4][2];  // A dY, A = [1 0; 1 1; 1 -1; 0 -1]
      for (int c = 0; c < 2; ++c) {
        z[0][c] = g[0][c];
        z[1][c] = _mm512_add_ps(g[0][c], g[1][c]);
        z[2][c] = _mm512_sub_ps(g[0][c], g[1][c]);
        z[3][c] = _mm512_sub_ps(_mm512_setzero_ps(), g[1][c]);
      }
      for (int r = 0; r < 4; ++r) {
        const __m512 v[4] = {z[r][0], _mm512_add_ps(z[r][0], z[r][1]), _mm512_sub_ps(z[r][0], z[r][1]),
                             _mm512_sub_ps(_mm512_setzero_ps(), z[r][1])};
        for (int c = 0; c < 4; ++c)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile + b * kBlock + (r * 4 + c) * position_stride),
                              Rounded(v[c]));
      }
    }
  }
}

// How a pass's chunks go over the threads: `chunks` of them, statically over `threads` (no more threads than chunks),
// thread t's stretch of the workspace at base + t * thread_bytes.
struct ChunkPlan {
  int64_t chunks = 0;
  int threads = 1;
  char* base = nullptr;
};
ChunkPlan PlanChunks(const Bfloat16Winograd::Pass& p, float* workspace) {
  ChunkPlan plan;
  plan.chunks = (p.tiles + p.chunk - 1) / p.chunk;
  plan.threads = static_cast<int>(std::min<int64_t>(std::min(p.threads, CurrentThreadCount()), plan.chunks));
  plan.base = reinterpret_cast<char*>(AlignedBytes(reinterpret_cast<uintptr_t>(workspace)));
  return plan;
}
int ThreadIndex() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

// The weights' gradient's pass over all chunks: each thread its chunks into its own sums (zeroed first); then the
// threads' sums added in thread order, G^T (sum) G added to `weight_diff` ([output][input][3][3]) and the bias sums to
// `bias_diff` (where not null).
template <typename In, typename Gradient>
void RunWeightGradient(Bfloat16Winograd::Pass& p, const In* src, const Gradient* diff_dst, float* weight_diff,
                       float* bias_diff, float* workspace) {
  const ChunkPlan plan = PlanChunks(p, workspace);
  const int threads = plan.threads;
  char* const base = plan.base;
  const size_t sums_offset = p.tiles_bytes + p.gradient_tiles_bytes;
  const size_t bias_offset = sums_offset + p.sums_bytes;
#pragma omp parallel num_threads(threads)
  {
    char* mine = base + p.thread_bytes * ThreadIndex();
    uint16_t* tiles = reinterpret_cast<uint16_t*>(mine);
    uint16_t* gradient_tiles = reinterpret_cast<uint16_t*>(mine + p.tiles_bytes);
    float* sums = reinterpret_cast<float*>(mine + sums_offset);
    float* bias = reinterpret_cast<float*>(mine + bias_offset);
    std::memset(bias, 0, sizeof(float) * p.outputs);
    bool first_chunk = true;
    dnnl::stream stream(onednn::CpuEngine());
    memory a(p.matmul_desc.src_desc(), onednn::CpuEngine(), gradient_tiles);
    memory b(p.matmul_desc.weights_desc(), onednn::CpuEngine(), tiles);
    memory c(p.matmul_desc.dst_desc(), onednn::CpuEngine(), sums);
    memory scratch(p.matmul_desc.scratchpad_desc(), onednn::CpuEngine(), mine + bias_offset + p.bias_bytes);
#pragma omp for schedule(static)
    for (int64_t chunk = 0; chunk < plan.chunks; ++chunk) {
      const int64_t first = chunk * p.chunk;
      const int count = static_cast<int>(std::min<int64_t>(p.chunk, p.tiles - first));
      TransformInputs(p, src, first, count, tiles);
      TransformGradients(p, diff_dst, first, count, gradient_tiles, bias);
      (first_chunk ? p.matmul : p.adding)
          .execute(stream,
                   {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, scratch}});
      stream.wait();
      first_chunk = false;
    }
  }
  // The threads' sums added in thread order: the bias's, and each pair's within G^T (sum) G, added to its 3 x 3
  // gradient.
  const auto sums_of = [&](int t) { return reinterpret_cast<const float*>(base + p.thread_bytes * t + sums_offset); };
  if (bias_diff != nullptr)
    for (int o = 0; o < p.outputs; ++o) {
      float total = 0.f;
      for (int t = 0; t < threads; ++t)
        total += reinterpret_cast<const float*>(base + p.thread_bytes * t + bias_offset)[o];
      bias_diff[o] += total;
    }
  const size_t plane = static_cast<size_t>(p.outputs) * p.inputs;
#pragma omp parallel for schedule(static) if (plane >= 4096)
  for (int o = 0; o < p.outputs; ++o)
    for (int i = 0; i < p.inputs; ++i) {
      const size_t pair = static_cast<size_t>(o) * p.inputs + i;
      float m[4][4];
      for (int e = 0; e < kPositions; ++e) {
        float total = 0.f;
        for (int t = 0; t < threads; ++t) total += sums_of(t)[e * plane + pair];
        m[e / 4][e % 4] = total;
      }
      float gm[3][4];  // G^T m: G^T = [1 .5 .5 0; 0 .5 -.5 0; 0 .5 .5 1]
      for (int c = 0; c < 4; ++c) {
        gm[0][c] = m[0][c] + .5f * (m[1][c] + m[2][c]);
        gm[1][c] = .5f * (m[1][c] - m[2][c]);
        gm[2][c] = .5f * (m[1][c] + m[2][c]) + m[3][c];
      }
      float* to = weight_diff + pair * 9;
      for (int y = 0; y < 3; ++y) {
        to[y * 3 + 0] += gm[y][0] + .5f * (gm[y][1] + gm[y][2]);
        to[y * 3 + 1] += .5f * (gm[y][1] - gm[y][2]);
        to[y * 3 + 2] += .5f * (gm[y][1] + gm[y][2]) + gm[y][3];
      }
    }
}

// The pass over all chunks: each thread its chunks, from input patches to outputs.
template <typename In, typename Out>
void Run(Bfloat16Winograd::Pass& p, const In* src, const float* bias, bool relu, float relu_slope, Out* dst,
         float* workspace) {
  const ChunkPlan plan = PlanChunks(p, workspace);
#pragma omp parallel num_threads(plan.threads)
  {
    char* mine = plan.base + p.thread_bytes * ThreadIndex();
    uint16_t* tiles = reinterpret_cast<uint16_t*>(mine);
    float* sums = reinterpret_cast<float*>(mine + p.tiles_bytes);
    dnnl::stream stream(onednn::CpuEngine());
    memory a(p.matmul_desc.src_desc(), onednn::CpuEngine(), tiles);
    memory c(p.matmul_desc.dst_desc(), onednn::CpuEngine(), sums);
    memory scratch(p.matmul_desc.scratchpad_desc(), onednn::CpuEngine(), mine + p.tiles_bytes + p.sums_bytes);
#pragma omp for schedule(static)
    for (int64_t chunk = 0; chunk < plan.chunks; ++chunk) {
      const int64_t first = chunk * p.chunk;
      const int count = static_cast<int>(std::min<int64_t>(p.chunk, p.tiles - first));
      TransformInputs(p, src, first, count, tiles);
      p.matmul.execute(
          stream,
          {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, p.transformed}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, scratch}});
      stream.wait();
      TransformOutputs(p, sums, first, count, bias, relu, relu_slope, dst);
    }
  }
}

}  // namespace

#endif  // CREMA_BF16_LOOPS

std::string Bfloat16Winograd::Refusal(const WinogradShape& s) {
  std::ostringstream why;
#if CREMA_BF16_LOOPS
  if (!HasBfloat16Conversions()) return "this CPU has no AVX512_BF16 conversions";
#else
  return "built for no x86-64 vector instructions";
#endif
  if (s.inputs % kBlock != 0 || s.outputs % kBlock != 0)
    why << s.inputs << " -> " << s.outputs << " channels do not fill blocks of " << kBlock;
  else if (s.pad_h < 0 || s.pad_h > 2 || s.pad_w < 0 || s.pad_w > 2)
    why << "pad " << s.pad_h << " x " << s.pad_w << " (takes 0 to 2)";
  else if (s.out_h < kSmallestSide || s.out_w < kSmallestSide)
    why << "its " << s.out_h << " x " << s.out_w << " outputs are under " << kSmallestSide << " x " << kSmallestSide;
  return why.str();
}

Bfloat16Winograd::Bfloat16Winograd(const WinogradShape& shape, bool backward, int threads)
    : forward_(std::make_unique<Pass>(shape, Pass::kForward, threads)),
      input_gradient_(backward ? std::make_unique<Pass>(shape, Pass::kInputGradient, threads) : nullptr),
      weight_gradient_(backward && shape.out_h >= kSmallestWeightGradientSide &&
                               shape.out_w >= kSmallestWeightGradientSide
                           ? std::make_unique<Pass>(shape, Pass::kWeightGradient, threads)
                           : nullptr) {}

Bfloat16Winograd::~Bfloat16Winograd() = default;

size_t Bfloat16Winograd::WorkspaceFloats() const {
  size_t floats = forward_->WorkspaceFloats();
  for (const Pass* pass : {input_gradient_.get(), weight_gradient_.get()})
    if (pass != nullptr) floats = std::max(floats, pass->WorkspaceFloats());
  return floats;
}

size_t Bfloat16Winograd::HeldBytes() const {
  return forward_->HeldBytes() + (input_gradient_ ? input_gradient_->HeldBytes() : 0);
}

void Bfloat16Winograd::Forward(const Blob& weights, const float* bias, bool relu, float relu_slope, const void* src,
                               bool src_bf16, void* dst, bool dst_bf16, float* workspace) {
#if CREMA_BF16_LOOPS
  Pass& p = *forward_;
  p.Transform(weights, workspace);
  if (src_bf16 && dst_bf16)
    Run(p, static_cast<const uint16_t*>(src), bias, relu, relu_slope, static_cast<uint16_t*>(dst), workspace);
  else if (src_bf16)
    Run(p, static_cast<const uint16_t*>(src), bias, relu, relu_slope, static_cast<float*>(dst), workspace);
  else if (dst_bf16)
    Run(p, static_cast<const float*>(src), bias, relu, relu_slope, static_cast<uint16_t*>(dst), workspace);
  else
    Run(p, static_cast<const float*>(src), bias, relu, relu_slope, static_cast<float*>(dst), workspace);
#else
  CREMA_FAIL() << "bf16 Winograd convolutions need x86-64 vector instructions";
#endif
}

void Bfloat16Winograd::InputGradient(const Blob& weights, const void* diff_dst, bool diff_dst_bf16, void* diff_src,
                                     bool diff_src_bf16, float* workspace) {
#if CREMA_BF16_LOOPS
  CREMA_CHECK(input_gradient_ != nullptr) << "a bf16 Winograd convolution made for its forward only";
  Pass& p = *input_gradient_;
  p.Transform(weights, workspace);
  if (diff_dst_bf16 && diff_src_bf16)
    Run(p, static_cast<const uint16_t*>(diff_dst), nullptr, false, 0.f, static_cast<uint16_t*>(diff_src), workspace);
  else if (diff_dst_bf16)
    Run(p, static_cast<const uint16_t*>(diff_dst), nullptr, false, 0.f, static_cast<float*>(diff_src), workspace);
  else if (diff_src_bf16)
    Run(p, static_cast<const float*>(diff_dst), nullptr, false, 0.f, static_cast<uint16_t*>(diff_src), workspace);
  else
    Run(p, static_cast<const float*>(diff_dst), nullptr, false, 0.f, static_cast<float*>(diff_src), workspace);
#else
  CREMA_FAIL() << "bf16 Winograd convolutions need x86-64 vector instructions";
#endif
}

void Bfloat16Winograd::WeightGradient(const void* src, bool src_bf16, const void* diff_dst, bool diff_dst_bf16,
                                      float* weight_diff, float* bias_diff, float* workspace) {
#if CREMA_BF16_LOOPS
  CREMA_CHECK(weight_gradient_ != nullptr) << "a bf16 Winograd convolution made without its weights' gradient";
  Pass& p = *weight_gradient_;
  if (src_bf16 && diff_dst_bf16)
    RunWeightGradient(p, static_cast<const uint16_t*>(src), static_cast<const uint16_t*>(diff_dst), weight_diff,
                      bias_diff, workspace);
  else if (src_bf16)
    RunWeightGradient(p, static_cast<const uint16_t*>(src), static_cast<const float*>(diff_dst), weight_diff, bias_diff,
                      workspace);
  else if (diff_dst_bf16)
    RunWeightGradient(p, static_cast<const float*>(src), static_cast<const uint16_t*>(diff_dst), weight_diff, bias_diff,
                      workspace);
  else
    RunWeightGradient(p, static_cast<const float*>(src), static_cast<const float*>(diff_dst), weight_diff, bias_diff,
                      workspace);
#else
  CREMA_FAIL() << "bf16 Winograd convolutions need x86-64 vector instructions";
#endif
}

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
