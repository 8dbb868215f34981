// Grouped products for chlo.ragged_dot's grouped-rows form (reduction_ragged_dot.cc): every
// group's product in one pass over the pool, a task per (group, block of output columns) run on
// one thread, instead of one product per group each split over the pool. A mixture of experts
// in prefill has many groups of a few dozen rows (512 tokens x top 8 over 128 experts: about 32
// rows each); split inside, each such product paid a pool round trip and oneDNN's repacking of
// the expert's weights, and the threads waited on the slowest block of every expert.
#pragma once

#include <cstdint>
#include <vector>

#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/op_registry.h"

namespace tlaloc::ops {

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

// The bf16 kernel on its own: c [rows, n] (row stride ldc) = a [rows, k] (row stride lda) times
// w [n, k]^T (row stride ldw). Single-threaded; false where the CPU lacks AVX512_BF16.
// Exposed for the tests and micro-benchmarks.
bool Bf16RowsTimesRowsT(const uint16_t* a, int64_t lda, int64_t rows, const uint16_t* w,
                        int64_t ldw, int64_t n, int64_t k, float* c, int64_t ldc);

// The f32 tile kernel on its own, the same contract: false where the CPU lacks AVX-512.
bool F32RowsTimesRowsT(const float* a, int64_t lda, int64_t rows, const float* w, int64_t ldw,
                       int64_t n, int64_t k, float* c, int64_t ldc);

}  // namespace tlaloc::ops
