// The cross-entropy's row chains (fusion.h), as train::CrossEntropy emits them over a chunk of
// [rows, vocab] logits x:
//
//   row maximum subtracted:  m = reduce(x, max, last axis) ; (reshape | optimization_barrier)*
//                            b = broadcast_in_dim(m) along the rows ; shifted = x - b
//   sum of exponentials:     e = exponential(shifted) ; s = reduce(e, add, last axis)
//                            (when e has no other user: the forward pass's chunks)
//
// Each runs per row while the row is in cache (a 151,936-wide row is 600 KB): the first reads x
// from memory once instead of twice and never writes b; the second never writes e. The bits are
// the ops': the row's max is the reduce's (ops::FoldRowF32, the reduce's own fast path), the
// subtraction and the exponential kernel are the same per element, and the sum folds each row
// sequentially from the init, as the reduce does. The optimization_barrier that keeps the
// maximum from being differentiated is an identity at run time.
#include <algorithm>
#include <vector>

#include "cpu/reduction_rows.h"
#include "cpu/vector_math.h"
#include "fusion.h"
#include "ops/reduction_kernels.h"

namespace tlaloc::interp {

namespace {

using ops::BinaryKind;

bool IsF32Tensor(Value v) {
  return v.type().is_tensor() && v.tensor_type().element_type == ElementType::kF32;
}

// `op` reduces an f32 tensor of rank >= 1 over its last axis with a body of `kind`.
bool ReducesLastAxis(const Operation& op, BinaryKind kind) {
  if (op.name() != "stablehlo.reduce" || op.num_operands() != 2 || op.num_results() != 1 ||
      op.regions().size() != 1)
    return false;
  Value x = op.operand(0);
  if (!IsF32Tensor(x) || !IsF32Tensor(op.operand(1)) || !IsF32Tensor(op.result(0))) return false;
  const int64_t rank = x.tensor_type().rank();
  if (rank < 1 || op.operand(1).tensor_type().rank() != 0) return false;
  if (GetIntArrayAttr(op.attrs(), "dimensions") != std::vector<int64_t>{rank - 1}) return false;
  auto body = ops::MatchBinaryBody(*op.regions()[0]);
  return body && *body == kind;
}

// Rows of the last axis: [rows, n] of x.
void RowsOf(const Literal& x, int64_t& rows, int64_t& n) {
  n = x.dims().empty() ? 1 : x.dims().back();
  rows = n > 0 ? x.num_elements() / n : 0;
}

const FusedKernel& RowMaxSubtractKernel() {
  static const FusedKernel* kernel = new FusedKernel{
      "fused.row_max_subtract",
      [](std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
        int64_t rows, n;
        RowsOf(in[0], rows, n);
        const float* x = in[0].span<float>().data();
        const float init = in[1].span<float>()[0];
        float* y = out.span<float>().data();
        ctx.ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)),
                        [&](int64_t begin, int64_t end) {
                          for (int64_t r = begin; r < end; ++r) {
                            const float m = ops::FoldRowF32(BinaryKind::kMax, x + r * n, n, init);
                            for (int64_t j = 0; j < n; ++j) y[r * n + j] = x[r * n + j] - m;
                          }
                        });
        return OkStatus();
      }};
  return *kernel;
}

// Columns per block of fused.exp_sum, and the scratch rows' stride: padded past 4 KiB, so the
// R rows read together do not all map to the same L1 set.
constexpr int64_t kBlock = 1024, kStride = kBlock + 16;

// Sums of exponentials of R rows of x, in column blocks that stay in cache: each block's
// exponentials are computed into `e` (R x kBlock), then the R sums fold them in column order, so
// each row's sum is still the sequential fold from the init while the R chains' add latencies
// overlap.
template <int R>
void ExpSumRows(const float* x, int64_t n, float init, float* s, float* e) {
  float acc[R];
  for (int r = 0; r < R; ++r) acc[r] = init;
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    const int64_t w = std::min(kBlock, n - j0);
    for (int r = 0; r < R; ++r) ops::vmath::ExpF32(x + r * n + j0, e + r * kStride, w);
    for (int64_t j = 0; j < w; ++j)
      for (int r = 0; r < R; ++r) acc[r] = acc[r] + e[r * kStride + j];
  }
  for (int r = 0; r < R; ++r) s[r] = acc[r];
}

const FusedKernel& ExpSumKernel() {
  static const FusedKernel* kernel = new FusedKernel{
      "fused.exp_sum", [](std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
        int64_t rows, n;
        RowsOf(in[0], rows, n);
        const float* x = in[0].span<float>().data();
        const float init = in[1].span<float>()[0];
        float* s = out.span<float>().data();
        ctx.ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)),
                        [&](int64_t begin, int64_t end) {
                          std::vector<float> e(8 * kStride);
                          int64_t r = begin;
                          for (; r + 8 <= end; r += 8)
                            ExpSumRows<8>(x + r * n, n, init, s + r, e.data());
                          for (; r < end; ++r) ExpSumRows<1>(x + r * n, n, init, s + r, e.data());
                        });
        return OkStatus();
      }};
  return *kernel;
}

}  // namespace

bool MatchRowMaxSubtract(const Block& block, const BlockUses& uses, int a, std::vector<int>& chain,
                         std::vector<Value>& operands, const FusedKernel*& kernel) {
  const auto& ops = block.operations();
  const Operation& max_op = *ops[a];
  if (!ReducesLastAxis(max_op, BinaryKind::kMax)) return false;
  Value x = max_op.operand(0);
  const TensorType& xt = x.tensor_type();
  const int64_t rank = xt.rank();
  const std::vector<int64_t> kept(xt.dims.begin(), xt.dims.end() - 1);
  std::vector<int64_t> kept_one = kept;
  kept_one.push_back(1);
  chain = {a};
  // Through reshapes between [...] and [..., 1] and identity barriers to the broadcast.
  Value r = max_op.result(0);
  int i = uses.OnlyUser(r);
  while (i >= 0 && (ops[i]->name() == "stablehlo.reshape" ||
                    ops[i]->name() == "stablehlo.optimization_barrier")) {
    if (ops[i]->num_operands() != 1 || ops[i]->num_results() != 1) return false;
    const auto& dims = ops[i]->result(0).tensor_type().dims;
    if (dims != kept && dims != kept_one) return false;
    chain.push_back(i);
    r = ops[i]->result(0);
    i = uses.OnlyUser(r);
  }
  if (i < 0 || ops[i]->name() != "stablehlo.broadcast_in_dim") return false;
  const auto& rdims = r.tensor_type().dims;
  const bool with_one = rdims == kept_one && kept_one != kept;
  if (rdims != (with_one ? kept_one : kept)) return false;
  std::vector<int64_t> expected(with_one ? rank : rank - 1);
  for (size_t d = 0; d < expected.size(); ++d) expected[d] = static_cast<int64_t>(d);
  if (GetIntArrayAttr(ops[i]->attrs(), "broadcast_dimensions") != expected ||
      !(ops[i]->result(0).tensor_type() == xt))
    return false;
  chain.push_back(i);
  const int sub = uses.OnlyUser(ops[i]->result(0));
  if (sub < 0 || ops[sub]->name() != "stablehlo.subtract" || !(ops[sub]->operand(0) == x) ||
      !(ops[sub]->operand(1) == ops[i]->result(0)))
    return false;
  chain.push_back(sub);
  operands = {x, max_op.operand(1)};
  kernel = &RowMaxSubtractKernel();
  return true;
}

bool MatchExpSum(const Block& block, const BlockUses& uses, int a, std::vector<int>& chain,
                 std::vector<Value>& operands, const FusedKernel*& kernel) {
  const auto& ops = block.operations();
  const Operation& exp = *ops[a];
  if (exp.name() != "stablehlo.exponential" || exp.num_operands() != 1 ||
      !IsF32Tensor(exp.operand(0)) || !IsF32Tensor(exp.result(0)) ||
      exp.result(0).tensor_type().rank() < 1 || FindAttr(exp.attrs(), "result_accuracy"))
    return false;
  const int sum = uses.OnlyUser(exp.result(0));
  if (sum < 0 || !ReducesLastAxis(*ops[sum], BinaryKind::kAdd) ||
      !(ops[sum]->operand(0) == exp.result(0)))
    return false;
  chain = {a, sum};
  operands = {exp.operand(0), ops[sum]->operand(1)};
  kernel = &ExpSumKernel();
  return true;
}

}  // namespace tlaloc::interp
