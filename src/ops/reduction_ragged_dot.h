// What chlo.ragged_dot means, in the pieces its reference evaluation (reduction_ragged_dot.cc)
// and the CPU layer's kernel (cpu/dot_kernels.cc) share: the dimension numbers, the two forms
// Tlaloc takes, and each group's rows.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/op_registry.h"
#include "tlaloc/ir/typed_builder.h"

namespace tlaloc::ops {

using RaggedDims = hlo::RaggedDotDimensionNumbers;

enum class RaggedMode { kGroupedRows, kRaggedContraction };

StatusOr<RaggedDims> ReadRaggedDims(const AttrDict& attrs);
// The form of `d` on these operands, or an error naming what Tlaloc takes.
StatusOr<RaggedMode> ClassifyRagged(const RaggedDims& d, const TensorType& lhs,
                                    const TensorType& rhs);
// Each group's first row and row count, clipped to the M rows there are.
StatusOr<std::vector<std::pair<int64_t, int64_t>>> GroupRows(const Literal& sizes, int64_t m);

}  // namespace tlaloc::ops
