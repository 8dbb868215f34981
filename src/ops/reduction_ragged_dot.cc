// chlo.ragged_dot: a grouped matrix product (XLA's ragged-dot, TPU's grouped matmul), the
// expert product of a mixture of experts. Two forms are implemented:
//
//   grouped rows:   lhs [M, K], rhs [G, K, N] (or [G, N, K]), group_sizes [G] -> [M, N]
//                   rows of group g (consecutive, in group order) times rhs[g]; rows past the
//                   last group are zero.
//   ragged contraction: lhs [M, K], rhs [M, N], group_sizes [G] -> [G, K, N]
//                   out[g] = lhs[rows of g]^T . rhs[rows of g] (the weight gradient of the first).
//
// JAX prints the op in MLIR's generic form, which the generic printer and parser handle; the
// dimension numbers are the #chlo.ragged_dot<...> struct. Each expert's weights are read once
// per call however many rows it has (the CPU layer's kernel, cpu/dot_kernels.cc: all groups in one
// pass over the pool through ragged_dot_grouped's tile kernels, groups of up to four rows that no
// tile kernel takes through the matrix-vector kernel); the reference evaluation here is a plain
// loop in double.
#include "reduction_ragged_dot.h"

#include <algorithm>

#include "op_areas.h"
#include "op_helpers.h"
#include "tlaloc/ir/typed_builder.h"

namespace tlaloc::ops {

StatusOr<RaggedDims> ReadRaggedDims(const AttrDict& attrs) {
  const Attribute* a = FindAttr(attrs, "ragged_dot_dimension_numbers");
  if (!a || a->kind() != Attribute::Kind::kStruct)
    return InvalidArgument(
        "expected a 'ragged_dot_dimension_numbers' #chlo.ragged_dot<...> attribute");
  RaggedDims d;
  auto field = [&](const char* name, std::vector<int64_t>& out) {
    return ReadIntListField(*a, "ragged_dot_dimension_numbers", name, out);
  };
  TL_RETURN_IF_ERROR(field("lhs_batching_dimensions", d.lhs_batch));
  TL_RETURN_IF_ERROR(field("rhs_batching_dimensions", d.rhs_batch));
  TL_RETURN_IF_ERROR(field("lhs_contracting_dimensions", d.lhs_contracting));
  TL_RETURN_IF_ERROR(field("rhs_contracting_dimensions", d.rhs_contracting));
  TL_RETURN_IF_ERROR(field("lhs_ragged_dimensions", d.lhs_ragged));
  TL_RETURN_IF_ERROR(field("rhs_group_dimensions", d.rhs_group));
  return d;
}

// The form of `d` on these operands, or an error naming what Tlaloc takes.
StatusOr<RaggedMode> ClassifyRagged(const RaggedDims& d, const TensorType& lhs,
                                    const TensorType& rhs) {
  if (!d.lhs_batch.empty() || !d.rhs_batch.empty())
    return InvalidArgument("batching dimensions are not supported (Tlaloc takes rank-2 lhs)");
  if (lhs.rank() != 2) return InvalidArgument("lhs must be rank 2 [M, K], got " + lhs.ToString());
  if (d.lhs_ragged != std::vector<int64_t>{0})
    return InvalidArgument("lhs_ragged_dimensions must be [0] (rows grouped)");
  if (d.lhs_contracting.size() != 1 || d.rhs_contracting.size() != 1)
    return InvalidArgument("expected one lhs and one rhs contracting dimension");
  const int64_t lc = d.lhs_contracting[0], rc = d.rhs_contracting[0];
  if (lc == 1 && rhs.rank() == 3 && d.rhs_group == std::vector<int64_t>{0} && (rc == 1 || rc == 2))
    return RaggedMode::kGroupedRows;
  if (lc == 0 && rhs.rank() == 2 && d.rhs_group.empty() && rc == 0)
    return RaggedMode::kRaggedContraction;
  return InvalidArgument(
      "unsupported form: expected lhs [M, K] contracting [1] against rhs [G, K, N] or "
      "[G, N, K] with rhs_group_dimensions [0], or lhs [M, K] contracting its ragged dimension "
      "[0] against rhs [M, N] contracting [0]; got lhs " +
      lhs.ToString() + ", rhs " + rhs.ToString());
}

// Each group's first row and row count, clipped to the M rows there are.
StatusOr<std::vector<std::pair<int64_t, int64_t>>> GroupRows(const Literal& sizes, int64_t m) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t start = 0;
  for (int64_t g = 0; g < sizes.num_elements(); ++g) {
    const int64_t n = sizes.GetAsInt64(g);
    if (n < 0)
      return InvalidArgument("chlo.ragged_dot: group_sizes[" + std::to_string(g) +
                             "] = " + std::to_string(n) + " is negative");
    const int64_t begin = std::min(start, m);
    const int64_t end = std::min(start + std::min(n, m), m);
    out.emplace_back(begin, end - begin);
    start = std::min(start + n, m);
  }
  return out;
}

namespace {

StatusOr<std::vector<Type>> InferRaggedDot(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectOperandCount(in, 3));
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  const TensorType& lhs = in.operand_types[0].tensor;
  const TensorType& rhs = in.operand_types[1].tensor;
  const TensorType& gs = in.operand_types[2].tensor;
  if (!IsFloat(lhs.element_type) || !IsFloat(rhs.element_type))
    return InvalidArgument("lhs " + lhs.ToString() + " and rhs " + rhs.ToString() +
                           " must be floating-point");
  if (gs.rank() != 1 || !IsInteger(gs.element_type))
    return InvalidArgument("group_sizes must be a rank-1 integer tensor, got " + gs.ToString());
  TL_ASSIGN_OR_RETURN(RaggedDims d, ReadRaggedDims(in.attrs));
  TL_ASSIGN_OR_RETURN(RaggedMode mode, ClassifyRagged(d, lhs, rhs));
  const int64_t m = lhs.dims[0], k = lhs.dims[1], groups = gs.dims[0];
  std::vector<int64_t> dims;
  if (mode == RaggedMode::kGroupedRows) {
    const int64_t rc = d.rhs_contracting[0];
    if (rhs.dims[0] != groups)
      return InvalidArgument("rhs has " + std::to_string(rhs.dims[0]) + " groups, group_sizes " +
                             std::to_string(groups));
    if (rhs.dims[rc] != k)
      return InvalidArgument("contracting dimension has size " + std::to_string(k) +
                             " in lhs and " + std::to_string(rhs.dims[rc]) + " in rhs");
    dims = {m, rhs.dims[rc == 1 ? 2 : 1]};
  } else {
    if (rhs.dims[0] != m)
      return InvalidArgument("ragged contracting dimension has size " + std::to_string(m) +
                             " in lhs and " + std::to_string(rhs.dims[0]) + " in rhs");
    dims = {groups, k, rhs.dims[1]};
  }
  ElementType et = lhs.element_type;
  if (in.declared_results && in.declared_results->size() == 1 &&
      (*in.declared_results)[0].is_tensor())
    et = (*in.declared_results)[0].tensor.element_type;
  if (!IsFloat(et)) return InvalidArgument("the result must be floating-point");
  return std::vector<Type>{TensorType(et, dims)};
}

// The reference: a plain loop in double over every group, rounded once into the result.
void EvalDouble(RaggedMode mode, int64_t rhs_contract, const Literal& lhs, const Literal& rhs,
                const std::vector<std::pair<int64_t, int64_t>>& groups, Literal& result) {
  const int64_t k = lhs.dims()[1];
  if (mode == RaggedMode::kGroupedRows) {
    const int64_t n = rhs.dims()[rhs_contract == 1 ? 2 : 1];
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto [start, rows] = groups[g];
      const int64_t base = static_cast<int64_t>(g) * k * n;
      for (int64_t r = start; r < start + rows; ++r)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t i = 0; i < k; ++i)
            s += lhs.GetAsDouble(r * k + i) *
                 rhs.GetAsDouble(base + (rhs_contract == 1 ? i * n + j : j * k + i));
          result.SetFromDouble(r * n + j, s);
        }
    }
    return;
  }
  const int64_t n = rhs.dims()[1];
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto [start, rows] = groups[g];
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t r = start; r < start + rows; ++r)
          s += lhs.GetAsDouble(r * k + i) * rhs.GetAsDouble(r * n + j);
        result.SetFromDouble((static_cast<int64_t>(g) * k + i) * n + j, s);
      }
  }
}

Status EvalRaggedDot(const Operation& op, std::span<const Literal> operands,
                     std::vector<Literal>& results, EvalContext&) {
  const Literal &lhs = operands[0], &rhs = operands[1];
  TL_ASSIGN_OR_RETURN(RaggedDims d, ReadRaggedDims(op.attrs()));
  TL_ASSIGN_OR_RETURN(RaggedMode mode, ClassifyRagged(d, lhs.type(), rhs.type()));
  TL_ASSIGN_OR_RETURN(auto groups, GroupRows(operands[2], lhs.dims()[0]));
  EvalDouble(mode, d.rhs_contracting[0], lhs, rhs, groups, results[0]);
  return OkStatus();
}

TensorType WithType(const Value& v, ElementType et) { return TensorType(et, v.tensor_type().dims); }

// Gradients. Grouped rows, y = x . W[g]:  dx is dy against W contracting W's output dimension
// (again grouped rows) and dW[g] = x[rows]^T . dy[rows] (the ragged contraction, operands
// swapped when W is stored [G, N, K]). Ragged contraction, z[g] = a[rows]^T . b[rows]:
// da = b . dz[g]^T and db = a . dz[g], both grouped rows.
StatusOr<std::vector<Value>> RaggedDotVjp(OpBuilder& b, const Operation& op,
                                          const std::vector<Value>& x, const std::vector<Value>&,
                                          const std::vector<Value>& cts) {
  TL_ASSIGN_OR_RETURN(RaggedDims d, ReadRaggedDims(op.attrs()));
  TL_ASSIGN_OR_RETURN(RaggedMode mode, ClassifyRagged(d, x[0].tensor_type(), x[1].tensor_type()));
  const Value ct = cts[0], gs = x[2];
  const ElementType lt = x[0].tensor_type().element_type, rt = x[1].tensor_type().element_type;
  RaggedDims rows;  // grouped rows, rhs contracting set below
  rows.lhs_contracting = {1};
  rows.lhs_ragged = {0};
  rows.rhs_group = {0};
  RaggedDims contract;
  contract.lhs_contracting = {0};
  contract.rhs_contracting = {0};
  contract.lhs_ragged = {0};
  Value dl, dr;
  if (mode == RaggedMode::kGroupedRows) {
    const int64_t rc = d.rhs_contracting[0];
    rows.rhs_contracting = {rc == 1 ? 2 : 1};
    dl = hlo::RaggedDot(b, ct, x[1], gs, rows, WithType(x[0], lt));
    dr = rc == 1 ? hlo::RaggedDot(b, x[0], ct, gs, contract, WithType(x[1], rt))
                 : hlo::RaggedDot(b, ct, x[0], gs, contract, WithType(x[1], rt));
  } else {
    rows.rhs_contracting = {2};
    dl = hlo::RaggedDot(b, x[1], ct, gs, rows, WithType(x[0], lt));
    rows.rhs_contracting = {1};
    dr = hlo::RaggedDot(b, x[0], ct, gs, rows, WithType(x[1], rt));
  }
  TL_RETURN_IF_ERROR(b.status());
  return std::vector<Value>{dl, dr, Value()};
}

}  // namespace

void RegisterRaggedDotOps(OpRegistry& r) {
  OpDef d;
  d.name = "chlo.ragged_dot";
  // Not writes_all_results: rows past the last group, and empty groups' blocks, stay zero.
  d.infer = InferRaggedDot;
  d.eval = EvalRaggedDot;
  d.vjp = RaggedDotVjp;
  r.Register(std::move(d));
}

}  // namespace tlaloc::ops
