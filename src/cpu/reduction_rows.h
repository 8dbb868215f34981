// Folds of contiguous f32 rows (reduction_rows.cc): the reduce op's fast path in the CPU layer
// (cpu/kernel_table.cc) and the row folds of the interpreter's fused kernels, bit for bit the
// sequential fold ApplyBinary(...ApplyBinary(init, x0)..., x[n-1]) that ops/reduction.cc's
// reference evaluation computes.
#pragma once

#include <cstdint>

#include "ops/reduction_kernels.h"

namespace tlaloc::cpu {

// out[r] = the fold of init and row r of `in` ([rows, n] row-major f32) with `kind`.
// Returns false, writing nothing, for kinds other than add, multiply, max and min.
bool ReduceContiguousRowsF32(ops::BinaryKind kind, const float* in, float init, float* out,
                             int64_t rows, int64_t n, EvalContext& ctx);
// One row's fold with the same bits (for fused kernels that reduce a row they hold in cache);
// `kind` one of those four.
float FoldRowF32(ops::BinaryKind kind, const float* x, int64_t n, float init);

}  // namespace tlaloc::cpu
