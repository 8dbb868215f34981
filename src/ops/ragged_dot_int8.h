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
// group are zero. Each group is ops::Int8Matmul (or Int8MatmulQ8_0 in the q8_0 activation
// mode, reduction_matmul_q8.h): groups of up to four rows (decode) stream their expert's s8
// rows once with the dense int8 matrix-vector kernel, so each used expert is read once per
// call and an unused one never. Errors name a negative group size.
Status RaggedDotInt8(const Literal& x, const Literal& w, const Literal& scales,
                     const Literal& group_sizes, Literal& c, EvalContext& ctx);

}  // namespace tlaloc::ops
