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
//   - bf16 lhs and bf16 rhs [G, N, K] on a CPU with AVX512_BF16: a kernel that streams each
//     weight row once for four rows of lhs at a time (vdpbf16ps, f32 accumulation, the same
//     instruction oneDNN's bf16 products use: subnormal inputs and sums flush to zero);
//   - f32 lhs and f32 rhs with OpenBLAS's kernels fitting the CPU: one single-thread sgemm per
//     (group, 256 columns), the call BlasMatmulViews makes for a block.
// TLALOC_RAGGED_DOT=per_group in the environment turns both off (for measuring against).
bool GroupedRowsProduct(const Literal& lhs, const Literal& rhs, int64_t rhs_contract,
                        const std::vector<RowGroup>& groups, float* c, EvalContext& ctx);

// The bf16 kernel on its own: c [rows, n] (row stride ldc) = a [rows, k] (row stride lda) times
// w [n, k]^T (row stride ldw). Single-threaded; false where the CPU lacks AVX512_BF16.
// Exposed for the tests and micro-benchmarks.
bool Bf16RowsTimesRowsT(const uint16_t* a, int64_t lda, int64_t rows, const uint16_t* w,
                        int64_t ldw, int64_t n, int64_t k, float* c, int64_t ldc);

}  // namespace tlaloc::ops
