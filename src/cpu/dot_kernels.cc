// The CPU layer's kernels for the contractions (registered in kernel_table.cc): dot_general and
// dot read f32/bf16 operands in place as (possibly transposed) batches of matrices where their
// layout allows, else pack them, and multiply through reduction_matmul's kernels (half types
// round once at the end); f64 products are packed and go through OpenBLAS. chlo.ragged_dot's
// f32/bf16 groups run in one pass over the pool through ragged_dot_grouped's tile kernels, groups
// of up to four rows that no tile kernel takes through the matrix-vector kernel. Everything else
// (integer products, other ragged types) is the op's reference evaluation (src/ops/).
#include <cblas.h>

#include <vector>

#include "cpu/op_kernels.h"
#include "cpu/ragged_dot_grouped.h"
#include "cpu/reduction_matmul.h"
#include "ops/reduction_dot.h"
#include "ops/reduction_ragged_dot.h"
#include "tlaloc/support/half.h"

namespace tlaloc::cpu {

using ops::AccumulationOf;
using ops::ClassifyRagged;
using ops::DotAcc;
using ops::DotDims;
using ops::DotDimsOf;
using ops::DotShape;
using ops::GroupRows;
using ops::PackOperand;
using ops::RaggedDims;
using ops::RaggedMode;
using ops::ReadRaggedDims;
using ops::ShapeOfDot;
using ops::StoreResult;

namespace {

// `x` as a batch of [rows, cols] matrices read in place: its batch dimensions must lead (in
// order) and the rest be the row dimensions then the column dimensions, or the reverse
// (a transposed matrix). Otherwise (or for element types other than f32 and bf16) it is packed
// into `pack` as f32 [batch, rows, cols] in `order`.
MatrixView ViewOrPack(const Literal& x, const std::vector<int64_t>& batch_dims,
                      const std::vector<int64_t>& row_dims, const std::vector<int64_t>& col_dims,
                      int64_t rows, int64_t cols, const std::vector<int64_t>& order,
                      std::vector<float>& pack) {
  MatrixView v;
  v.batch_stride = rows * cols;
  ElementType et = x.element_type();
  if (et == ElementType::kF32 || et == ElementType::kBF16) {
    bool batch_leads = true;
    for (size_t i = 0; i < batch_dims.size(); ++i)
      batch_leads = batch_leads && batch_dims[i] == static_cast<int64_t>(i);
    std::vector<int64_t> straight = row_dims, transposed = col_dims;
    straight.insert(straight.end(), col_dims.begin(), col_dims.end());
    transposed.insert(transposed.end(), row_dims.begin(), row_dims.end());
    std::vector<int64_t> rest;
    for (int64_t dim = static_cast<int64_t>(batch_dims.size()); dim < x.type().rank(); ++dim)
      rest.push_back(dim);
    if (batch_leads && (rest == straight || rest == transposed)) {
      v.data = x.data();
      v.type = et;
      if (rest == straight) {
        v.row_stride = cols;
        v.col_stride = 1;
      } else {
        v.row_stride = 1;
        v.col_stride = rows;
      }
      return v;
    }
  }
  PackOperand<float>(x, order, pack);
  v.data = reinterpret_cast<const std::byte*>(pack.data());
  v.type = ElementType::kF32;
  v.row_stride = cols;
  v.col_stride = 1;
  return v;
}

void BlasMatmulF64(const std::vector<double>& a, const std::vector<double>& b,
                   std::vector<double>& c, int64_t batch, int64_t m, int64_t k, int64_t n) {
  c.assign(batch * m * n, 0.0);
  if (batch * m * n == 0 || k == 0) return;
  for (int64_t bi = 0; bi < batch; ++bi) {
    const double* pa = a.data() + bi * m * k;
    const double* pb = b.data() + bi * k * n;
    double* pc = c.data() + bi * m * n;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0, pa, static_cast<int>(k), pb, static_cast<int>(n), 0.0, pc,
                static_cast<int>(n));
  }
}

bool Viewable(ElementType et) { return et == ElementType::kF32 || et == ElementType::kBF16; }

MatrixView ViewAt(const Literal& x, int64_t element_offset, int64_t row_stride,
                  int64_t col_stride) {
  MatrixView v;
  v.type = x.element_type();
  v.data = x.data() + element_offset * (BitWidth(v.type) / 8);
  v.row_stride = row_stride;
  v.col_stride = col_stride;
  return v;
}

// f32 / bf16 operands: one view product per group into the f32 buffer c (zeroed).
void EvalViews(RaggedMode mode, int64_t rhs_contract, const Literal& lhs, const Literal& rhs,
               const std::vector<std::pair<int64_t, int64_t>>& groups, float* c, EvalContext& ctx) {
  const int64_t k = lhs.dims()[1];
  if (mode == RaggedMode::kGroupedRows) {
    const int64_t n = rhs.dims()[rhs_contract == 1 ? 2 : 1];
    if (k == 0 || n == 0) return;
    // Groups go to the grouped kernels in one pass over the pool: all of them where a tile
    // kernel takes the operands, else those of more rows than the matrix-vector kernel takes;
    // the rest (through the matrix-vector kernel) stream their weights over all threads each.
    const int64_t fewest_rows =
        GroupedTakesSmallGroups(lhs, rhs, rhs_contract) ? 1 : kMaxVectors + 1;
    std::vector<RowGroup> many_rows;
    for (size_t g = 0; g < groups.size(); ++g)
      if (groups[g].second >= fewest_rows)
        many_rows.push_back({static_cast<int64_t>(g), groups[g].first, groups[g].second});
    const bool grouped = GroupedRowsProduct(lhs, rhs, rhs_contract, many_rows, c, ctx);
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto [start, rows] = groups[g];
      if (rows == 0 || (grouped && rows >= fewest_rows)) continue;
      MatrixView a = ViewAt(lhs, start * k, k, 1);
      const int64_t base = static_cast<int64_t>(g) * k * n;
      // rhs[g] as a [K, N] matrix: row-major, or stored [N, K] (a transposed view).
      MatrixView b = rhs_contract == 1 ? ViewAt(rhs, base, n, 1) : ViewAt(rhs, base, 1, k);
      ViewMatmul(a, b, 1, rows, k, n, c + start * n, ctx);
    }
    return;
  }
  const int64_t n = rhs.dims()[1];
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto [start, rows] = groups[g];
    if (rows == 0 || k == 0 || n == 0) continue;
    MatrixView a = ViewAt(lhs, start * k, 1, k);  // lhs rows^T: [K, rows]
    MatrixView b = ViewAt(rhs, start * n, n, 1);
    ViewMatmul(a, b, 1, k, rows, n, c + static_cast<int64_t>(g) * k * n, ctx);
  }
}

}  // namespace

Status DotKernel(const Operation& op, std::span<const Literal> operands,
                 std::vector<Literal>& results, EvalContext& ctx) {
  TL_ASSIGN_OR_RETURN(DotDims d, DotDimsOf(op, operands));
  const Literal& lhs = operands[0];
  const Literal& rhs = operands[1];
  Literal& result = results[0];
  const DotShape s = ShapeOfDot(d, lhs, rhs);
  const DotAcc acc = AccumulationOf(lhs, rhs, result.element_type());
  if (acc == DotAcc::kF32 && s.batch * s.m * s.n > 0 && s.k > 0) {
    // f32 accumulation: read f32/bf16 operands in place where their layout is a (possibly
    // transposed) batch of matrices, packing only the others.
    std::vector<float> lpack, rpack;
    MatrixView a =
        ViewOrPack(lhs, d.lhs_batch, s.lhs_free, d.lhs_contracting, s.m, s.k, s.lhs_order, lpack);
    MatrixView b =
        ViewOrPack(rhs, d.rhs_batch, d.rhs_contracting, s.rhs_free, s.k, s.n, s.rhs_order, rpack);
    if (result.element_type() == ElementType::kF32) {
      ViewMatmul(a, b, s.batch, s.m, s.k, s.n, result.span<float>().data(), ctx);
    } else {
      std::vector<float> c(s.batch * s.m * s.n);
      ViewMatmul(a, b, s.batch, s.m, s.k, s.n, c.data(), ctx);
      StoreResult<float>(c, result);
    }
    return OkStatus();
  }
  if (acc == DotAcc::kF64) {
    std::vector<double> a, b, c;
    PackOperand<double>(lhs, s.lhs_order, a);
    PackOperand<double>(rhs, s.rhs_order, b);
    BlasMatmulF64(a, b, c, s.batch, s.m, s.k, s.n);
    StoreResult<double>(c, result);
    return OkStatus();
  }
  return op.def().eval(op, operands, results, ctx);
}

Status RaggedDotKernel(const Operation& op, std::span<const Literal> operands,
                       std::vector<Literal>& results, EvalContext& ctx) {
  const Literal &lhs = operands[0], &rhs = operands[1];
  Literal& result = results[0];
  if (!Viewable(lhs.element_type()) || !Viewable(rhs.element_type()) ||
      !Viewable(result.element_type()))
    return op.def().eval(op, operands, results, ctx);
  TL_ASSIGN_OR_RETURN(RaggedDims d, ReadRaggedDims(op.attrs()));
  TL_ASSIGN_OR_RETURN(RaggedMode mode, ClassifyRagged(d, lhs.type(), rhs.type()));
  TL_ASSIGN_OR_RETURN(auto groups, GroupRows(operands[2], lhs.dims()[0]));
  const int64_t rc = d.rhs_contracting[0];
  if (result.element_type() == ElementType::kF32) {
    EvalViews(mode, rc, lhs, rhs, groups, result.span<float>().data(), ctx);
    return OkStatus();
  }
  std::vector<float> c(result.num_elements(), 0.0f);
  EvalViews(mode, rc, lhs, rhs, groups, c.data(), ctx);
  uint16_t* out = result.span<uint16_t>().data();  // bf16: rounded once, to nearest even
  for (size_t i = 0; i < c.size(); ++i) out[i] = FloatToBf16Bits(c[i]);
  return OkStatus();
}

}  // namespace tlaloc::cpu
