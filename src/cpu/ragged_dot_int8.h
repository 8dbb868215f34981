// chlo.ragged_dot's grouped-rows form on int8 weights (io::WeightQuantization), as the
// interpreter runs nn::SparseMoe's int8 expert products (the composite
// tlaloc.ragged_int8_linear, interp/fusion_int8.cc): each group's rows of f32 x times its
// expert's s8 matrix with f16 block scales.
#pragma once

#include <cstdint>

#include "reduction_matmul_q8.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/op_registry.h"
#include "tlaloc/support/status.h"

namespace tlaloc::cpu {

// c [M, N] (f32) = for each group g of `group_sizes` (s32 or s64 [G], consecutive rows of x in
// group order, clipped to M as chlo.ragged_dot clips them): x rows [M, K] (f32) times w[g]
// (s8 [G, N, K]) dequantised with scales[g] (f16 [G, N, K / 32]) transposed; rows past the last
// group are zero. The composite tlaloc.ragged_int8_linear's two modes (nn/int8_linear.h), each
// with its decomposition's bits:
// - kExact: each group takes the kernel chlo.ragged_dot would give it on the dequantised f32
//   stack (ragged_dot_grouped.h, F32ExpertKernelFor): by default the f32 tile kernel for every
//   group, in one pass over the pool, a task per (group, block of 96 weight rows) dequantising
//   24 rows at a time into a buffer that stays in L2; with sgemm's groups
//   (TLALOC_RAGGED_DOT=sgemm), a task per (group, block of 256 rows) and one single-thread
//   sgemm; the matrix-vector kernel's groups through cpu::Int8Matmul, which streams the expert's
//   s8 rows over all threads with the same sums.
// - kQ8_0 (reduction_matmul_q8.h): the in-order VNNI q8_0 sums. Where N is a multiple of 32
//   every group runs in one pass over the pool on the stack packed once and kept
//   (reduction_matmul_q8_packed.h, CachedQ8Weights), each row quantised once; otherwise (or
//   without a packed copy) groups of more than two rows in one pass by the tile kernel, the
//   rest by the in-order row kernel (TLALOC_RAGGED_DOT=per_group: every group on its own).
// Each used expert is read once per call, an unused one never (the packing reads the whole
// stack once). Errors name a negative group size.
Status RaggedDotInt8(const Literal& x, const Literal& w, const Literal& scales,
                     const Literal& group_sizes, Literal& c, EvalContext& ctx,
                     Int8Activations mode);

}  // namespace tlaloc::cpu
