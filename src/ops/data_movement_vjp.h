// Gradient rules of the data-movement ops (data_movement_vjp.cc), written with the typed op
// helpers (tlaloc/ir/typed_builder.h) so a gradient is an ordinary program. Every rule is the
// transpose of a linear map: a copy moves the cotangent back (reshape, transpose, reverse), a
// selection pads or scatters it back into zeros (slice, dynamic_slice, gather), and a
// replication sums it (broadcast_in_dim).
#pragma once

#include "tlaloc/ir/op_registry.h"

namespace tlaloc::ops {

StatusOr<std::vector<Value>> BroadcastInDimVjp(OpBuilder& b, const Operation& op,
                                               const std::vector<Value>& x,
                                               const std::vector<Value>& y,
                                               const std::vector<Value>& ct);
StatusOr<std::vector<Value>> ReshapeVjp(OpBuilder& b, const Operation& op,
                                        const std::vector<Value>& x, const std::vector<Value>& y,
                                        const std::vector<Value>& ct);
StatusOr<std::vector<Value>> TransposeVjp(OpBuilder& b, const Operation& op,
                                          const std::vector<Value>& x, const std::vector<Value>& y,
                                          const std::vector<Value>& ct);
StatusOr<std::vector<Value>> ReverseVjp(OpBuilder& b, const Operation& op,
                                        const std::vector<Value>& x, const std::vector<Value>& y,
                                        const std::vector<Value>& ct);
StatusOr<std::vector<Value>> SliceVjp(OpBuilder& b, const Operation& op,
                                      const std::vector<Value>& x, const std::vector<Value>& y,
                                      const std::vector<Value>& ct);
StatusOr<std::vector<Value>> ConcatenateVjp(OpBuilder& b, const Operation& op,
                                            const std::vector<Value>& x,
                                            const std::vector<Value>& y,
                                            const std::vector<Value>& ct);
StatusOr<std::vector<Value>> PadVjp(OpBuilder& b, const Operation& op, const std::vector<Value>& x,
                                    const std::vector<Value>& y, const std::vector<Value>& ct);
StatusOr<std::vector<Value>> DynamicSliceVjp(OpBuilder& b, const Operation& op,
                                             const std::vector<Value>& x,
                                             const std::vector<Value>& y,
                                             const std::vector<Value>& ct);
StatusOr<std::vector<Value>> DynamicUpdateSliceVjp(OpBuilder& b, const Operation& op,
                                                   const std::vector<Value>& x,
                                                   const std::vector<Value>& y,
                                                   const std::vector<Value>& ct);
StatusOr<std::vector<Value>> GatherVjp(OpBuilder& b, const Operation& op,
                                       const std::vector<Value>& x, const std::vector<Value>& y,
                                       const std::vector<Value>& ct);

// Scatter with an add or (unique_indices) replace update computation over one input; other
// update computations fail with Unimplemented.
StatusOr<std::vector<Value>> ScatterVjp(OpBuilder& b, const Operation& op,
                                        const std::vector<Value>& x, const std::vector<Value>& y,
                                        const std::vector<Value>& ct);

}  // namespace tlaloc::ops
