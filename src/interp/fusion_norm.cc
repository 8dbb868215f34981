// RMSNorm as one pass per row (fusion.h), the chain builder::RmsNorm emits over x [..., n]
// (bf16 or f32):
//
//   xf = convert(x)                                  (absent when x is f32)
//   s = reduce(xf * xf, add, last axis) ; reshape?
//   a = s / broadcast(N) + broadcast(eps) ; r = rsqrt(a)
//   y = xf * broadcast(reshape?(r))
//   y = convert(y) * broadcast_in_dim(weight)        (convert absent when x is f32; the weight
//                                                     product optional)
//
// about fifteen ops and two full-size temporaries per norm, four norms per decoder layer: most of
// a decode step's small ops. Each element gets the ops' arithmetic in the ops' order: the square
// and the sum fold each row sequentially from the reduce's init (the reduce's fast path,
// ops::FoldRowF32), the divide, add and rsqrt (vmath::RsqrtF32, exact for every input) on the
// row's value, then the f32 product, the rounding to bf16 and the bf16 product (widened, f32
// multiply, rounded: the bf16 multiply op's rule). So the bits are the unfused ops'.
#include <algorithm>
#include <vector>

#include "fusion.h"
#include "ops/reduction_kernels.h"
#include "ops/vector_math.h"

namespace tlaloc::interp {

namespace {

using ops::BinaryKind;

bool IsTensorOf(Value v, ElementType et) {
  return v.type().is_tensor() && v.tensor_type().element_type == et;
}

bool IsBinary(const Operation& op, const char* name) {
  return op.name() == name && op.num_operands() == 2 && op.num_results() == 1;
}

// The scalar broadcast feeding `v`: v = broadcast_in_dim(s) of a rank-0 f32 s, used only by
// `user`. Returns the broadcast's index (and s), or -1.
int ScalarBroadcast(const Block& block, const BlockUses& uses, Value v, int user, Value& s) {
  const Operation* op = v.producer();
  if (!op || op->name() != "stablehlo.broadcast_in_dim" || uses.OnlyUser(v) != user) return -1;
  if (op->operand(0).tensor_type().rank() != 0 || !IsTensorOf(op->operand(0), ElementType::kF32))
    return -1;
  const auto& ops = block.operations();
  for (int i = user - 1; i >= 0; --i)
    if (ops[i].get() == op) {
      s = op->operand(0);
      return i;
    }
  return -1;
}

constexpr int kSumRows = 8;

struct NormShape {
  int64_t n = 0;          // the normalised axis
  bool low = false;       // x is bf16: widened first, the result rounded back
  bool weighted = false;  // the result is multiplied by a weight [n]
};

// Rows [begin, end) of x; `sums` holds their row values (s / N + eps, then rsqrt) in place.
void NormRows(const NormShape& shape, std::span<const Literal> in, Literal& out, int64_t begin,
              int64_t end) {
  const int64_t n = shape.n, rows = end - begin;
  const float init = in[1].span<float>()[0];
  const float count = in[2].span<float>()[0], eps = in[3].span<float>()[0];
  std::vector<float> row(static_cast<size_t>(n)), squares(static_cast<size_t>(kSumRows * n));
  std::vector<float> weight;
  std::vector<float> factor(static_cast<size_t>(rows));
  if (shape.weighted && shape.low) {
    weight.resize(static_cast<size_t>(n));
    ops::vmath::Bf16ToF32(reinterpret_cast<const uint16_t*>(in[4].data()), weight.data(), n);
  }
  auto load = [&](int64_t r) {  // row r of x, in f32
    if (shape.low)
      ops::vmath::Bf16ToF32(reinterpret_cast<const uint16_t*>(in[0].data()) + r * n, row.data(), n);
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
        acc[g] = ops::FoldRowF32(BinaryKind::kAdd, squares.data() + g * n, n, init);
    }
    for (int64_t g = 0; g < group; ++g) factor[r0 + g] = acc[g] / count + eps;
  }
  ops::vmath::RsqrtF32(factor.data(), factor.data(), rows);
  std::vector<uint16_t> rounded(shape.low ? static_cast<size_t>(n) : 0);
  for (int64_t r = 0; r < rows; ++r) {
    load(begin + r);  // before the row is written: the result may be x's buffer
    const float f = factor[r];
    for (int64_t j = 0; j < n; ++j) row[j] = row[j] * f;
    if (shape.low) {
      auto* y = reinterpret_cast<uint16_t*>(out.data()) + (begin + r) * n;
      if (!shape.weighted) {
        ops::vmath::F32ToBf16(row.data(), y, n);
        continue;
      }
      ops::vmath::F32ToBf16(row.data(), rounded.data(), n);
      ops::vmath::Bf16ToF32(rounded.data(), row.data(), n);
      for (int64_t j = 0; j < n; ++j) row[j] = row[j] * weight[j];
      ops::vmath::F32ToBf16(row.data(), y, n);
    } else {
      float* y = out.span<float>().data() + (begin + r) * n;
      const float* w = shape.weighted ? in[4].span<float>().data() : nullptr;
      for (int64_t j = 0; j < n; ++j) y[j] = w ? row[j] * w[j] : row[j];
    }
  }
}

}  // namespace

std::shared_ptr<const FusedKernel> MatchRmsNorm(const Block& block, const BlockUses& uses, int a,
                                                std::vector<int>& chain,
                                                std::vector<Value>& operands) {
  const auto& ops = block.operations();
  const Operation& first = *ops[a];
  NormShape shape;
  Value x, xf;
  chain.clear();
  if (first.name() == "stablehlo.convert" && first.num_operands() == 1 &&
      IsTensorOf(first.operand(0), ElementType::kBF16) &&
      IsTensorOf(first.result(0), ElementType::kF32)) {
    x = first.operand(0);
    xf = first.result(0);
    shape.low = true;
    chain.push_back(a);
  } else if (IsBinary(first, "stablehlo.multiply") && first.operand(0) == first.operand(1) &&
             IsTensorOf(first.operand(0), ElementType::kF32)) {
    x = xf = first.operand(0);
  } else {
    return nullptr;
  }
  const TensorType& xt = xf.tensor_type();
  if (xt.rank() < 1 || xt.dims.back() <= 0) return nullptr;
  shape.n = xt.dims.back();
  int square = a, scale = -1;
  if (shape.low) {
    // The widened x feeds the square (twice) and the scaling, nothing else. (An f32 x is an
    // operand of the kernel: it may have other users, the residual stream's sum.)
    const std::vector<int>& xf_users = uses.Users(xf);
    if (xf_users.size() != 3 || xf_users[0] != xf_users[1]) return nullptr;
    square = xf_users[0];
    scale = xf_users[2];
    if (!IsBinary(*ops[square], "stablehlo.multiply") || !(ops[square]->operand(0) == xf) ||
        !(ops[square]->operand(1) == xf))
      return nullptr;
    chain.push_back(square);
  } else {
    chain.push_back(a);
  }
  const int sum = uses.OnlyUser(ops[square]->result(0));
  if (sum < 0 || !IsLastAxisReduce(*ops[sum], BinaryKind::kAdd) ||
      !(ops[sum]->operand(0) == ops[square]->result(0)))
    return nullptr;
  chain.push_back(sum);
  Value v = ops[sum]->result(0);
  int i = uses.OnlyUser(v);
  while (i >= 0 && ops[i]->name() == "stablehlo.reshape") {
    chain.push_back(i);
    v = ops[i]->result(0);
    i = uses.OnlyUser(v);
  }
  // s / broadcast(N) + broadcast(eps), then rsqrt, all of the row's shape.
  Value count, eps;
  if (i < 0 || !IsBinary(*ops[i], "stablehlo.divide") || !(ops[i]->operand(0) == v)) return nullptr;
  const int count_b = ScalarBroadcast(block, uses, ops[i]->operand(1), i, count);
  if (count_b < 0) return nullptr;
  chain.push_back(count_b);
  chain.push_back(i);
  v = ops[i]->result(0);
  i = uses.OnlyUser(v);
  if (i < 0 || !IsBinary(*ops[i], "stablehlo.add") || !(ops[i]->operand(0) == v)) return nullptr;
  const int eps_b = ScalarBroadcast(block, uses, ops[i]->operand(1), i, eps);
  if (eps_b < 0) return nullptr;
  chain.push_back(eps_b);
  chain.push_back(i);
  v = ops[i]->result(0);
  i = uses.OnlyUser(v);
  if (i < 0 || ops[i]->name() != "stablehlo.rsqrt" ||
      !IsTensorOf(ops[i]->result(0), ElementType::kF32))
    return nullptr;
  chain.push_back(i);
  const int spread = RowBroadcast(block, uses, ops[i]->result(0), xt, chain);
  if (spread < 0) return nullptr;
  const int user = uses.OnlyUser(ops[spread]->result(0));
  if (user < 0 || (scale >= 0 && user != scale)) return nullptr;
  scale = user;
  const Operation& scaled = *ops[scale];
  if (!IsBinary(scaled, "stablehlo.multiply") || !(scaled.operand(0) == xf) ||
      !(scaled.operand(1) == ops[spread]->result(0)))
    return nullptr;
  chain.push_back(scale);
  v = scaled.result(0);
  if (shape.low) {
    i = uses.OnlyUser(v);
    if (i < 0 || ops[i]->name() != "stablehlo.convert" || !(ops[i]->result(0).type() == x.type()))
      return nullptr;
    chain.push_back(i);
    v = ops[i]->result(0);
  }
  operands = {x, ops[sum]->operand(1), count, eps};
  // The weight's product: y * broadcast_in_dim(w [n], dims = [rank - 1]), w of x's type.
  i = uses.OnlyUser(v);
  if (i >= 0 && IsBinary(*ops[i], "stablehlo.multiply") && ops[i]->operand(0) == v) {
    Value b = ops[i]->operand(1);
    const Operation* bop = b.producer();
    if (bop && bop->name() == "stablehlo.broadcast_in_dim" && uses.OnlyUser(b) == i &&
        bop->operand(0).type().is_tensor() &&
        bop->operand(0).tensor_type() == TensorType(x.tensor_type().element_type, {shape.n}) &&
        GetIntArrayAttr(bop->attrs(), "broadcast_dimensions") ==
            std::vector<int64_t>{xt.rank() - 1}) {
      for (int k = i - 1; k >= 0; --k)
        if (ops[k].get() == bop) {
          chain.push_back(k);
          chain.push_back(i);
          operands.push_back(bop->operand(0));
          shape.weighted = true;
          break;
        }
    }
  }
  const std::string name = "fused.rms_norm";
  return std::make_shared<const FusedKernel>(FusedKernel{
      name, [shape](std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
        const int64_t rows = in[0].num_elements() / shape.n;
        ctx.ParallelFor(rows, std::max<int64_t>(1, 16384 / shape.n),
                        [&](int64_t begin, int64_t end) { NormRows(shape, in, out, begin, end); });
        return OkStatus();
      }});
}

}  // namespace tlaloc::interp
