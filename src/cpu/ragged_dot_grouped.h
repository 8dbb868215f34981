// Grouped products for chlo.ragged_dot's grouped-rows form (reduction_ragged_dot.cc): every
// group's product in one pass over the pool, a task per (group, block of output columns) run on
// one thread, instead of one product per group each split over the pool. A mixture of experts
// in prefill has many groups of a few dozen rows (512 tokens x top 8 over 128 experts: about 32
// rows each); split inside, each such product paid a pool round trip and oneDNN's repacking of
// the expert's weights, and the threads waited on the slowest block of every expert.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/op_registry.h"

namespace tlaloc::cpu {

// Runs fn(task) for every task in [0, tasks) over the pool, handed out one at a time so that a
// thread the OS slows down takes fewer (groups differ in size, and the machine is shared).
template <typename Fn>
void ForEachTask(EvalContext& ctx, int64_t tasks, const Fn& fn) {
  std::atomic<int64_t> next{0};
  ctx.ParallelFor(tasks, 1, [&](int64_t, int64_t) {
    for (int64_t t = next.fetch_add(1); t < tasks; t = next.fetch_add(1)) fn(t);
  });
}

// Rows [start, start + rows) of lhs belong to group `group`.
struct RowGroup {
  int64_t group = 0, start = 0, rows = 0;
};

// c [M, N] (f32, row-major) gets, for each listed group, lhs rows [M, K] times rhs[group]:
// rhs is [G, K, N] (rhs_contract 1) or [G, N, K] (rhs_contract 2). Returns false, writing
// nothing, where no grouped kernel takes these types: the caller then runs each group through
// ViewMatmul. Taken:
//   - lhs and rhs [G, N, K] both bf16 (on a CPU with AVX512_BF16), or both f32 (AVX-512), in
//     groups of every size: tile kernels that stream each weight row once for four rows of lhs
//     at a time, f32 accumulation in 16 lanes summed at the end (bf16: vdpbf16ps, the
//     instruction oneDNN's bf16 products use: subnormal inputs and sums flush to zero);
//   - other f32 groups with OpenBLAS's kernels fitting the CPU: one single-thread sgemm per
//     (group, 256 columns), the call BlasMatmulViews makes for a block.
// TLALOC_RAGGED_DOT in the environment picks another path for measuring (ragged_dot_grouped.cc:
// "large", "sgemm", "per_group").
bool GroupedRowsProduct(const Literal& lhs, const Literal& rhs, int64_t rhs_contract,
                        const std::vector<RowGroup>& groups, float* c, EvalContext& ctx);

// Whether GroupedRowsProduct also wants groups of kMaxVectors rows or fewer (decode's): true
// where a tile kernel takes the operands, whose one pass over the pool for all groups beats a
// matrix-vector product per group (each a pool round trip).
bool GroupedTakesSmallGroups(const Literal& lhs, const Literal& rhs, int64_t rhs_contract);

// The kernel chlo.ragged_dot runs one f32 group of `rows` rows on against f32 weights stored
// [G, N, K] (the MoE experts' layout), on this CPU and with this TLALOC_RAGGED_DOT: the f32 tile
// kernel, one sgemm per (group, 256 columns), the matrix-vector kernel (ViewMatmul of up to
// kMaxVectors rows) or ViewMatmul's larger products. Kernels that compute the same product on
// weights they first widen to f32 (int8 experts, ragged_dot_int8.cc) follow it, so that they
// return the unfused program's bits.
enum class F32ExpertKernel { kTiles, kSgemm, kMatrixVector, kViewMatmul };
F32ExpertKernel F32ExpertKernelFor(int64_t rows);

// The bf16 kernel on its own: c [rows, n] (row stride ldc) = a [rows, k] (row stride lda) times
// w [n, k]^T (row stride ldw). Single-threaded; false where the CPU lacks AVX512_BF16.
// Exposed for the tests and micro-benchmarks.
bool Bf16RowsTimesRowsT(const uint16_t* a, int64_t lda, int64_t rows, const uint16_t* w,
                        int64_t ldw, int64_t n, int64_t k, float* c, int64_t ldc);

// The f32 tile kernel on its own, the same contract: false where the CPU lacks AVX-512.
bool F32RowsTimesRowsT(const float* a, int64_t lda, int64_t rows, const float* w, int64_t ldw,
                       int64_t n, int64_t k, float* c, int64_t ldc);

// The f32 tile kernel on int8 weights, dequantised in registers: w [n, k] s8 (row stride k)
// with f16 block scales [n, k / 32], k a multiple of 32. Bit for bit F32RowsTimesRowsT on the
// dequantised rows (each value times its block's scale, exact in f32), reading only the s8
// rows: int8 experts' decode groups (ragged_dot_int8.cc). False where the CPU lacks AVX-512 or
// k is not a multiple of 32.
bool Int8RowsTimesRowsT(const float* a, int64_t lda, int64_t rows, const int8_t* w,
                        const uint16_t* scales, int64_t n, int64_t k, float* c, int64_t ldc);

}  // namespace tlaloc::cpu
