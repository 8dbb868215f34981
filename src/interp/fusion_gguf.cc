// stablehlo.composite "tlaloc.gguf_linear" {format} on (x f32 [..., K], q u8, scale) (nn/
// gguf_linear.h) runs as cpu::GgufMatmul: each packed row dequantised with the decomposition's
// arithmetic and multiplied by the f32 kernels, so the result has the decomposition's bits while
// the weights stay packed (no [N, K] f32 temporary in decode).
#include "cpu/matmul_gguf4.h"
#include "fusion.h"
#include "tlaloc/ir/quant_format.h"

namespace tlaloc::interp {

namespace {

bool HasType(Value v, ElementType et) {
  return v.type().is_tensor() && v.tensor_type().element_type == et;
}

template <QuantFormat F>
const FusedKernel& GgufLinearKernel(const char* name) {
  static const FusedKernel* kernel = new FusedKernel{
      name, [](std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
        // The packed matrix first: a fused result may take over its first operand's buffer
        // when the types match, which x's may (K == N) and must not.
        const Literal& q = in[0];
        const Literal& scale = in[1];
        const Literal& x = in[2];
        const int64_t n = q.dims()[0], k = x.dims().back();
        const int64_t m = k > 0 ? x.num_elements() / k : 0;
        if (m == 0 || n == 0) return OkStatus();
        return cpu::GgufMatmul(F, x.span<float>().data(), m,
                               reinterpret_cast<const uint8_t*>(q.data()), scale.data(), n, k,
                               out.span<float>().data(), ctx);
      }};
  return *kernel;
}

}  // namespace

bool MatchGgufComposite(const Block& block, int a, std::vector<int>& chain,
                        std::vector<Value>& operands, const FusedKernel*& kernel) {
  const Operation& op = *block.operations()[a];
  if (op.name() != "stablehlo.composite" ||
      GetStringAttr(op.attrs(), "name") != "tlaloc.gguf_linear" || op.num_operands() != 3 ||
      op.num_results() != 1)
    return false;
  const Attribute* attributes = FindAttr(op.attrs(), "composite_attributes");
  if (!attributes || attributes->kind() != Attribute::Kind::kDict) return false;
  const std::string format = GetStringAttr(attributes->as_dict(), "format");
  Value x = op.operand(0), q = op.operand(1), scale = op.operand(2);
  if (!HasType(x, ElementType::kF32) || !HasType(q, ElementType::kU8) ||
      !HasType(op.result(0), ElementType::kF32) || !scale.type().is_tensor())
    return false;
  const auto& xd = x.tensor_type().dims;
  const auto& qd = q.tensor_type().dims;
  if (xd.empty() || qd.empty()) return false;
  const int64_t n = qd[0], k = xd.back();
  // The exact layouts of one matrix [n, k] in the format (ir/quant_format.h's table, which
  // cpu::GgufMatmul's kernels follow).
  auto parsed = ParseQuantFormat(format);
  if (!parsed.ok()) return false;
  auto types = QuantStorageTypes(*parsed, {n, k});
  auto same = [](const TensorType& a, const TensorType& b) {
    return a.element_type == b.element_type && a.dims == b.dims;
  };
  if (!types.ok() || !same(q.tensor_type(), types->first) ||
      !same(scale.tensor_type(), types->second))
    return false;
  switch (*parsed) {
    case QuantFormat::kQ4_0:
      kernel = &GgufLinearKernel<QuantFormat::kQ4_0>("fused.gguf_linear_q4_0");
      break;
    case QuantFormat::kQ4_K:
      kernel = &GgufLinearKernel<QuantFormat::kQ4_K>("fused.gguf_linear_q4_k");
      break;
    case QuantFormat::kQ6_K:
      kernel = &GgufLinearKernel<QuantFormat::kQ6_K>("fused.gguf_linear_q6_k");
      break;
    case QuantFormat::kQ8_0:  // int8_linear's composite, not this one
      return false;
  }
  std::vector<int64_t> out = xd;
  out.back() = n;
  if (op.result(0).tensor_type().dims != out) return false;
  chain = {a};
  operands = {q, scale, x};
  return true;
}

}  // namespace tlaloc::interp
