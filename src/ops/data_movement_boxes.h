// The box copies that the hot data-movement ops are (slice, transpose, broadcast_in_dim,
// concatenate, dynamic_slice, dynamic_update_slice), worked out from an op's attributes and its
// operands' and result's types. The registry's evaluations (data_movement.cc) work them out on
// every call; the interpreter works them out once per op when it plans a block
// (interp/prepared_ops.cc) and runs them with no attribute lookups and no allocation. One
// function per op serves both, so the two cannot mean different things.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "data_movement_kernels.h"

namespace tlaloc::ops {

// slice: the operand's strided box at start_indices.
BoxCopy SliceBox(const Operation& op, const TensorType& in, const TensorType& out);
// transpose: the operand read through the permutation.
BoxCopy TransposeBox(const Operation& op, const TensorType& in, const TensorType& out);
// broadcast_in_dim: the operand read with stride 0 along the broadcast dimensions; nullopt when
// the result is the operand (same dims, identity mapping), whose bytes the result then shares.
std::optional<BoxCopy> BroadcastBox(const Operation& op, const TensorType& in,
                                    const TensorType& out);
// concatenate: one copy per operand, each placed at its offset along the dimension.
std::vector<BoxCopy> ConcatenateBoxes(const Operation& op, std::span<const TensorType* const> ins,
                                      const TensorType& out);

// dynamic_slice (`box` of the result's dims, read from the operand) and dynamic_update_slice
// (the update's dims, written into the operand): a fixed copy whose start in the operand comes
// from the scalar index operands, clamped so the box stays inside (as the specification says).
struct DynamicBox {
  BoxCopy copy;                          // the box at start 0
  std::vector<int64_t> max_start;        // per dimension: operand dim - box dim
  std::vector<int64_t> operand_strides;  // row-major, in elements
  // The box's offset in the operand, from index operands first, first + 1, ...
  int64_t Offset(std::span<const Literal> operands, size_t first) const;
};
DynamicBox DynamicSliceBox(const TensorType& in, const TensorType& out);
DynamicBox DynamicUpdateBox(const TensorType& in, const TensorType& update);
// A dense copy of a whole tensor of `type` (dynamic_update_slice's operand, when it cannot be
// updated in place).
BoxCopy WholeCopy(const TensorType& type);

}  // namespace tlaloc::ops
