// The builder API models are written in: Tensor handles with operators and numpy-style free
// functions. Everything here emits ordinary StableHLO-shaped ops through OpBuilder; no
// convenience is a new IR op. Errors are sticky in the FunctionBuilder (see OpBuilder).
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tlaloc/ir/builder.h"
#include "tlaloc/ir/ir.h"

namespace tlaloc {

class FunctionBuilder;

class Tensor {
 public:
  Tensor() = default;
  Tensor(Value v, OpBuilder* b) : value_(v), b_(b) {}

  Value value() const { return value_; }
  OpBuilder* builder() const { return b_; }
  bool valid() const { return static_cast<bool>(value_); }
  // Type queries; an invalid tensor (after an error) reports a scalar f32.
  const TensorType& type() const;
  ElementType element_type() const { return type().element_type; }
  const std::vector<int64_t>& dims() const { return type().dims; }
  int64_t rank() const { return type().rank(); }
  int64_t dim(int64_t axis) const;  // negative axes count from the end

 private:
  Value value_;
  OpBuilder* b_ = nullptr;
};

// Builds one function of a module: arguments, body, return.
class FunctionBuilder {
 public:
  FunctionBuilder(Module* module, std::string name, const std::vector<Type>& arg_types = {});
  Function* function() const { return fn_; }
  OpBuilder& ops() { return b_; }
  Tensor arg(int i);
  // Appends a parameter (function argument) of the given type.
  Tensor AddArg(const TensorType& type);
  // Ends the function with `return values`, setting its result types; returns the sticky status.
  Status Return(const std::vector<Tensor>& values);
  const Status& status() const { return b_.status(); }

 private:
  Function* fn_;
  OpBuilder b_;
};

// ---- Creation ----
Tensor Constant(OpBuilder& b, Literal value);
Tensor Scalar(OpBuilder& b, double value, ElementType et = ElementType::kF32);
Tensor Full(OpBuilder& b, const std::vector<int64_t>& dims, double value,
            ElementType et = ElementType::kF32);
Tensor Zeros(OpBuilder& b, const std::vector<int64_t>& dims, ElementType et = ElementType::kF32);
Tensor Iota(OpBuilder& b, const std::vector<int64_t>& dims, int64_t axis,
            ElementType et = ElementType::kS32);
// A scalar constant of x's element type, broadcast to x's shape.
Tensor FullLike(const Tensor& x, double value);

// ---- Elementwise (binary ops broadcast numpy-style) ----
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(double s, const Tensor& a);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);

Tensor Max(const Tensor& a, const Tensor& b);
Tensor Min(const Tensor& a, const Tensor& b);
Tensor Pow(const Tensor& a, const Tensor& b);
Tensor Rem(const Tensor& a, const Tensor& b);
Tensor Atan2(const Tensor& a, const Tensor& b);
Tensor ShiftLeft(const Tensor& a, const Tensor& b);
Tensor ShiftRightLogical(const Tensor& a, const Tensor& b);
Tensor ShiftRightArithmetic(const Tensor& a, const Tensor& b);
// Comparisons return pred tensors; the comparison type follows the element type.
Tensor Eq(const Tensor& a, const Tensor& b);
Tensor Ne(const Tensor& a, const Tensor& b);
Tensor Lt(const Tensor& a, const Tensor& b);
Tensor Le(const Tensor& a, const Tensor& b);
Tensor Gt(const Tensor& a, const Tensor& b);
Tensor Ge(const Tensor& a, const Tensor& b);

Tensor Exp(const Tensor& x);
Tensor Log(const Tensor& x);
Tensor Sqrt(const Tensor& x);
Tensor Rsqrt(const Tensor& x);
Tensor Tanh(const Tensor& x);
Tensor Logistic(const Tensor& x);  // sigmoid
Tensor Abs(const Tensor& x);
Tensor Sign(const Tensor& x);
Tensor Floor(const Tensor& x);
Tensor Sin(const Tensor& x);
Tensor Cos(const Tensor& x);
Tensor Not(const Tensor& x);
Tensor ErfInv(const Tensor& x);  // chlo.erf_inv
Tensor Erf(const Tensor& x);     // chlo.erf
Tensor Convert(const Tensor& x, ElementType et);
Tensor BitcastConvert(const Tensor& x, ElementType et);
// where(cond, a, b): select with numpy-style broadcasting of all three.
Tensor Where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor Clamp(const Tensor& lo, const Tensor& x, const Tensor& hi);

// ---- Shapes ----
Tensor Reshape(const Tensor& x, const std::vector<int64_t>& dims);  // one -1 allowed
Tensor Transpose(const Tensor& x, const std::vector<int64_t>& perm);
Tensor BroadcastTo(const Tensor& x, const std::vector<int64_t>& dims);  // numpy rules
Tensor BroadcastInDim(const Tensor& x, const std::vector<int64_t>& dims,
                      const std::vector<int64_t>& broadcast_dimensions);
Tensor ExpandDims(const Tensor& x, int64_t axis);
Tensor Squeeze(const Tensor& x, int64_t axis);
Tensor Slice(const Tensor& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
             const std::vector<int64_t>& strides = {});
// x[..., begin:end, ...] along one axis.
Tensor SliceAxis(const Tensor& x, int64_t axis, int64_t begin, int64_t end);
Tensor DynamicSlice(const Tensor& x, const std::vector<Tensor>& starts,
                    const std::vector<int64_t>& sizes);
Tensor DynamicUpdateSlice(const Tensor& x, const Tensor& update, const std::vector<Tensor>& starts);
Tensor Concat(const std::vector<Tensor>& xs, int64_t axis);
Tensor Pad(const Tensor& x, const Tensor& value, const std::vector<int64_t>& low,
           const std::vector<int64_t>& high, const std::vector<int64_t>& interior = {});
Tensor Reverse(const Tensor& x, const std::vector<int64_t>& axes);

// ---- Reductions ----
Tensor Sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims = false);
Tensor ReduceMax(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims = false);
Tensor ReduceMin(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims = false);
Tensor Mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims = false);
// Population variance (ddof 0).
Tensor Var(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims = false);
Tensor LogSumExp(const Tensor& x, int64_t axis, bool keepdims = false);
// Index of the first maximum along `axis` (NaN counts as the maximum), as s32.
Tensor Argmax(const Tensor& x, int64_t axis, ElementType index_type = ElementType::kS32);
// Inclusive prefix sum along `axis` (reduce_window).
Tensor Cumsum(const Tensor& x, int64_t axis);

// ---- Contractions ----
// einsum-style dot_general: lhs/rhs batch and contracting dims; result dims are batch, lhs
// free, rhs free (StableHLO's order).
Tensor DotGeneral(const Tensor& lhs, const Tensor& rhs, const std::vector<int64_t>& lhs_batch,
                  const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                  const std::vector<int64_t>& rhs_contract,
                  ElementType result_type = ElementType::kF32, bool same_as_lhs = true);
// chlo.ragged_dot: the rows of x [M, K], grouped consecutively by group_sizes (integer [G]),
// each times its group's matrix of w: [G, K, N] (w_contract 1) or [G, N, K] (w_contract 2)
// -> [M, N] of result_type (f32 accumulation); rows past the last group are zero.
Tensor RaggedDot(const Tensor& x, const Tensor& w, const Tensor& group_sizes, int64_t w_contract,
                 ElementType result_type);
// numpy matmul: [..., m, k] x [..., k, n] -> [..., m, n] with batch broadcasting; 1-D operands
// are promoted as numpy does.
Tensor Matmul(const Tensor& a, const Tensor& b);
// einsum over single-letter subscripts, e.g. "bhqd,bhkd->bhqk"; each letter appears at most
// once per operand; letters missing from the output are summed.
Tensor Einsum(const std::string& spec, const Tensor& a, const Tensor& b);

// ---- Neural-network conveniences ----
Tensor Softmax(const Tensor& x, int64_t axis = -1);
Tensor LogSoftmax(const Tensor& x, int64_t axis = -1);
// x * rsqrt(mean(x^2) + eps) * weight, computed in f32 and cast back before the weight multiply.
Tensor RmsNorm(const Tensor& x, const Tensor& weight, double eps);
Tensor Silu(const Tensor& x);
Tensor Gelu(const Tensor& x, bool tanh_approximation = true);
Tensor OneHot(const Tensor& indices, int64_t depth, ElementType et = ElementType::kF32);
// table[indices] along axis 0 (embedding lookup): result dims = indices dims + table dims[1:].
Tensor Take(const Tensor& table, const Tensor& indices);
// The same rows with their dims (table dims[1:]) at result positions `row_dims` (ascending) and
// the indices' dims at the others, in order: the gather writes that layout directly, where a
// Take followed by a transpose would copy the rows twice.
Tensor Take(const Tensor& table, const Tensor& indices, const std::vector<int64_t>& row_dims);
// Top k values and indices along the last axis (descending; ties keep the lower index).
std::pair<Tensor, Tensor> TopK(const Tensor& x, int64_t k);

// ---- Control flow ----
// stablehlo.if on a pred[] scalar: runs one of two branches at run time. Each branch is builder
// code returning tensors of the same types; it may use any tensor built before the call.
std::vector<Tensor> Cond(const Tensor& pred, const std::function<std::vector<Tensor>()>& then_fn,
                         const std::function<std::vector<Tensor>()>& else_fn);

}  // namespace tlaloc
