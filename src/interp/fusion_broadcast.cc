// A broadcast read in place (fusion.h): broadcast_in_dim of an f32 operand whose only user is
// an f32 add, subtract, multiply or divide,
//   b = broadcast_in_dim(s, dims = [d, d+1, ..., d+k-1]) ; y = x OP b   (or b OP x)
// runs as one kernel on (x, s) that reads s with a stride of 0 along the repeated dimensions
// instead of writing the full-size b first: the cross-entropy's row maximum subtracted from
// [rows, vocab] logits, its softmax-gradient scale, AdamW's scalar hyperparameters over each
// weight. Each element is the same one IEEE operation on the same two f32 values, so y has the
// unfused ops' bits (a NaN result's payload, when both inputs are NaN, is the hardware's
// choice of operand, as it is for the elementwise op itself).
#include <algorithm>

#include "fusion.h"

namespace tlaloc::interp {

namespace {

enum class ArithKind { kAdd, kSubtract, kMultiply, kDivide };

bool IsF32Tensor(Value v) {
  return v.type().is_tensor() && v.tensor_type().element_type == ElementType::kF32;
}

template <ArithKind kKind>
inline float Apply(float a, float b) {
  if constexpr (kKind == ArithKind::kAdd) return a + b;
  if constexpr (kKind == ArithKind::kSubtract) return a - b;
  if constexpr (kKind == ArithKind::kMultiply) return a * b;
  return a / b;
}

// y[i] = x[i] OP s[(i / inner) % count] (or s[...] OP x[i] when `scalar_left`), over the flat
// index range [begin, end).
template <ArithKind kKind, bool kScalarLeft>
void ApplyRange(const float* x, const float* s, float* y, int64_t inner, int64_t count,
                int64_t begin, int64_t end) {
  if (inner == 1) {  // s tiles along the innermost dimensions: a vector against a vector
    int64_t i = begin;
    while (i < end) {
      const int64_t c0 = i % count, run = std::min(end - i, count - c0);
      const float* sc = s + c0;
      for (int64_t j = 0; j < run; ++j)
        y[i + j] = kScalarLeft ? Apply<kKind>(sc[j], x[i + j]) : Apply<kKind>(x[i + j], sc[j]);
      i += run;
    }
    return;
  }
  int64_t i = begin;
  while (i < end) {  // runs of `inner` elements that share one value of s
    const int64_t seg = i / inner, run = std::min(end - i, (seg + 1) * inner - i);
    const float v = s[seg % count];
    for (int64_t j = 0; j < run; ++j)
      y[i + j] = kScalarLeft ? Apply<kKind>(v, x[i + j]) : Apply<kKind>(x[i + j], v);
    i += run;
  }
}

template <ArithKind kKind, bool kScalarLeft>
FusedKernel MakeKernel(std::string name, int64_t inner, int64_t count) {
  return FusedKernel{
      std::move(name),
      [inner, count](std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
        const float* x = in[0].span<float>().data();
        const float* s = in[1].span<float>().data();
        float* y = out.span<float>().data();
        ctx.ParallelFor(out.num_elements(), 16384, [&](int64_t begin, int64_t end) {
          ApplyRange<kKind, kScalarLeft>(x, s, y, inner, count, begin, end);
        });
        return OkStatus();
      }};
}

}  // namespace

std::shared_ptr<const FusedKernel> MatchBroadcastBinary(const Block& block, const BlockUses& uses,
                                                        int a, std::vector<int>& chain,
                                                        std::vector<Value>& operands) {
  const auto& ops = block.operations();
  const Operation& bop = *ops[a];
  if (bop.name() != "stablehlo.broadcast_in_dim" || bop.num_operands() != 1) return nullptr;
  Value s = bop.operand(0), b = bop.result(0);
  if (!IsF32Tensor(s) || !IsF32Tensor(b)) return nullptr;
  const TensorType& bt = b.tensor_type();
  const TensorType& st = s.tensor_type();
  // The operand's dimensions, less those of size 1 that expand, are one run of consecutive
  // result dimensions of the same sizes.
  const std::vector<int64_t> all = GetIntArrayAttr(bop.attrs(), "broadcast_dimensions");
  if (static_cast<int64_t>(all.size()) != st.rank()) return nullptr;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] < 0 || all[i] >= bt.rank()) return nullptr;
    if (st.dims[i] == bt.dims[all[i]])
      dims.push_back(all[i]);
    else if (st.dims[i] != 1)
      return nullptr;
  }
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != dims[0] + static_cast<int64_t>(i)) return nullptr;
  int64_t inner = 1;
  for (int64_t d = dims.empty() ? 0 : dims.back() + 1; d < bt.rank(); ++d) inner *= bt.dims[d];
  const int64_t count = st.num_elements();
  if (inner <= 0 || count <= 0) return nullptr;
  const int u = uses.OnlyUser(b);
  if (u < 0) return nullptr;
  const Operation& uop = *ops[u];
  ArithKind kind;
  if (uop.name() == "stablehlo.add")
    kind = ArithKind::kAdd;
  else if (uop.name() == "stablehlo.subtract")
    kind = ArithKind::kSubtract;
  else if (uop.name() == "stablehlo.multiply")
    kind = ArithKind::kMultiply;
  else if (uop.name() == "stablehlo.divide")
    kind = ArithKind::kDivide;
  else
    return nullptr;
  if (uop.num_operands() != 2 || !(uop.result(0).tensor_type() == bt)) return nullptr;
  const bool left = uop.operand(0) == b;
  Value x = left ? uop.operand(1) : uop.operand(0);
  if (x == b || !(x.type() == b.type())) return nullptr;
  chain = {a, u};
  operands = {x, s};
  const std::string name = "fused.broadcast_" + uop.name().substr(uop.name().find('.') + 1);
  auto make = [&]<ArithKind K>() -> std::shared_ptr<const FusedKernel> {
    return std::make_shared<const FusedKernel>(left ? MakeKernel<K, true>(name, inner, count)
                                                    : MakeKernel<K, false>(name, inner, count));
  };
  switch (kind) {
    case ArithKind::kAdd:
      return make.template operator()<ArithKind::kAdd>();
    case ArithKind::kSubtract:
      return make.template operator()<ArithKind::kSubtract>();
    case ArithKind::kMultiply:
      return make.template operator()<ArithKind::kMultiply>();
    case ArithKind::kDivide:
      return make.template operator()<ArithKind::kDivide>();
  }
  return nullptr;
}

}  // namespace tlaloc::interp
