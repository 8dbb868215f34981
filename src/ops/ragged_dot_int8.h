// chlo.ragged_dot's grouped-rows form on int8 weights (io::WeightQuantization), as the
// interpreter runs nn::SparseMoe's int8 expert products (interp/fusion_int8.cc): each group's
// rows of f32 x times its expert's s8 matrix with f16 block scales, read in place.
#pragma once

#include <cstdint>

#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/op_registry.h"
#include "tlaloc/support/status.h"

namespace tlaloc::ops {

// c [M, N] (f32) = for each group g of `group_sizes` (s32 or s64 [G], consecutive rows of x in
// group order, clipped to M as chlo.ragged_dot clips them): x rows [M, K] (f32) times w[g]
// (s8 [G, N, K]) dequantised with scales[g] (f16 [G, N, K / 32]) transposed; rows past the last
// group are zero. Groups of up to four rows (decode) are ops::Int8Matmul each: their expert's s8
// rows are streamed once with the dense int8 matrix-vector kernel. Larger groups (prefill) run
// in one pass over the pool, a task per (group, block of 256 weight rows) dequantising that
// block and multiplying with one single-thread sgemm, the f32 grouped kernel's call
// (ragged_dot_grouped.h) for the same block; where that kernel would not run (OpenBLAS's kernel
// set does not fit the CPU, TLALOC_RAGGED_DOT=per_group) they are ops::Int8Matmul each too. In
// the q8_0 activation mode (reduction_matmul_q8.h) groups of more than two rows run in one pass
// too (Int8MatmulQ8_0Groups: the tile kernel's products, each row quantised once), the rest
// are Int8MatmulQ8_0 each (TLALOC_RAGGED_DOT=per_group: every group). Each used
// expert is read once per call, an unused one never; in the exact mode the results are the
// unfused chain's bits (chlo.ragged_dot on the dequantised f32 stack). Errors name a negative group
// size.
Status RaggedDotInt8(const Literal& x, const Literal& w, const Literal& scales,
                     const Literal& group_sizes, Literal& c, EvalContext& ctx);

}  // namespace tlaloc::ops
