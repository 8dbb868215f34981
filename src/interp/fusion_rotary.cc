// Rotary position embedding as one pass per row (fusion.h): the composite tlaloc.rotary that
// nn::ApplyRotary emits on x [..., H, D] (bf16 or f32) with cos and sin f32 [..., D], whose
// decomposition is
//
//   xf = convert(x)                                          (absent when x is f32)
//   rotated = concatenate(negate(slice(xf, D/2..D)), slice(xf, 0..D/2))
//   y = xf * broadcast(reshape*(cos)) + rotated * broadcast(reshape*(sin))
//   y = convert(y)                                           (absent when x is f32)
//
// about fifteen ops for q and again for k in every layer. Each element is the ops' arithmetic:
// two f32 products (the rotated half negated exactly) and their f32 sum, rounded once to bf16 by
// the convert's rule, so the bits are the decomposition's.
#include <algorithm>
#include <vector>

#include "cpu/vector_math.h"
#include "fusion.h"

namespace tlaloc::interp {

namespace {

bool IsTensorOf(Value v, ElementType et) {
  return v.type().is_tensor() && v.tensor_type().element_type == et;
}

struct RotaryShape {
  int64_t d = 0, heads = 0;
  bool low = false;  // x is bf16: widened first, the result rounded back
};

void RotaryRows(const RotaryShape& shape, std::span<const Literal> in, Literal& out, int64_t begin,
                int64_t end) {
  const int64_t d = shape.d, half = d / 2;
  const float* cos = in[1].span<float>().data();
  const float* sin = in[2].span<float>().data();
  std::vector<float> row(static_cast<size_t>(d)), y(static_cast<size_t>(d));
  for (int64_t r = begin; r < end; ++r) {
    if (shape.low)
      cpu::vmath::Bf16ToF32(reinterpret_cast<const uint16_t*>(in[0].data()) + r * d, row.data(), d);
    else
      std::copy_n(in[0].span<float>().data() + r * d, d, row.data());
    const float* c = cos + (r / shape.heads) * d;
    const float* s = sin + (r / shape.heads) * d;
    for (int64_t j = 0; j < half; ++j) {
      const float a = row[j] * c[j], b = -row[j + half] * s[j];
      y[j] = a + b;
    }
    for (int64_t j = half; j < d; ++j) {
      const float a = row[j] * c[j], b = row[j - half] * s[j];
      y[j] = a + b;
    }
    if (shape.low)
      cpu::vmath::F32ToBf16(y.data(), reinterpret_cast<uint16_t*>(out.data()) + r * d, d);
    else
      std::copy_n(y.data(), d, out.span<float>().data() + r * d);
  }
}

}  // namespace

std::shared_ptr<const FusedKernel> RotaryCompositeKernel(const Operation& op) {
  if (op.num_operands() != 3 || op.num_results() != 1) return nullptr;
  Value x = op.operand(0), cos = op.operand(1), sin = op.operand(2);
  RotaryShape shape;
  shape.low = IsTensorOf(x, ElementType::kBF16);
  if (!shape.low && !IsTensorOf(x, ElementType::kF32)) return nullptr;
  const TensorType& xt = x.tensor_type();
  if (xt.rank() < 2 || xt.dims.back() < 2 || xt.dims.back() % 2 != 0 ||
      !(op.result(0).type() == x.type()))
    return nullptr;
  // cos and sin [..., D]: x's shape without its heads axis, read for every head.
  std::vector<int64_t> table_dims = xt.dims;
  table_dims.erase(table_dims.end() - 2);
  for (Value t : {cos, sin})
    if (!IsTensorOf(t, ElementType::kF32) || t.tensor_type().dims != table_dims) return nullptr;
  shape.d = xt.dims.back();
  shape.heads = xt.dims[xt.rank() - 2];
  return std::make_shared<const FusedKernel>(FusedKernel{
      "fused.rotary", [shape](std::span<const Literal> in, Literal& out, EvalContext& ctx) {
        const int64_t rows = in[0].num_elements() / shape.d;
        ctx.ParallelFor(
            rows, std::max<int64_t>(1, 16384 / shape.d),
            [&](int64_t begin, int64_t end) { RotaryRows(shape, in, out, begin, end); });
        return OkStatus();
      }});
}

}  // namespace tlaloc::interp
