// Decode attention over the paged KV cache with the pages read in place (fusion.h): the
// composite tlaloc.paged_dot {product} (nn::PagedDot, nn/paged_attention.h) on (lhs, pool
// [N, H, P, D], table s32 [B, M]), which nn::PagedGroupedAttention emits for each layer's keys and
// values, and whose decomposition is
//
//   g = gather(pool, table) -> [B, H, M, P, D]   (builder::Take, rows dims {1, 3, 4})
//   r = reshape(g) -> [B, H, M * P, D]
//   keys:   dot_general(lhs [B, H, G, T, D], r) batch {0, 1} x {0, 1}, contracting {4} x {3}
//   values: dot_general(lhs [B, H, G, T, S], r) batch {0, 1} x {0, 1}, contracting {4} x {2}
//
// With G * T <= cpu::kMaxVectors (a decode step) it runs as cpu::PagedMatmul: the gather copied
// every cached key and value of every layer once per step (about 4% of a bf16 decode step at
// short context, more at long), where PagedMatmul runs the matrix-vector kernels ViewMatmul
// would run on the gathered copy, reading each row through the page table, so the results have
// the decomposition's bits. More vectors (a prefill chunk) run the decomposition.
#include "cpu/reduction_matmul.h"
#include "fusion.h"

namespace tlaloc::interp {

namespace {

struct PagedShape {
  bool values = false;
  int64_t m = 0;  // G * T vectors per (row, head)
};

}  // namespace

std::shared_ptr<const FusedKernel> PagedDotCompositeKernel(const Operation& op) {
  if (op.num_operands() != 3 || op.num_results() != 1) return nullptr;
  const Attribute* attributes = FindAttr(op.attrs(), "composite_attributes");
  if (!attributes || attributes->kind() != Attribute::Kind::kDict) return nullptr;
  const std::string product = GetStringAttr(attributes->as_dict(), "product");
  if (product != "keys" && product != "values") return nullptr;
  Value lhs_v = op.operand(0), pool_v = op.operand(1), table_v = op.operand(2);
  for (Value v : {lhs_v, pool_v, table_v, op.result(0)})
    if (!v.type().is_tensor()) return nullptr;
  const TensorType& lhs = lhs_v.tensor_type();
  const TensorType& pool = pool_v.tensor_type();
  const TensorType& table = table_v.tensor_type();
  const TensorType& out = op.result(0).tensor_type();
  if (pool.rank() != 4 || table.rank() != 2 || lhs.rank() != 5 ||
      table.element_type != ElementType::kS32 ||
      (pool.element_type != ElementType::kBF16 && pool.element_type != ElementType::kF32) ||
      lhs.element_type != pool.element_type || out.element_type != ElementType::kF32)
    return nullptr;
  const int64_t bsz = table.dims[0], blocks = table.dims[1];
  const int64_t heads = pool.dims[1], page = pool.dims[2], d = pool.dims[3];
  if (pool.dims[0] <= 0 || bsz <= 0 || blocks <= 0 || heads <= 0 || page <= 0 || d <= 1 ||
      lhs.dims[0] != bsz || lhs.dims[1] != heads)
    return nullptr;
  PagedShape shape;
  shape.values = product == "values";
  shape.m = lhs.dims[2] * lhs.dims[3];
  const int64_t k = shape.values ? blocks * page : d, n = shape.values ? d : blocks * page;
  if (lhs.dims[4] != k || out.dims != std::vector<int64_t>{bsz, heads, lhs.dims[2], lhs.dims[3], n})
    return nullptr;
  // More vectors than a decode step's: the decomposition (the gathered copy and ViewMatmul).
  if (shape.m < 1 || shape.m > cpu::kMaxVectors) return nullptr;
  const cpu::PagedRows geometry{
      nullptr, pool.element_type, nullptr, pool.dims[0], blocks, heads, page, d};
  return std::make_shared<const FusedKernel>(FusedKernel{
      shape.values ? "fused.paged_values_dot" : "fused.paged_keys_dot",
      [shape, geometry, bsz](std::span<const Literal> in, Literal& out, EvalContext& ctx) {
        cpu::PagedRows rows = geometry;
        rows.pool = in[1].data();
        rows.table = in[2].span<int32_t>().data();
        const int64_t k = shape.values ? rows.blocks * rows.page : rows.row_len;
        cpu::MatrixView a;
        a.data = in[0].data();
        a.type = in[0].element_type();
        a.batch_stride = shape.m * k;
        a.row_stride = k;
        a.col_stride = 1;
        // PagedMatmul copies the vectors of `a` before writing: the result may be lhs's buffer.
        cpu::PagedMatmul(a, shape.m, rows, bsz, shape.values, out.span<float>().data(), ctx);
        return OkStatus();
      }});
}

}  // namespace tlaloc::interp
