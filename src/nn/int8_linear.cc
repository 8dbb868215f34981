// The program forms of an int8 product (int8_linear.h), each a stablehlo.composite. The exact
// form's decomposition is the dequantising chain. The q8_0 form's is written so that running it
// op by op gives the bits of the interpreter's VNNI kernel (cpu/reduction_matmul_q8.h), which
// takes the same steps: the f16 scale, round half to even, exact int32 block sums, the block's
// product rounded on its own and added to the row's sum in block order starting from 0 (the
// reduce over the leading block axis runs in that order in the interpreter).
#include "tlaloc/nn/int8_linear.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "cpu/reduction_matmul_q8.h"
#include "tlaloc/builder/composite.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/nn/layers.h"

namespace tlaloc::nn {

namespace {

constexpr int64_t kBlock = kQ8_0BlockElements;  // ir/quant_format.h's q8_0

std::atomic<int> chosen_form{-1};

// The decomposition on x [M..., K], q [N, K], scale f16 [N, K / 32] -> [M..., N].
std::vector<Tensor> Decomposition(const std::vector<Tensor>& a) {
  const Tensor &x = a[0], &w = a[1], &scale = a[2];
  OpBuilder& b = *x.builder();
  const int64_t k = x.dim(-1), n = w.dim(0), nb = k / kBlock;
  int64_t m = 1;
  for (int64_t i = 0; i + 1 < x.rank(); ++i) m *= x.dim(i);
  Tensor xb = Reshape(x, {m, nb, kBlock});
  Tensor amax = ReduceMax(Abs(xb), {2});  // [M, NB]
  Tensor dx = Convert(Convert(amax / 127.0, ElementType::kF16), ElementType::kF32);
  Tensor inv = Where(Eq(amax, Zeros(b, {m, nb})), Zeros(b, {m, nb}), Full(b, {m, nb}, 127) / amax);
  Tensor scaled = xb * BroadcastInDim(inv, {m, nb, kBlock}, {0, 1});
  Tensor rounded = Tensor(b.CreateOne("stablehlo.round_nearest_even", {scaled.value()}), &b);
  Tensor q8 = Convert(Clamp(Scalar(b, -127), rounded, Scalar(b, 127)), ElementType::kS8);
  Tensor wb = Reshape(w, {n, nb, kBlock});
  // [NB, M, N]: batch dimensions come first in dot_general's result.
  Tensor sums = DotGeneral(q8, wb, {1}, {1}, {2}, {2}, ElementType::kS32, /*same_as_lhs=*/false);
  Tensor dw = Convert(scale, ElementType::kF32);  // [N, NB]
  Tensor scales = BroadcastInDim(dx, {nb, m, n}, {1, 0}) * BroadcastInDim(dw, {nb, m, n}, {2, 0});
  Tensor y = Sum(Convert(sums, ElementType::kF32) * scales, {0});  // [M, N]
  std::vector<int64_t> out = x.dims();
  out.back() = n;
  return {Reshape(y, out)};
}

}  // namespace

StatusOr<Int8Form> ParseInt8Form(std::string_view text, std::string_view what) {
  if (text == "exact") return Int8Form::kExact;
  if (text == "q8_0") return Int8Form::kQ8_0;
  return InvalidArgument(std::string(what) + " is '" + std::string(text) +
                         "'; expected 'q8_0' (the default: activations rounded to int8 per "
                         "32-block, llama.cpp's Q8_0 arithmetic) or 'exact' (the dequantising "
                         "form: exact products, f32 sums)");
}

std::string_view Int8FormName(Int8Form form) { return form == Int8Form::kExact ? "exact" : "q8_0"; }

StatusOr<Int8Form> CurrentInt8Form() {
  const int chosen = chosen_form.load(std::memory_order_relaxed);
  if (chosen >= 0) return static_cast<Int8Form>(chosen);
  const char* env = std::getenv("TLALOC_INT8_ACTIVATIONS");
  if (env == nullptr || *env == '\0') return Int8Form::kQ8_0;
  return ParseInt8Form(env, "TLALOC_INT8_ACTIVATIONS");
}

void SetInt8Form(std::optional<Int8Form> form) {
  chosen_form.store(form ? static_cast<int>(*form) : -1, std::memory_order_relaxed);
  // The interpreter's kernel for what has no composite yet (nn::SparseMoe's int8 experts)
  // follows the same choice.
  if (!form)
    cpu::OverrideInt8Activations(std::nullopt);
  else
    cpu::OverrideInt8Activations(*form == Int8Form::kQ8_0 ? cpu::Int8Activations::kQ8_0
                                                          : cpu::Int8Activations::kExact);
}

Tensor Int8LinearQ8_0(const Tensor& x, const Tensor& q, const Tensor& scale) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid() || !q.valid() || !scale.valid()) return Tensor();
  const int64_t k = x.rank() > 0 ? x.dim(-1) : 0;
  if (x.element_type() != ElementType::kF32 || q.element_type() != ElementType::kS8 ||
      scale.element_type() != ElementType::kF16 || q.rank() != 2 || scale.rank() != 2 || k <= 0 ||
      k % kBlock != 0 || q.dim(1) != k || scale.dim(0) != q.dim(0) || scale.dim(1) != k / kBlock) {
    b->Fail(InvalidArgument(
        "Int8LinearQ8_0: x " + x.type().ToString() + ", weight " + q.type().ToString() +
        ", scales " + scale.type().ToString() + ": expected f32 [..., K] and the weight in " +
        QuantLayoutText(QuantFormat::kQ8_0) + ", K a multiple of " + std::to_string(kBlock)));
    return Tensor();
  }
  if (b->module() == nullptr) {
    b->Fail(
        InvalidArgument("Int8LinearQ8_0: the builder has no module to hold the composite's "
                        "decomposition; build with OpBuilder(block, module), or choose the "
                        "exact int8 form"));
    return Tensor();
  }
  // One decomposition per operand types (the block and the arithmetic are fixed).
  const std::string function = "tlaloc_int8_linear_q8_0_" + CompositeTypeName(x.type()) + "_" +
                               CompositeTypeName(q.type()) + "_" + CompositeTypeName(scale.type());
  AttrDict attributes;
  attributes["block"] = Attribute::Int(kBlock, ElementType::kS64);
  attributes["mode"] = Attribute::String("q8_0");
  auto out = EmitComposite(kInt8LinearComposite, {x, q, scale}, std::move(attributes), function,
                           Decomposition);
  return out.size() == 1 ? out[0] : Tensor();
}

Tensor Int8LinearExact(const Tensor& x, const Tensor& q, const Tensor& scale) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid() || !q.valid() || !scale.valid()) return Tensor();
  // f32 activations times the dequantised matrix.
  auto ops = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{
        DotGeneral(a[0], DequantizeInt8(a[1], a[2]), {}, {}, {a[0].rank() - 1}, {1})};
  };
  const int64_t k = x.rank() > 0 ? x.dim(-1) : 0;
  const bool matrix = x.element_type() == ElementType::kF32 &&
                      q.element_type() == ElementType::kS8 && q.rank() == 2 && scale.rank() == 2 &&
                      k > 0 && q.dim(1) == k && scale.dim(0) == q.dim(0) && scale.dim(1) > 0 &&
                      k % scale.dim(1) == 0;
  // Other operands: the ops in place (DequantizeInt8 names what it expected).
  if (!matrix) return ops({x, q, scale})[0];
  // One decomposition per operand types.
  const std::string function = "tlaloc_int8_linear_exact_" + CompositeTypeName(x.type()) + "_" +
                               CompositeTypeName(q.type()) + "_" + CompositeTypeName(scale.type());
  AttrDict attributes;
  attributes["block"] = Attribute::Int(k / scale.dim(1), ElementType::kS64);
  attributes["mode"] = Attribute::String("exact");
  auto out =
      EmitComposite(kInt8LinearComposite, {x, q, scale}, std::move(attributes), function, ops);
  return out.size() == 1 ? out[0] : Tensor();
}

}  // namespace tlaloc::nn
