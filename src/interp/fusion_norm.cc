// RMSNorm as one pass per row (fusion.h): the composite tlaloc.rms_norm {eps} (builder::RmsNorm,
// builder/composite.h) on x [..., n] (bf16 or f32) and weight [n] of x's type, whose
// decomposition is
//
//   xf = convert(x)                                  (absent when x is f32)
//   s = reduce(xf * xf, add from 0, last axis) ; reshape
//   a = s / broadcast(N) + broadcast(eps) ; r = rsqrt(a)
//   y = xf * broadcast(reshape(r))
//   y = convert(y) * broadcast_in_dim(weight)        (convert absent when x is f32)
//
// about fifteen ops and two full-size temporaries per norm, four norms per decoder layer: most of
// a decode step's small ops. Each element gets the ops' arithmetic in the ops' order: the square
// and the sum fold each row sequentially from 0 (the reduce's fast path, cpu::FoldRowF32), the
// divide by N and the add of eps (both f32, as the decomposition's constants) and rsqrt
// (vmath::RsqrtF32, exact for every input) on the row's value, then the f32 product, the
// rounding to bf16 and the bf16 product (widened, f32 multiply, rounded: the bf16 multiply op's
// rule). So the bits are the decomposition's.
#include <algorithm>
#include <vector>

#include "cpu/reduction_rows.h"
#include "cpu/vector_math.h"
#include "fusion.h"
#include "ops/reduction_kernels.h"

namespace tlaloc::interp {

namespace {

using ops::BinaryKind;

bool IsTensorOf(Value v, ElementType et) {
  return v.type().is_tensor() && v.tensor_type().element_type == et;
}

constexpr int kSumRows = 8;

struct NormShape {
  int64_t n = 0;     // the normalised axis
  bool low = false;  // x is bf16: widened first, the result rounded back
  float count = 0;   // n in f32, the mean's divisor
  float eps = 0;     // eps in f32, as the decomposition's constant
};

// Rows [begin, end) of x; `sums` holds their row values (s / N + eps, then rsqrt) in place.
void NormRows(const NormShape& shape, std::span<const Literal> in, Literal& out, int64_t begin,
              int64_t end) {
  const int64_t n = shape.n, rows = end - begin;
  const float init = 0.0f, count = shape.count, eps = shape.eps;
  std::vector<float> row(static_cast<size_t>(n)), squares(static_cast<size_t>(kSumRows * n));
  std::vector<float> weight;
  std::vector<float> factor(static_cast<size_t>(rows));
  if (shape.low) {
    weight.resize(static_cast<size_t>(n));
    cpu::vmath::Bf16ToF32(reinterpret_cast<const uint16_t*>(in[1].data()), weight.data(), n);
  }
  auto load = [&](int64_t r) {  // row r of x, in f32
    if (shape.low)
      cpu::vmath::Bf16ToF32(reinterpret_cast<const uint16_t*>(in[0].data()) + r * n, row.data(), n);
    else
      std::copy_n(in[0].span<float>().data() + r * n, n, row.data());
  };
  // Eight rows' sums at a time, interleaved element by element so their add latencies overlap;
  // each row still folds sequentially from the init (the reduce's FoldRows<8>).
  for (int64_t r0 = 0; r0 < rows; r0 += kSumRows) {
    const int64_t group = std::min<int64_t>(kSumRows, rows - r0);
    for (int64_t g = 0; g < group; ++g) {
      load(begin + r0 + g);
      float* sq = squares.data() + g * n;
      for (int64_t j = 0; j < n; ++j) sq[j] = row[j] * row[j];
    }
    float acc[kSumRows];
    for (int64_t g = 0; g < group; ++g) acc[g] = init;
    if (group == kSumRows) {
      for (int64_t j = 0; j < n; ++j)
        for (int g = 0; g < kSumRows; ++g) acc[g] = acc[g] + squares[g * n + j];
    } else {
      for (int64_t g = 0; g < group; ++g)
        acc[g] = cpu::FoldRowF32(BinaryKind::kAdd, squares.data() + g * n, n, init);
    }
    for (int64_t g = 0; g < group; ++g) factor[r0 + g] = acc[g] / count + eps;
  }
  cpu::vmath::RsqrtF32(factor.data(), factor.data(), rows);
  std::vector<uint16_t> rounded(shape.low ? static_cast<size_t>(n) : 0);
  for (int64_t r = 0; r < rows; ++r) {
    load(begin + r);  // before the row is written: the result may be x's buffer
    const float f = factor[r];
    for (int64_t j = 0; j < n; ++j) row[j] = row[j] * f;
    if (shape.low) {
      auto* y = reinterpret_cast<uint16_t*>(out.data()) + (begin + r) * n;
      cpu::vmath::F32ToBf16(row.data(), rounded.data(), n);
      cpu::vmath::Bf16ToF32(rounded.data(), row.data(), n);
      for (int64_t j = 0; j < n; ++j) row[j] = row[j] * weight[j];
      cpu::vmath::F32ToBf16(row.data(), y, n);
    } else {
      float* y = out.span<float>().data() + (begin + r) * n;
      const float* w = in[1].span<float>().data();
      for (int64_t j = 0; j < n; ++j) y[j] = row[j] * w[j];
    }
  }
}

}  // namespace

std::shared_ptr<const FusedKernel> RmsNormCompositeKernel(const Operation& op) {
  if (op.num_operands() != 2 || op.num_results() != 1) return nullptr;
  Value x = op.operand(0), w = op.operand(1);
  const bool low = IsTensorOf(x, ElementType::kBF16);
  if (!low && !IsTensorOf(x, ElementType::kF32)) return nullptr;
  const TensorType& xt = x.tensor_type();
  if (xt.rank() < 1 || xt.dims.back() <= 0 || !(op.result(0).type() == x.type()) ||
      !(w.type().is_tensor() && w.tensor_type() == TensorType(xt.element_type, {xt.dims.back()})))
    return nullptr;
  const Attribute* attributes = FindAttr(op.attrs(), "composite_attributes");
  if (!attributes || attributes->kind() != Attribute::Kind::kDict) return nullptr;
  const Attribute* eps = FindAttr(attributes->as_dict(), "eps");
  if (!eps || eps->kind() != Attribute::Kind::kFloat) return nullptr;
  NormShape shape;
  shape.n = xt.dims.back();
  shape.low = low;
  shape.count = static_cast<float>(static_cast<double>(shape.n));
  shape.eps = static_cast<float>(eps->as_float());
  return std::make_shared<const FusedKernel>(FusedKernel{
      "fused.rms_norm", [shape](std::span<const Literal> in, Literal& out, EvalContext& ctx) {
        const int64_t rows = in[0].num_elements() / shape.n;
        ctx.ParallelFor(rows, std::max<int64_t>(1, 16384 / shape.n),
                        [&](int64_t begin, int64_t end) { NormRows(shape, in, out, begin, end); });
        return OkStatus();
      }});
}

}  // namespace tlaloc::interp
