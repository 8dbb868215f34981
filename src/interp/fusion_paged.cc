// Decode attention over the paged KV cache with the pages read in place (fusion.h): the chain
// models/qwen3 emits for each layer's keys and values,
//
//   g = gather(pool [N, H, P, D], table [B, M]) -> [B, H, M, P, D]   (builder::Take, rows dims
//                                                                      {1, 3, 4})
//   r = reshape(g) -> [B, H, M * P, D]
//   keys:   dot_general(q [B, H, G, T, D], r) batch {0, 1} x {0, 1}, contracting {4} x {3}
//   values: dot_general(p [B, H, G, T, S], r) batch {0, 1} x {0, 1}, contracting {4} x {2}
//
// with G * T <= cpu::kMaxVectors (a decode step): the gather copied every cached key and value
// of every layer once per step (about 4% of a bf16 decode step at short context, more at long).
// cpu::PagedMatmul runs the matrix-vector kernels ViewMatmul would run on the gathered copy,
// reading each row through the page table, so the results have the unfused ops' bits.
#include "cpu/reduction_matmul.h"
#include "fusion.h"

namespace tlaloc::interp {

namespace {

std::vector<int64_t> IntField(const Attribute& strukt, const char* name) {
  const Attribute* f = FindAttr(strukt.as_dict(), name);
  return f && f->kind() == Attribute::Kind::kIntArray ? f->as_int_array() : std::vector<int64_t>{};
}

// builder::Take(pool, table, {1, 3, 4}) on a rank-4 pool and an s32 [B, M] table.
bool IsPageGather(const Operation& op) {
  if (op.name() != "stablehlo.gather" || op.num_operands() != 2) return false;
  const TensorType& pool = op.operand(0).tensor_type();
  const TensorType& table = op.operand(1).tensor_type();
  if (pool.rank() != 4 || table.rank() != 2 || table.element_type != ElementType::kS32 ||
      (pool.element_type != ElementType::kBF16 && pool.element_type != ElementType::kF32))
    return false;
  const Attribute* dn = FindAttr(op.attrs(), "dimension_numbers");
  if (!dn || dn->kind() != Attribute::Kind::kStruct) return false;
  const Attribute* ivd = FindAttr(dn->as_dict(), "index_vector_dim");
  return IntField(*dn, "offset_dims") == std::vector<int64_t>{1, 3, 4} &&
         IntField(*dn, "collapsed_slice_dims") == std::vector<int64_t>{0} &&
         IntField(*dn, "operand_batching_dims").empty() &&
         IntField(*dn, "start_indices_batching_dims").empty() &&
         IntField(*dn, "start_index_map") == std::vector<int64_t>{0} && ivd &&
         ivd->kind() == Attribute::Kind::kInt && ivd->as_int() == 2 &&
         GetIntArrayAttr(op.attrs(), "slice_sizes") ==
             std::vector<int64_t>{1, pool.dims[1], pool.dims[2], pool.dims[3]};
}

struct PagedShape {
  bool values = false;
  int64_t m = 0;  // G * T vectors per (row, head)
};

}  // namespace

std::shared_ptr<const FusedKernel> MatchPagedAttentionDot(const Block& block, const BlockUses& uses,
                                                          int a, std::vector<int>& chain,
                                                          std::vector<Value>& operands) {
  const auto& ops = block.operations();
  const Operation& gather = *ops[a];
  if (!IsPageGather(gather)) return nullptr;
  const TensorType& pool = gather.operand(0).tensor_type();
  const TensorType& table = gather.operand(1).tensor_type();
  const int64_t bsz = table.dims[0], blocks = table.dims[1];
  const int64_t heads = pool.dims[1], page = pool.dims[2], d = pool.dims[3];
  if (pool.dims[0] <= 0 || bsz <= 0 || blocks <= 0 || heads <= 0 || page <= 0 || d <= 1)
    return nullptr;
  const int r = uses.OnlyUser(gather.result(0));
  if (r < 0 || ops[r]->name() != "stablehlo.reshape" ||
      ops[r]->result(0).tensor_type().dims != std::vector<int64_t>{bsz, heads, blocks * page, d})
    return nullptr;
  const int dot = uses.OnlyUser(ops[r]->result(0));
  if (dot < 0) return nullptr;
  const Operation& dop = *ops[dot];
  if (dop.name() != "stablehlo.dot_general" || dop.num_operands() != 2 ||
      !(dop.operand(1) == ops[r]->result(0)) || FindAttr(dop.attrs(), "algorithm"))
    return nullptr;
  const Attribute* dn = FindAttr(dop.attrs(), "dot_dimension_numbers");
  if (!dn || dn->kind() != Attribute::Kind::kStruct) return nullptr;
  const TensorType& lhs = dop.operand(0).tensor_type();
  if (lhs.rank() != 5 || lhs.element_type != pool.element_type || lhs.dims[0] != bsz ||
      lhs.dims[1] != heads || dop.result(0).tensor_type().element_type != ElementType::kF32)
    return nullptr;
  const std::vector<int64_t> batch{0, 1};
  if (IntField(*dn, "lhs_batching_dimensions") != batch ||
      IntField(*dn, "rhs_batching_dimensions") != batch ||
      IntField(*dn, "lhs_contracting_dimensions") != std::vector<int64_t>{4})
    return nullptr;
  PagedShape shape;
  shape.m = lhs.dims[2] * lhs.dims[3];
  const std::vector<int64_t> rhs_contracting = IntField(*dn, "rhs_contracting_dimensions");
  if (rhs_contracting == std::vector<int64_t>{3} && lhs.dims[4] == d)
    shape.values = false;
  else if (rhs_contracting == std::vector<int64_t>{2} && lhs.dims[4] == blocks * page)
    shape.values = true;
  else
    return nullptr;
  if (shape.m < 1 || shape.m > cpu::kMaxVectors) return nullptr;
  chain = {a, r, dot};
  operands = {dop.operand(0), gather.operand(0), gather.operand(1)};
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
        cpu::PagedMatmul(a, shape.m, rows, bsz, shape.values, out.span<float>().data(), ctx);
        return OkStatus();
      }});
}

}  // namespace tlaloc::interp
