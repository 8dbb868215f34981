// SwiGLU's gate as one pass (fusion.h): the composite tlaloc.silu_and_mul that nn::SiluAndMul
// emits on gate and up [..., n] (bf16 or f32, one type), whose decomposition is
//
//   l = logistic(g) ; t = g * l ; y = t * u
//
// three passes over [T, 3072] per layer and two temporaries. Each element gets the ops'
// arithmetic in their order and types: the logistic kernel on the widened gate (vmath::
// LogisticF32, exact for every input), rounded to bf16, then each product in f32 rounded to bf16
// (the bf16 multiply op's rule); for f32, the same without the roundings. So the bits are the
// decomposition's.
#include <algorithm>

#include "cpu/vector_math.h"
#include "fusion.h"

namespace tlaloc::interp {

namespace {

bool IsTensorOf(Value v, ElementType et) {
  return v.type().is_tensor() && v.tensor_type().element_type == et;
}

// Elements [begin, end): bf16 (`low`) or f32 gate and up into the result.
void SiluMulRange(bool low, std::span<const Literal> in, Literal& out, int64_t begin, int64_t end) {
  constexpr int64_t kBlock = 512;
  float g[kBlock], l[kBlock], u[kBlock];
  uint16_t bits[kBlock];
  for (int64_t i = begin; i < end; i += kBlock) {
    const int64_t m = std::min(kBlock, end - i);
    if (low) {
      const auto* pg = reinterpret_cast<const uint16_t*>(in[0].data()) + i;
      const auto* pu = reinterpret_cast<const uint16_t*>(in[1].data()) + i;
      cpu::vmath::Bf16ToF32(pg, g, m);
      cpu::vmath::Bf16ToF32(pu, u, m);
      cpu::vmath::LogisticF32(g, l, m);
      cpu::vmath::F32ToBf16(l, bits, m);  // l = logistic(g) in bf16
      cpu::vmath::Bf16ToF32(bits, l, m);
      for (int64_t k = 0; k < m; ++k) l[k] = g[k] * l[k];
      cpu::vmath::F32ToBf16(l, bits, m);  // t = g * l in bf16
      cpu::vmath::Bf16ToF32(bits, l, m);
      for (int64_t k = 0; k < m; ++k) l[k] = l[k] * u[k];
      cpu::vmath::F32ToBf16(l, reinterpret_cast<uint16_t*>(out.data()) + i, m);
    } else {
      std::copy_n(in[0].span<float>().data() + i, m, g);
      std::copy_n(in[1].span<float>().data() + i, m, u);
      cpu::vmath::LogisticF32(g, l, m);
      float* y = out.span<float>().data() + i;
      for (int64_t k = 0; k < m; ++k) {
        const float t = g[k] * l[k];
        y[k] = t * u[k];
      }
    }
  }
}

}  // namespace

std::shared_ptr<const FusedKernel> SiluMulCompositeKernel(const Operation& op) {
  if (op.num_operands() != 2 || op.num_results() != 1) return nullptr;
  Value g = op.operand(0), u = op.operand(1);
  const bool low = IsTensorOf(g, ElementType::kBF16);
  if (!low && !IsTensorOf(g, ElementType::kF32)) return nullptr;
  if (!(u.type() == g.type()) || !(op.result(0).type() == g.type())) return nullptr;
  return std::make_shared<const FusedKernel>(FusedKernel{
      "fused.silu_mul", [low](std::span<const Literal> in, Literal& out, EvalContext& ctx) {
        ctx.ParallelFor(out.num_elements(), 16384, [&](int64_t begin, int64_t end) {
          SiluMulRange(low, in, out, begin, end);
        });
        return OkStatus();
      }});
}

}  // namespace tlaloc::interp
