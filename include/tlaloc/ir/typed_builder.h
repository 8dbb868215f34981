// Typed helpers over OpBuilder: one function per op that the gradient rules (src/ops/) and the
// Tensor API (builder/) emit, with attributes as C++ values (dimension lists, structs, enums)
// instead of op-name strings and attribute dictionaries. Each op name and attribute spelling
// lives here once. Errors stay sticky on the OpBuilder, as with OpBuilder::CreateOne: a helper
// given an invalid value returns an invalid value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tlaloc/ir/builder.h"

namespace tlaloc::hlo {

using Dims = std::vector<int64_t>;

// ---- Elementwise ----------------------------------------------------------------------------

Value Add(OpBuilder& b, Value x, Value y);
Value Sub(OpBuilder& b, Value x, Value y);
Value Mul(OpBuilder& b, Value x, Value y);
Value Div(OpBuilder& b, Value x, Value y);
Value Pow(OpBuilder& b, Value x, Value y);
Value Max(OpBuilder& b, Value x, Value y);
Value Min(OpBuilder& b, Value x, Value y);
Value Rem(OpBuilder& b, Value x, Value y);
Value Atan2(OpBuilder& b, Value x, Value y);
Value And(OpBuilder& b, Value x, Value y);
Value Or(OpBuilder& b, Value x, Value y);
Value Xor(OpBuilder& b, Value x, Value y);
Value ShiftLeft(OpBuilder& b, Value x, Value y);
Value ShiftRightLogical(OpBuilder& b, Value x, Value y);
Value ShiftRightArithmetic(OpBuilder& b, Value x, Value y);

Value Neg(OpBuilder& b, Value x);
Value Abs(OpBuilder& b, Value x);
Value Sign(OpBuilder& b, Value x);
Value Floor(OpBuilder& b, Value x);
Value Exp(OpBuilder& b, Value x);
Value Log(OpBuilder& b, Value x);
Value Sqrt(OpBuilder& b, Value x);
Value Rsqrt(OpBuilder& b, Value x);
Value Tanh(OpBuilder& b, Value x);
Value Logistic(OpBuilder& b, Value x);
Value Not(OpBuilder& b, Value x);
Value Sin(OpBuilder& b, Value x);
Value Cos(OpBuilder& b, Value x);
Value Erf(OpBuilder& b, Value x);                 // chlo.erf
Value ErfInv(OpBuilder& b, Value x);              // chlo.erf_inv
Value Sinh(OpBuilder& b, Value x);                // chlo.sinh
Value Cosh(OpBuilder& b, Value x);                // chlo.cosh
Value Digamma(OpBuilder& b, Value x);             // chlo.digamma
Value Polygamma(OpBuilder& b, Value n, Value x);  // chlo.polygamma

enum class CompareDirection { kEq, kNe, kLt, kLe, kGt, kGe };
// compare with the comparison type of the operands' element type (FLOAT, SIGNED or UNSIGNED).
Value Compare(OpBuilder& b, Value x, Value y, CompareDirection direction);
Value Select(OpBuilder& b, Value pred, Value on_true, Value on_false);
Value Clamp(OpBuilder& b, Value lo, Value x, Value hi);
// convert to `to` (the operand's shape).
Value Convert(OpBuilder& b, Value x, ElementType to);
// bitcast_convert to `to`, an element type of the same width.
Value BitcastConvert(OpBuilder& b, Value x, ElementType to);

// ---- Constants ------------------------------------------------------------------------------

Value Constant(OpBuilder& b, Literal value);
// A constant of `type` holding `value` in every element (stored in full).
Value Splat(OpBuilder& b, const TensorType& type, double value);
Value SplatLike(OpBuilder& b, Value like, double value);
// Zeros of `type` as a scalar constant broadcast, so no large constant is stored.
Value Zeros(OpBuilder& b, const TensorType& type);
Value ZerosLike(OpBuilder& b, Value like);
Value Iota(OpBuilder& b, const TensorType& type, int64_t dimension);

// ---- Shapes ---------------------------------------------------------------------------------

// broadcast_in_dim of x to `to`: operand dimension i becomes result dimension dims[i].
Value BroadcastInDim(OpBuilder& b, Value x, const TensorType& to, const Dims& dims);
// reshape to `to`; x itself when it already has that type.
Value Reshape(OpBuilder& b, Value x, const TensorType& to);
Value Transpose(OpBuilder& b, Value x, const Dims& permutation);
Value Reverse(OpBuilder& b, Value x, const Dims& dims);
Value Concatenate(OpBuilder& b, std::vector<Value> xs, int64_t dimension);
Value Slice(OpBuilder& b, Value x, const Dims& start, const Dims& limit, const Dims& strides);
Value Pad(OpBuilder& b, Value x, Value padding, const Dims& low, const Dims& high,
          const Dims& interior);
Value DynamicSlice(OpBuilder& b, Value x, const std::vector<Value>& starts, const Dims& sizes);
Value DynamicUpdateSlice(OpBuilder& b, Value x, Value update, const std::vector<Value>& starts);

// ---- Reductions and regions -----------------------------------------------------------------

// stablehlo.return, the terminator of reduce, scatter and sort bodies.
void Return(OpBuilder& b, std::vector<Value> values);

using BinaryFn = Value (*)(OpBuilder& b, Value x, Value y);
// A region of one block (x: tensor<et>, y: tensor<et>) returning fn(x, y), for reduce, scatter
// and sort bodies.
std::unique_ptr<Region> ScalarBinaryRegion(ElementType et, BinaryFn fn);
// reduce of x over `dims` from `init`, combining with `fn`.
Value Reduce(OpBuilder& b, Value x, Value init, const Dims& dims, BinaryFn fn);
// Sum of x over `dims` (the other dims kept in order); x itself when dims is empty.
Value SumOver(OpBuilder& b, Value x, const Dims& dims);

// sort along `dimension` with `comparator` (a region over pairs of scalars); all results.
std::vector<Value> Sort(OpBuilder& b, std::vector<Value> operands, int64_t dimension,
                        bool is_stable, std::unique_ptr<Region> comparator);

// ---- Contractions and indexing --------------------------------------------------------------

struct DotDimensionNumbers {
  Dims lhs_batch, rhs_batch, lhs_contracting, rhs_contracting;
};
// The #stablehlo.dot<...> attribute of `d`.
Attribute DotDimensionsAttr(const DotDimensionNumbers& d);
// dot_general; `result` when the result type is given rather than inferred.
Value DotGeneral(OpBuilder& b, Value lhs, Value rhs, const DotDimensionNumbers& d,
                 std::optional<TensorType> result = std::nullopt);

// chlo.ragged_dot's dimension numbers (#chlo.ragged_dot<...>). Tlaloc's interpreter takes the
// two forms a mixture of experts needs: lhs [M, K] with rows grouped along dimension 0 against
// rhs [G, K, N] or [G, N, K] (group dimension 0) giving [M, N], and the ragged contracting form
// lhs [M, K] x rhs [M, N] -> [G, K, N] (each group's lhs^T . rhs, the weight gradient).
struct RaggedDotDimensionNumbers {
  Dims lhs_batch, rhs_batch, lhs_contracting, rhs_contracting, lhs_ragged, rhs_group;
};
Attribute RaggedDotDimensionsAttr(const RaggedDotDimensionNumbers& d);
// chlo.ragged_dot(lhs, rhs, group_sizes); `result` when the result type is given.
Value RaggedDot(OpBuilder& b, Value lhs, Value rhs, Value group_sizes,
                const RaggedDotDimensionNumbers& d,
                std::optional<TensorType> result = std::nullopt);

struct GatherDimensionNumbers {
  Dims offset_dims, collapsed_slice_dims, operand_batching_dims, start_indices_batching_dims,
      start_index_map;
  int64_t index_vector_dim = 0;
};
Value Gather(OpBuilder& b, Value operand, Value indices, const GatherDimensionNumbers& d,
             const Dims& slice_sizes);

struct ScatterDimensionNumbers {
  Dims update_window_dims, inserted_window_dims, input_batching_dims, scatter_indices_batching_dims,
      scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
};
// The #stablehlo.scatter<...> attribute of `d`.
Attribute ScatterDimensionsAttr(const ScatterDimensionNumbers& d);
// scatter of `updates` into `operand`, combining with `update` (a scalar binary region).
Value Scatter(OpBuilder& b, Value operand, Value indices, Value updates,
              const ScatterDimensionNumbers& d, std::unique_ptr<Region> update);

}  // namespace tlaloc::hlo
