// The int8 matrix products (fusion.h).
//
// The composite tlaloc.int8_linear {block = 32, mode} (nn/int8_linear.h) on (x f32 [..., K],
// q s8 [N, K], scale f16 [N, K / 32]), with its decomposition's bits:
// - mode "exact", decomposing into nn::Linear's dequantising chain
//     r = reshape(q) [N, K/32, 32] ; c = convert(r) f32 ; s = convert(scale) f32
//     w = reshape(c * broadcast_in_dim(s, dims = [0, 1])) [N, K]
//     y = dot_general(x, w, contracting {last} x {1})
//   runs as cpu::Int8Matmul: decode's rows stream the int8 matrix once with the f32
//   matrix-vector kernel's arithmetic, so y has the chain's bits and no [N, K] f32 temporary
//   exists;
// - mode "q8_0" runs as the VNNI q8_0 kernel that sums in the decomposition's order.
//
// The dequantising chain on a stack of matrices q s8 [G, N, K] (scales [G, N, K/32], broadcast
// dims [0, 1, 2]) feeding chlo.ragged_dot's grouped rows (x f32 [M, K] contracting {1}, rhs
// [G, N, K] contracting {2}, groups on {0}) is nn::SparseMoe's int8 expert product, emitted as
// ops (no composite yet): it is recognised as a chain and runs as cpu::RaggedDotInt8 on (q,
// scale, x, group_sizes), each group through Int8Matmul (or the q8_0 kernel where
// TLALOC_INT8_ACTIVATIONS / --int8-form chose q8_0), so each used expert's s8 matrix is read in
// place once and no [G, N, K] f32 stack exists.
#include <unordered_map>

#include "cpu/ragged_dot_int8.h"
#include "cpu/reduction_matmul.h"
#include "cpu/reduction_matmul_q8.h"
#include "cpu/reduction_matmul_q8_packed.h"
#include "fusion.h"
#include "tlaloc/ir/quant_format.h"

namespace tlaloc::interp {

namespace {

constexpr int64_t kBlock = kQ8_0BlockElements;  // the q8_0 block (ir/quant_format.h)

bool HasType(Value v, ElementType et) {
  return v.type().is_tensor() && v.tensor_type().element_type == et;
}

// chlo.ragged_dot's grouped rows on a stacked rhs [G, N, K]: lhs [M, K] contracting {1}, rhs
// contracting {2}, groups on rhs dimension 0, rows of lhs ragged, no batch dimensions.
bool IsGroupedRowsOnStack(const Operation& op) {
  const Attribute* a = FindAttr(op.attrs(), "ragged_dot_dimension_numbers");
  if (!a || a->kind() != Attribute::Kind::kStruct) return false;
  // An empty list is left out of the attribute (as MLIR prints it); any other kind is no match.
  auto field = [&](const char* name) {
    const Attribute* f = FindAttr(a->as_dict(), name);
    if (!f) return std::vector<int64_t>{};
    return f->kind() == Attribute::Kind::kIntArray ? f->as_int_array() : std::vector<int64_t>{-1};
  };
  return field("lhs_batching_dimensions").empty() && field("rhs_batching_dimensions").empty() &&
         field("lhs_contracting_dimensions") == std::vector<int64_t>{1} &&
         field("rhs_contracting_dimensions") == std::vector<int64_t>{2} &&
         field("lhs_ragged_dimensions") == std::vector<int64_t>{0} &&
         field("rhs_group_dimensions") == std::vector<int64_t>{0};
}

const FusedKernel& Int8RaggedDotKernel() {
  static const FusedKernel* kernel =
      new FusedKernel{"fused.int8_ragged_dot",
                      [](std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
                        // The s8 stack first, as Int8LinearExactKernel's matrix (never aliased with
                        // the f32 result).
                        return cpu::RaggedDotInt8(in[2], in[0], in[1], in[3], out, ctx);
                      }};
  return *kernel;
}

}  // namespace

// The exact form: cpu::Int8Matmul on (q, scale, x). The s8 matrix comes first: the interpreter
// lets a fused result take over its first operand's buffer when the types match, which x's may
// (k == n) and must not here.
const FusedKernel& Int8LinearExactKernel() {
  static const FusedKernel* kernel = new FusedKernel{
      "fused.int8_linear_exact",
      [](std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
        const Literal& q = in[0];
        const Literal& scale = in[1];
        const Literal& x = in[2];
        const int64_t n = q.dims()[0], k = q.dims()[1];
        const int64_t m = k > 0 ? x.num_elements() / k : 0;
        if (m == 0 || n == 0) return OkStatus();
        cpu::Int8Matmul(x.span<float>().data(), m, q.span<int8_t>().data(),
                        scale.span<uint16_t>().data(), n, k, out.span<float>().data(), ctx);
        return OkStatus();
      }};
  return *kernel;
}

// The q8_0 form: its decomposition's bits, from the VNNI kernel that sums in the decomposition's
// order on the weights repacked once (cpu::CachedQ8Weights), or in place
// (cpu::Q8Kernel::kInOrder) where there is no repacked copy.
const FusedKernel& Int8LinearQ8Kernel() {
  static const FusedKernel* kernel =
      new FusedKernel{"fused.int8_linear_q8_0",
                      [](std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
                        const Literal& x = in[0];
                        const Literal& q = in[1];
                        const Literal& scale = in[2];
                        const int64_t n = q.dims()[0], k = q.dims()[1];
                        const int64_t m = k > 0 ? x.num_elements() / k : 0;
                        if (m == 0 || n == 0) return OkStatus();
                        // The weights repacked once (kept per buffer), else read in place.
                        if (auto packed = cpu::CachedQ8Weights(q, scale, ctx)) {
                          cpu::Int8MatmulQ8_0Packed(x.span<float>().data(), m, *packed,
                                                    out.span<float>().data(), ctx);
                          return OkStatus();
                        }
                        cpu::Int8MatmulQ8_0(x.span<float>().data(), m, q.span<int8_t>().data(),
                                            scale.span<uint16_t>().data(), n, k,
                                            out.span<float>().data(), ctx, cpu::Q8Kernel::kInOrder);
                        return OkStatus();
                      }};
  return *kernel;
}

bool MatchInt8Composite(const Block& block, int a, std::vector<int>& chain,
                        std::vector<Value>& operands, const FusedKernel*& kernel) {
  const Operation& op = *block.operations()[a];
  if (op.name() != "stablehlo.composite" ||
      GetStringAttr(op.attrs(), "name") != "tlaloc.int8_linear" || op.num_operands() != 3 ||
      op.num_results() != 1)
    return false;
  const Attribute* attributes = FindAttr(op.attrs(), "composite_attributes");
  if (!attributes || attributes->kind() != Attribute::Kind::kDict) return false;
  const AttrDict& d = attributes->as_dict();
  const std::string mode = GetStringAttr(d, "mode");
  if (GetIntAttr(d, "block", 0) != kBlock || (mode != "q8_0" && mode != "exact")) return false;
  Value x = op.operand(0), q = op.operand(1), scale = op.operand(2);
  if (!HasType(x, ElementType::kF32) || !HasType(q, ElementType::kS8) ||
      !HasType(scale, ElementType::kF16) || !HasType(op.result(0), ElementType::kF32))
    return false;
  const auto& qd = q.tensor_type().dims;
  const auto& xd = x.tensor_type().dims;
  if (qd.size() != 2 || qd[1] <= 0 || qd[1] % kBlock != 0 || xd.empty() || xd.back() != qd[1] ||
      scale.tensor_type().dims != std::vector<int64_t>{qd[0], qd[1] / kBlock})
    return false;
  std::vector<int64_t> out = xd;
  out.back() = qd[0];
  if (op.result(0).tensor_type().dims != out) return false;
  chain = {a};
  if (mode == "exact") {
    operands = {q, scale, x};
    kernel = &Int8LinearExactKernel();
  } else {
    operands = {x, q, scale};
    kernel = &Int8LinearQ8Kernel();
  }
  return true;
}

bool MatchInt8RaggedDot(const Block& block, const BlockUses& uses, int a, std::vector<int>& chain,
                        std::vector<Value>& operands, const FusedKernel*& kernel) {
  const auto& ops = block.operations();
  auto index_of = [&](const Operation* op) -> int {
    // The producers sit just before the multiply that this chain walks to; search back.
    for (int i = static_cast<int>(ops.size()) - 1; i >= 0; --i)
      if (ops[i].get() == op) return i;
    return -1;
  };
  const Operation& r1 = *ops[a];
  if (r1.name() != "stablehlo.reshape" || r1.num_operands() != 1) return false;
  Value q = r1.operand(0);
  // A stack of matrices [G, N, K] (nn::SparseMoe's experts).
  if (!HasType(q, ElementType::kS8)) return false;
  const std::vector<int64_t> qdims = q.tensor_type().dims;
  const int64_t rank = static_cast<int64_t>(qdims.size());
  if (rank != 3) return false;
  const int64_t k = qdims.back();
  if (k <= 0 || k % kBlock != 0) return false;
  std::vector<int64_t> scale_dims = qdims, blocked = qdims, keep;
  scale_dims.back() = k / kBlock;
  blocked.back() = k / kBlock;
  blocked.push_back(kBlock);
  for (int64_t d = 0; d < rank; ++d) keep.push_back(d);
  if (r1.result(0).tensor_type().dims != blocked) return false;
  const int c1 = uses.OnlyUser(r1.result(0));
  if (c1 < 0 || ops[c1]->name() != "stablehlo.convert" ||
      !HasType(ops[c1]->result(0), ElementType::kF32))
    return false;
  const int mul = uses.OnlyUser(ops[c1]->result(0));
  if (mul < 0 || ops[mul]->name() != "stablehlo.multiply") return false;
  const Operation& mop = *ops[mul];
  Value other = mop.operand(0) == ops[c1]->result(0) ? mop.operand(1) : mop.operand(0);
  if (other == ops[c1]->result(0) || other.is_block_argument()) return false;
  const Operation* bop = other.producer();
  if (bop->name() != "stablehlo.broadcast_in_dim" || uses.OnlyUser(other) != mul ||
      GetIntArrayAttr(bop->attrs(), "broadcast_dimensions") != keep ||
      other.tensor_type().dims != blocked)
    return false;
  Value s32 = bop->operand(0);
  if (s32.is_block_argument() || !HasType(s32, ElementType::kF32) ||
      uses.OnlyUser(s32) != index_of(bop))
    return false;
  const Operation* sop = s32.producer();
  if (sop->name() != "stablehlo.convert" || !HasType(sop->operand(0), ElementType::kF16) ||
      sop->operand(0).tensor_type().dims != scale_dims)
    return false;
  const int r2 = uses.OnlyUser(mop.result(0));
  if (r2 < 0 || ops[r2]->name() != "stablehlo.reshape" ||
      ops[r2]->result(0).tensor_type().dims != qdims)
    return false;
  const int dot = uses.OnlyUser(ops[r2]->result(0));
  if (dot < 0) return false;
  const Operation& dop = *ops[dot];
  Value x = dop.operand(0);
  if (!(dop.num_operands() > 1 && dop.operand(1) == ops[r2]->result(0)) ||
      !HasType(x, ElementType::kF32) || !HasType(dop.result(0), ElementType::kF32) ||
      x.tensor_type().rank() < 1 || x.tensor_type().dims.back() != k)
    return false;
  if (dop.name() != "chlo.ragged_dot" || dop.num_operands() != 3 || x.tensor_type().rank() != 2 ||
      !IsGroupedRowsOnStack(dop))
    return false;
  kernel = &Int8RaggedDotKernel();
  const int bi = index_of(bop), si = index_of(sop);
  if (bi < 0 || si < 0) return false;
  chain = {a, c1, si, bi, mul, r2, dot};
  operands = {q, sop->operand(0), x, dop.operand(2)};
  return true;
}

}  // namespace tlaloc::interp
