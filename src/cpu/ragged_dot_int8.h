// chlo.ragged_dot's grouped-rows form on int8 weights (io::WeightQuantization), as the
// interpreter runs nn::SparseMoe's int8 expert products (interp/fusion_int8.cc): each group's
// rows of f32 x times its expert's s8 matrix with f16 block scales, read in place.
#pragma once

#include <cstdint>

#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/op_registry.h"
#include "tlaloc/support/status.h"

namespace tlaloc::cpu {

// c [M, N] (f32) = for each group g of `group_sizes` (s32 or s64 [G], consecutive rows of x in
// group order, clipped to M as chlo.ragged_dot clips them): x rows [M, K] (f32) times w[g]
// (s8 [G, N, K]) dequantised with scales[g] (f16 [G, N, K / 32]) transposed; rows past the last
// group are zero. In the exact mode each group takes the kernel chlo.ragged_dot would give it on
// the dequantised f32 stack (ragged_dot_grouped.h, F32ExpertKernelFor), so that the results are
// the unfused chain's bits: by default the f32 tile kernel for every group, in one pass over the
// pool, a task per (group, block of 96 weight rows) dequantising 24 rows at a time into a
// buffer that stays in L2; with sgemm's groups (TLALOC_RAGGED_DOT=sgemm), a task per (group,
// block of 256 rows) and one single-thread sgemm; the matrix-vector kernel's groups through
// cpu::Int8Matmul, which streams the expert's s8 rows over all threads with the same sums. In
// the q8_0 activation mode (reduction_matmul_q8.h) groups of more than two rows run in one pass
// too (Int8MatmulQ8_0Groups: the tile kernel's products, each row quantised once), the rest
// are Int8MatmulQ8_0 each (TLALOC_RAGGED_DOT=per_group: every group). Each used
// expert is read once per call, an unused one never. Errors name a negative group size.
Status RaggedDotInt8(const Literal& x, const Literal& w, const Literal& scales,
                     const Literal& group_sizes, Literal& c, EvalContext& ctx);

}  // namespace tlaloc::cpu
