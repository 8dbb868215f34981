// Matrix products read in place: operands of a contraction viewed as strided batches of
// matrices (no packing copy), matrix-vector products that stream the large operand once over
// all threads (f32 or bf16, AVX-512 when the CPU has it), and BLAS for the rest. Accumulation
// is always f32; bf16 products are exact in f32, so bf16 operands give the f32-accumulated
// result the specification asks for.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "tlaloc/ir/op_registry.h"

namespace tlaloc::cpu {

// A batch of matrices in memory: element (b, r, c) lives at
// data + (b * batch_stride + r * row_stride + c * col_stride) elements; one of row_stride and
// col_stride is 1. `type` is f32 or bf16.
struct MatrixView {
  const std::byte* data = nullptr;
  ElementType type = ElementType::kF32;
  int64_t batch_stride = 0, row_stride = 0, col_stride = 0;
};

// C[b] = A[b] (m x k) * B[b] (k x n), C an f32 row-major [batch, m, n] buffer. When m or n is
// small, a matrix-vector kernel reads the large side once (dot products along contiguous rows,
// or scaled-row accumulation when the large side is contiguous along the output); otherwise
// BLAS sgemm over blocks split across the pool (bf16 operands widened to f32 per block).
void ViewMatmul(const MatrixView& a, const MatrixView& b, int64_t batch, int64_t m, int64_t k,
                int64_t n, float* c, EvalContext& ctx);

// Largest m (or n) the matrix-vector kernel takes: it reads the other operand once for up to
// this many vectors.
inline constexpr int64_t kMaxVectors = 4;

// How far ahead the decode kernels prefetch weight rows into L2: 16 KiB (8-16 KiB measured best
// on Zen 4; on Zen 5, reading rows as one stream, 0, 4 and 32 KiB slower).
inline constexpr int64_t kRowPrefetchBytes = int64_t{16} << 10;

// Runs fn(begin, end) over [0, total) in blocks of `block` items, each thread streaming its own
// contiguous share: the items are cut into kShares contiguous shares, and the pool hands each
// thread a contiguous run of them (ParallelFor's chunks), so a thread's reads (and the prefetches
// ahead of them) run on through memory it reads next. Blocks handed out one by one across
// threads made each thread jump a block ahead at every block and prefetch the next block for the
// other thread. A thread done with its own shares takes the blocks left in the others', so one
// the OS slows down still holds no one up.
template <typename Fn>
inline void ParallelShares(EvalContext& ctx, int64_t total, int64_t block, const Fn& fn) {
  constexpr int64_t kShares = 16;
  const int64_t blocks = (total + block - 1) / block;
  if (blocks <= 1) {
    if (total > 0) fn(0, total);
    return;
  }
  const int64_t shares = std::min(kShares, blocks);
  std::atomic<int64_t> next[kShares];
  int64_t end[kShares];
  for (int64_t s = 0; s < shares; ++s) {
    next[s].store(blocks * s / shares, std::memory_order_relaxed);
    end[s] = blocks * (s + 1) / shares;
  }
  auto drain = [&](int64_t s) {
    for (int64_t b = next[s].fetch_add(1); b < end[s]; b = next[s].fetch_add(1))
      fn(b * block, std::min(total, (b + 1) * block));
  };
  ctx.ParallelFor(shares, 1, [&](int64_t first, int64_t last) {
    for (int64_t s = first; s < last; ++s) drain(s);
    // Then the others' shares from the far end of the one before, where their owners get last.
    for (int64_t i = 1; i < shares; ++i) drain((first - i + shares) % shares);
  });
}

// Calls fn(std::integral_constant<int, S>{}) with S = s_count (1 to kMaxVectors), so a kernel
// templated on its vector count is picked once per call site.
template <typename Fn>
inline void WithVectorCount(int s_count, const Fn& fn) {
  static_assert(kMaxVectors == 4);
  switch (s_count) {
    case 1:
      fn(std::integral_constant<int, 1>{});
      break;
    case 2:
      fn(std::integral_constant<int, 2>{});
      break;
    case 3:
      fn(std::integral_constant<int, 3>{});
      break;
    default:
      fn(std::integral_constant<int, 4>{});
      break;
  }
}

// Dot products of contiguous rows: out[i] = sum_k x[k] * row_i[k] with f32 accumulation.
// Exposed for the micro-benchmarks and tests.
float DotF32(const float* x, const float* row, int64_t k);
float DotBF16(const float* x, const uint16_t* row, int64_t k);
// C [m, n] = A [m, k] (f32, row-major) times B^T, B [n, k] given one block of 256 of its rows
// at a time: fill_b(j0, nb, block) writes rows j0..j0+nb of B (f32, [nb, k]) into `block`.
// Each (256 rows of A, 256 rows of B) block is the same one-thread sgemm call ViewMatmul makes
// for the whole B, so C has its bits, without B ever existing whole. Returns false, writing
// nothing, where ViewMatmul would take another path (few rows or columns, oneDNN's f32, fewer
// than four column blocks): the caller then builds B and calls ViewMatmul.
bool BlasMatmulTransposedBlocks(
    const float* a, int64_t m, int64_t k, int64_t n,
    const std::function<void(int64_t j0, int64_t nb, float* block)>& fill_b, float* c,
    EvalContext& ctx);

// How far ahead the int8 matrix-vector kernels (exact and q8_0) prefetch each row. Rows of 1 KiB
// end before the hardware prefetcher ramps up on them, so the kernels fetch the same line eight
// rows on. Into L2 (T1), not L1: with T0, L1's miss buffers filled and a cold 151,936 x 1,024
// matrix streamed at 9 GB/s on one Zen 4 core (q8_0 kernel 8.6); with T1, 14.6 (exact, which then
// runs at its arithmetic's speed) and 21.5 GB/s (q8_0), against 19.9 for the bf16 kernel
// (matmul_bench BM_Int8Kernel / BM_LinearColdWeights, 1 thread, idle). 8 rows beat 16 and 32.
inline constexpr int64_t kInt8PrefetchRowsAhead = 8;

// Products with an int8 matrix w [n, k] (row-major s8) whose f16 `scales` [n, k / 32] apply to
// blocks of 32 consecutive elements of a row (io::WeightQuantization), k a multiple of 32:
// c [m, n] = x [m, k] (f32, row-major) times dequant(w) transposed. At most kMaxVectors rows of
// x stream w once, dequantising in registers with the f32 matrix-vector kernel's arithmetic, so
// c is bit for bit ViewMatmul's with the dequantised f32 matrix; more rows dequantise w into an
// f32 temporary and call ViewMatmul (reduction_matmul_int8.cc).
void Int8Matmul(const float* x, int64_t m, const int8_t* w, const uint16_t* scales, int64_t n,
                int64_t k, float* c, EvalContext& ctx);
// One row's dot product, exposed for the micro-benchmarks and tests.
float DotInt8(const float* x, const int8_t* row, const uint16_t* scales, int64_t k);

// Rows read through a page table (decode attention's paged KV pool [pages, heads, page,
// row_len], f32 or bf16, read in place): position p of batch (b, h) is row p % page of head h
// of page table[b * blocks + p / page], that entry clamped into [0, pages) as gather clamps.
struct PagedRows {
  const std::byte* pool = nullptr;
  ElementType type = ElementType::kBF16;
  const int32_t* table = nullptr;  // [B, blocks]
  int64_t pages = 0, blocks = 0, heads = 0, page = 0, row_len = 0;
};

// m <= kMaxVectors vectors per batch of `a` ([B * heads, m, k], row-major) times the paged
// rows, bit for bit ViewMatmul on the gathered [B, heads, blocks * page, row_len] rows:
//   keys (values false):  c [B * heads, m, blocks * page], k = row_len (a row per position);
//   values (values true): c [B * heads, m, row_len], k = blocks * page (the positions summed in
//                         order).
void PagedMatmul(const MatrixView& a, int64_t m, const PagedRows& rows, int64_t batch, bool values,
                 float* c, EvalContext& ctx);

// Whether the AVX-512 kernels are used on this CPU.
bool MatmulUsesAvx512();

// Products through oneDNN (reduction_matmul_dnnl.cc): bf16 x bf16 where the CPU has bf16
// arithmetic, f32 x f32 where OpenBLAS loaded kernels older than the CPU (or
// TLALOC_F32_MATMUL=dnnl). Returns false, having
// written nothing of use, when neither applies (or TLALOC_BF16_MATMUL=blas, or a oneDNN error);
// the caller then takes the BLAS path.
bool DnnlBf16Available();
bool DnnlF32Available();
bool DnnlMatmul(const MatrixView& a, const MatrixView& b, int64_t batch, int64_t m, int64_t k,
                int64_t n, float* c, EvalContext& ctx);

}  // namespace tlaloc::cpu
