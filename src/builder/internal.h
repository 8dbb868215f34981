// Helpers shared by the builder's source files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/ir/typed_builder.h"

namespace tlaloc::builder_internal {

// The builder of the first valid tensor (all tensors of one expression share it).
OpBuilder* BuilderOf(std::initializer_list<const Tensor*> ts);
Tensor Wrap(OpBuilder* b, Value v);
// Normalises a possibly negative axis against `rank`; records an error on `b` when out of range.
int64_t NormalizeAxis(OpBuilder* b, int64_t axis, int64_t rank);
Attribute I64Array(std::vector<int64_t> v);
Attribute I64(int64_t v);
// numpy broadcast of two shapes, or an error on b.
std::vector<int64_t> BroadcastShapes(OpBuilder* b, const std::vector<int64_t>& x,
                                     const std::vector<int64_t>& y);
// Generic reduce of x over axes with init value and a scalar binary body op.
Tensor ReduceWith(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims,
                  hlo::BinaryFn body, double init);

}  // namespace tlaloc::builder_internal
