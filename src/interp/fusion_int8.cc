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
// The composite tlaloc.ragged_int8_linear {block = 32, mode} (nn/int8_linear.h) on (x f32
// [M, K], q s8 [G, N, K], scale f16 [G, N, K / 32], group_sizes [G]), nn::SparseMoe's int8
// expert product, runs as cpu::RaggedDotInt8 on the s8 stack in place (no [G, N, K] f32 stack):
// mode "exact" with the bits of its decomposition's chlo.ragged_dot on the dequantised stack,
// mode "q8_0" with the bits of its q8_0 decomposition (the VNNI kernel in the same order).
#include <unordered_map>

#include "cpu/ragged_dot_int8.h"
#include "cpu/reduction_matmul.h"
#include "cpu/reduction_matmul_q8.h"
#include "cpu/reduction_matmul_q8_packed.h"
#include "fusion.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/ir/serial_eval_context.h"
#include "tlaloc/support/thread_pool.h"

namespace tlaloc::interp {

namespace {

constexpr int64_t kBlock = kQ8_0BlockElements;  // the q8_0 block (ir/quant_format.h)

bool HasType(Value v, ElementType et) {
  return v.type().is_tensor() && v.tensor_type().element_type == et;
}

template <cpu::Int8Activations kMode>
const FusedKernel& RaggedInt8Kernel() {
  static const FusedKernel* kernel =
      new FusedKernel{kMode == cpu::Int8Activations::kExact ? "fused.ragged_int8_linear_exact"
                                                            : "fused.ragged_int8_linear_q8_0",
                      [](std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
                        // The s8 stack first, as Int8LinearExactKernel's matrix (never aliased with
                        // the f32 result).
                        return cpu::RaggedDotInt8(in[2], in[0], in[1], in[3], out, ctx, kMode);
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

// The q8_0 form: its decomposition's bits, from the kernel (AVX512-VNNI or AVX2) that sums in the
// decomposition's order on the weights repacked once (cpu::CachedQ8Weights), or in place
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

bool MatchRaggedInt8Composite(const Block& block, int a, std::vector<int>& chain,
                              std::vector<Value>& operands, const FusedKernel*& kernel) {
  const Operation& op = *block.operations()[a];
  if (op.name() != "stablehlo.composite" ||
      GetStringAttr(op.attrs(), "name") != "tlaloc.ragged_int8_linear" || op.num_operands() != 4 ||
      op.num_results() != 1)
    return false;
  const Attribute* attributes = FindAttr(op.attrs(), "composite_attributes");
  if (!attributes || attributes->kind() != Attribute::Kind::kDict) return false;
  const AttrDict& d = attributes->as_dict();
  const std::string mode = GetStringAttr(d, "mode");
  if (GetIntAttr(d, "block", 0) != kBlock || (mode != "q8_0" && mode != "exact")) return false;
  Value x = op.operand(0), q = op.operand(1), scale = op.operand(2), sizes = op.operand(3);
  if (!HasType(x, ElementType::kF32) || !HasType(q, ElementType::kS8) ||
      !HasType(scale, ElementType::kF16) || !HasType(op.result(0), ElementType::kF32) ||
      !(HasType(sizes, ElementType::kS32) || HasType(sizes, ElementType::kS64)))
    return false;
  const auto& qd = q.tensor_type().dims;
  const auto& xd = x.tensor_type().dims;
  if (qd.size() != 3 || qd[2] <= 0 || qd[2] % kBlock != 0 || xd.size() != 2 || xd[1] != qd[2] ||
      scale.tensor_type().dims != std::vector<int64_t>{qd[0], qd[1], qd[2] / kBlock} ||
      sizes.tensor_type().dims != std::vector<int64_t>{qd[0]} ||
      op.result(0).tensor_type().dims != std::vector<int64_t>{xd[0], qd[1]})
    return false;
  chain = {a};
  operands = {q, scale, x, sizes};
  kernel = mode == "exact" ? &RaggedInt8Kernel<cpu::Int8Activations::kExact>()
                           : &RaggedInt8Kernel<cpu::Int8Activations::kQ8_0>();
  return true;
}

}  // namespace tlaloc::interp

namespace tlaloc {

namespace {

// The default pool's threads for a kernel called outside a program's run.
class PoolContext : public SerialEvalContext {
 public:
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t)>& body) override {
    DefaultThreadPool().ParallelFor(n, grain, body);
  }
};

}  // namespace

void PrepareQ8Weight(const Literal& q, const Literal& scale) {
  if (q.element_type() != ElementType::kS8 || scale.element_type() != ElementType::kF16 ||
      q.dims().size() < 2 || q.dims().back() % kQ8_0BlockElements != 0 ||
      scale.num_elements() * kQ8_0BlockElements != q.num_elements())
    return;
  PoolContext ctx;
  (void)cpu::CachedQ8Weights(q, scale, ctx);
}

}  // namespace tlaloc
