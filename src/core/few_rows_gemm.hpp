// Matrix products with few rows on the left and a large matrix on the right: an inner product at a small batch
// (CaffeNet's fc6 at batch 10 is a 10 x 9216 input times the 9216 x 4096 transposed weights, 151 MB). The arithmetic
// is small against that matrix, which comes from memory once per product, so the product is as fast as the matrix
// can be read. These loops read it once, a few rows at a time on every thread, each row against all of A's rows
// while it is in the L1 cache (docs/performance.md: fc6's forward at batch 10 in 10-12 ms against 23-31 on oneDNN's
// sgemm; at batch 1, 2.8x OpenBLAS's one-thread matrix-vector product).
//
// Built for AVX-512, AVX2 and SSE2, the widest this CPU runs chosen once. Each output value is summed in one order,
// over k in vectors of that build's width, their lanes in pairs, then the scalar tail, whatever the threads (which take
// whole rows of B): the same values on one thread or many.
#pragma once

namespace crema {

// The most left-hand rows the loops here take.
constexpr int kFewRows = 16;

// Whether C = A * op(B) with A of M rows and op(B) of K x N takes the loops here: M <= kFewRows and B too large to
// stay in a core's L2 cache (from 2^20 values; smaller products' operands are in the caches, where a GEMM's
// kernels are as fast).
bool FewRowsPay(int M, int N, int K);

// C (M x N) = alpha * A (M x K, row-major) * B^T + beta * C, where B is N x K row-major (an inner product's weights
// as Caffe stores them). With beta 0, C is written, not read.
void FewRowsTimesTransposed(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);

// The same in the build of `width` floats a vector (16: AVX-512, 8: AVX2, 4: SSE2), for tests of each: false, and C
// untouched, where this CPU does not run it.
bool FewRowsTimesTransposedIn(int width, int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                              float* C);

// C (M x N) = alpha * A^T * B, where A is K x M and B K x N row-major and K (the depth) is at most kFewRows: a sum of a
// few outer products, as an inner product's weight gradient from a few rows (fc6's at batch 10: 4096 x 9216 from 10
// rows of 4096 and of 9216). The arithmetic is small against C, which is only written: these loops write it with
// streaming stores, which go to memory without reading each line into the caches first (a third of the traffic a
// GEMM's ordinary stores make: fc6's gradient 3.5 ms against 4.9 on oneDNN's sgemm, on a Zen 5), 512 columns at a
// time over every row of a thread's share while those columns of B stay in the L1 cache. Each value is summed over
// the depth in order, whatever the threads: the same values on one thread or many. C is written, not read (no beta).
// Where C's rows are not aligned for the stores (C at 64 bytes, N a multiple of the vector), ordinary stores.
bool FewDepthPays(int M, int N, int K);
void TransposedTimesFewDepth(int M, int N, int K, float alpha, const float* A, const float* B, float* C);
// The same in the build of `width` floats a vector, as FewRowsTimesTransposedIn.
bool TransposedTimesFewDepthIn(int width, int M, int N, int K, float alpha, const float* A, const float* B, float* C);

}  // namespace crema
