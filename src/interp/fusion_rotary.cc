// Rotary position embedding as one pass per row (fusion.h), the chain nn::ApplyRotary emits on
// x [..., H, D] (bf16 or f32) with cos and sin [..., D]:
//
//   xf = convert(x)                                          (absent when x is f32)
//   rotated = concatenate(negate(slice(xf, D/2..D)), slice(xf, 0..D/2))
//   y = xf * broadcast(reshape*(cos)) + rotated * broadcast(reshape*(sin))
//   y = convert(y)                                           (absent when x is f32)
//
// about fifteen ops for q and again for k in every layer. Each element is the ops' arithmetic:
// two f32 products (the rotated half negated exactly) and their f32 sum, rounded once to bf16 by
// the convert's rule, so the bits are the unfused ops'.
#include <algorithm>
#include <vector>

#include "fusion.h"
#include "ops/vector_math.h"

namespace tlaloc::interp {

namespace {

bool IsTensorOf(Value v, ElementType et) {
  return v.type().is_tensor() && v.tensor_type().element_type == et;
}

int IndexOf(const Block& block, const Operation* op, int before) {
  const auto& ops = block.operations();
  for (int i = before - 1; op && i >= 0; --i)
    if (ops[i].get() == op) return i;
  return -1;
}

// slice(xf) of the last axis [begin, end), whole along the others, stride 1.
bool IsLastAxisSlice(const Operation& op, Value xf, int64_t begin, int64_t end) {
  if (op.name() != "stablehlo.slice" || !(op.operand(0) == xf)) return false;
  const TensorType& t = xf.tensor_type();
  std::vector<int64_t> start(t.rank(), 0), limit = t.dims, strides(t.rank(), 1);
  start.back() = begin;
  limit.back() = end;
  const std::vector<int64_t> given = GetIntArrayAttr(op.attrs(), "strides");
  return GetIntArrayAttr(op.attrs(), "start_indices") == start &&
         GetIntArrayAttr(op.attrs(), "limit_indices") == limit &&
         (given.empty() || given == strides);
}

// `v` = broadcast_in_dim(reshape*(table)) of a [..., D] table over x's heads axis (rank - 2),
// used only by `user`. Adds the broadcast and the reshapes only it uses to `chain`; returns the
// table (the first reshape's operand), or an invalid value.
Value TableBroadcast(const Block& block, const BlockUses& uses, Value v, int user,
                     const TensorType& xt, std::vector<int>& chain) {
  const Operation* b = v.producer();
  if (!b || b->name() != "stablehlo.broadcast_in_dim" || uses.OnlyUser(v) != user ||
      !IsTensorOf(v, ElementType::kF32))
    return Value();
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < xt.rank(); ++d)
    if (d != xt.rank() - 2) dims.push_back(d);
  std::vector<int64_t> table_dims = xt.dims;
  table_dims.erase(table_dims.end() - 2);
  Value t = b->operand(0);
  if (GetIntArrayAttr(b->attrs(), "broadcast_dimensions") != dims ||
      t.tensor_type().dims != table_dims)
    return Value();
  int at = IndexOf(block, b, user);
  if (at < 0) return Value();
  chain.push_back(at);
  // Reshapes between the table and the broadcast keep its row-major bytes: read it in place.
  while (t.producer() && t.producer()->name() == "stablehlo.reshape" && uses.OnlyUser(t) == at) {
    at = IndexOf(block, t.producer(), at);
    if (at < 0) break;
    chain.push_back(at);
    t = t.producer()->operand(0);
  }
  return t;
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
      ops::vmath::Bf16ToF32(reinterpret_cast<const uint16_t*>(in[0].data()) + r * d, row.data(), d);
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
      ops::vmath::F32ToBf16(y.data(), reinterpret_cast<uint16_t*>(out.data()) + r * d, d);
    else
      std::copy_n(y.data(), d, out.span<float>().data() + r * d);
  }
}

}  // namespace

std::shared_ptr<const FusedKernel> MatchRotary(const Block& block, const BlockUses& uses, int a,
                                               std::vector<int>& chain,
                                               std::vector<Value>& operands) {
  const auto& ops = block.operations();
  const Operation& first = *ops[a];
  RotaryShape shape;
  Value x, xf;
  chain.clear();
  if (first.name() == "stablehlo.convert" && IsTensorOf(first.operand(0), ElementType::kBF16) &&
      IsTensorOf(first.result(0), ElementType::kF32)) {
    x = first.operand(0);
    xf = first.result(0);
    shape.low = true;
    chain.push_back(a);
  } else if (first.name() == "stablehlo.slice" && IsTensorOf(first.operand(0), ElementType::kF32)) {
    x = xf = first.operand(0);
  } else {
    return nullptr;
  }
  const TensorType& xt = xf.tensor_type();
  if (xt.rank() < 2 || xt.dims.back() < 2 || xt.dims.back() % 2 != 0) return nullptr;
  shape.d = xt.dims.back();
  shape.heads = xt.dims[xt.rank() - 2];
  const int64_t half = shape.d / 2;
  // xf's users: the two halves' slices and the cos product (for bf16, nothing else).
  int lo = -1, hi = -1, cos_mul = -1;
  for (int u : uses.Users(xf)) {
    if (IsLastAxisSlice(*ops[u], xf, 0, half))
      lo = u;
    else if (IsLastAxisSlice(*ops[u], xf, half, shape.d))
      hi = u;
    else if (ops[u]->name() == "stablehlo.multiply" && ops[u]->operand(0) == xf)
      cos_mul = u;
  }
  if (lo < 0 || hi < 0 || cos_mul < 0 || (shape.low && uses.Users(xf).size() != 3)) return nullptr;
  if (!shape.low && a != std::min(lo, hi)) return nullptr;  // anchored at the first slice
  const int neg = uses.OnlyUser(ops[hi]->result(0));
  if (neg < 0 || ops[neg]->name() != "stablehlo.negate") return nullptr;
  const int cat = uses.OnlyUser(ops[neg]->result(0));
  if (cat < 0 || uses.OnlyUser(ops[lo]->result(0)) != cat ||
      ops[cat]->name() != "stablehlo.concatenate" || ops[cat]->num_operands() != 2 ||
      !(ops[cat]->operand(0) == ops[neg]->result(0)) ||
      !(ops[cat]->operand(1) == ops[lo]->result(0)) ||
      GetIntAttr(ops[cat]->attrs(), "dimension", -1) != xt.rank() - 1)
    return nullptr;
  const int sin_mul = uses.OnlyUser(ops[cat]->result(0));
  if (sin_mul < 0 || ops[sin_mul]->name() != "stablehlo.multiply" ||
      !(ops[sin_mul]->operand(0) == ops[cat]->result(0)))
    return nullptr;
  const int sum = uses.OnlyUser(ops[cos_mul]->result(0));
  if (sum < 0 || uses.OnlyUser(ops[sin_mul]->result(0)) != sum ||
      ops[sum]->name() != "stablehlo.add" || !(ops[sum]->operand(0) == ops[cos_mul]->result(0)) ||
      !(ops[sum]->operand(1) == ops[sin_mul]->result(0)))
    return nullptr;
  chain.insert(chain.end(), {lo, hi, neg, cat, cos_mul, sin_mul, sum});
  Value cos = TableBroadcast(block, uses, ops[cos_mul]->operand(1), cos_mul, xt, chain);
  Value sin = TableBroadcast(block, uses, ops[sin_mul]->operand(1), sin_mul, xt, chain);
  if (!cos || !sin || !IsTensorOf(cos, ElementType::kF32) || !IsTensorOf(sin, ElementType::kF32))
    return nullptr;
  if (shape.low) {
    const int back = uses.OnlyUser(ops[sum]->result(0));
    if (back < 0 || ops[back]->name() != "stablehlo.convert" ||
        !(ops[back]->result(0).type() == x.type()))
      return nullptr;
    chain.push_back(back);
  }
  operands = {x, cos, sin};
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
