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

#include "tlaloc/builder/composite.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/nn/layers.h"

namespace tlaloc::nn {

namespace {

constexpr int64_t kBlock = kQ8_0BlockElements;  // ir/quant_format.h's q8_0

std::atomic<int> chosen_form{-1};

// x rounded to int8 per 32-block as llama.cpp rounds activations: q8 s8 [M, NB, 32] and the
// blocks' scales dx f32 [M, NB] (f16 values).
struct Q8Activations {
  Tensor q8, dx;
};

Q8Activations QuantizeActivations(const Tensor& x, int64_t m, int64_t nb) {
  OpBuilder& b = *x.builder();
  Tensor xb = Reshape(x, {m, nb, kBlock});
  Tensor amax = ReduceMax(Abs(xb), {2});  // [M, NB]
  Tensor dx = Convert(Convert(amax / 127.0, ElementType::kF16), ElementType::kF32);
  Tensor inv = Where(Eq(amax, Zeros(b, {m, nb})), Zeros(b, {m, nb}), Full(b, {m, nb}, 127) / amax);
  Tensor scaled = xb * BroadcastInDim(inv, {m, nb, kBlock}, {0, 1});
  Tensor rounded = Tensor(b.CreateOne("stablehlo.round_nearest_even", {scaled.value()}), &b);
  Tensor q8 = Convert(Clamp(Scalar(b, -127), rounded, Scalar(b, 127)), ElementType::kS8);
  return {q8, dx};
}

// The decomposition on x [M..., K], q [N, K], scale f16 [N, K / 32] -> [M..., N].
std::vector<Tensor> Decomposition(const std::vector<Tensor>& a) {
  const Tensor &x = a[0], &w = a[1], &scale = a[2];
  const int64_t k = x.dim(-1), n = w.dim(0), nb = k / kBlock;
  int64_t m = 1;
  for (int64_t i = 0; i + 1 < x.rank(); ++i) m *= x.dim(i);
  auto [q8, dx] = QuantizeActivations(x, m, nb);
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

// The ragged decomposition on x [M, K], q [G, N, K], scale f16 [G, N, K / 32], group_sizes [G]
// -> [M, N]: each row's product with its group's matrix in the q8_0 arithmetic above, one
// chlo.ragged_dot per block (chlo.ragged_dot takes no batch dimensions). A block's sums are
// integers below 2^24 (32 products of at most 127 * 127), so the f32 ragged product is their
// exact value, as the s32 dot_general's is above; each row's weight scales are its group's,
// taken by a ragged product with ones (exact; zero past the last group, as the rows are).
std::vector<Tensor> RaggedQ8Decomposition(const std::vector<Tensor>& a) {
  const Tensor &x = a[0], &w = a[1], &scale = a[2], &sizes = a[3];
  OpBuilder& b = *x.builder();
  const int64_t m = x.dim(0), k = x.dim(1), g = w.dim(0), n = w.dim(1), nb = k / kBlock;
  auto [q8, dx] = QuantizeActivations(x, m, nb);
  Tensor xf = Convert(q8, ElementType::kF32);                              // [M, NB, 32]
  Tensor wf = Convert(Reshape(w, {g, n, nb, kBlock}), ElementType::kF32);  // [G, N, NB, 32]
  Tensor dw = Reshape(
      RaggedDot(Full(b, {m, 1}, 1.0), Reshape(Convert(scale, ElementType::kF32), {g, n * nb, 1}),
                sizes, 2, ElementType::kF32),
      {m, n, nb});
  // Added to 0 in block order, as the dense decomposition's reduce adds them.
  Tensor y = Zeros(b, {m, n});
  for (int64_t blk = 0; blk < nb; ++blk) {
    Tensor sums = RaggedDot(Reshape(SliceAxis(xf, 1, blk, blk + 1), {m, kBlock}),
                            Reshape(SliceAxis(wf, 2, blk, blk + 1), {g, n, kBlock}), sizes, 2,
                            ElementType::kF32);
    Tensor scales = BroadcastInDim(Reshape(SliceAxis(dx, 1, blk, blk + 1), {m}), {m, n}, {0}) *
                    Reshape(SliceAxis(dw, 2, blk, blk + 1), {m, n});
    y = y + sums * scales;
  }
  return {y};
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

namespace tlaloc::nn {

bool RaggedInt8Q8_0Takes(const Tensor& x, const Tensor& q, const Tensor& scale,
                         const Tensor& group_sizes) {
  const int64_t k = x.rank() == 2 ? x.dim(1) : 0;
  return x.builder() && x.builder()->module() != nullptr && x.element_type() == ElementType::kF32 &&
         q.element_type() == ElementType::kS8 && scale.element_type() == ElementType::kF16 &&
         q.rank() == 3 && scale.rank() == 3 && group_sizes.rank() == 1 && k > 0 &&
         k % kBlock == 0 && q.dim(2) == k && scale.dim(0) == q.dim(0) && scale.dim(1) == q.dim(1) &&
         scale.dim(2) == k / kBlock && group_sizes.dim(0) == q.dim(0);
}

Tensor RaggedInt8LinearQ8_0(const Tensor& x, const Tensor& q, const Tensor& scale,
                            const Tensor& group_sizes) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid() || !q.valid() || !scale.valid() || !group_sizes.valid()) return Tensor();
  if (!RaggedInt8Q8_0Takes(x, q, scale, group_sizes)) {
    b->Fail(InvalidArgument(
        "RaggedInt8LinearQ8_0: x " + x.type().ToString() + ", experts " + q.type().ToString() +
        ", scales " + scale.type().ToString() + ", group sizes " + group_sizes.type().ToString() +
        ": expected f32 [M, K], s8 [G, N, K], f16 [G, N, K / " + std::to_string(kBlock) +
        "] and [G], K a multiple of " + std::to_string(kBlock) + ", on a builder with a module"));
    return Tensor();
  }
  const std::string function = "tlaloc_ragged_int8_linear_q8_0_" + CompositeTypeName(x.type()) +
                               "_" + CompositeTypeName(q.type()) + "_" +
                               CompositeTypeName(scale.type()) + "_" +
                               CompositeTypeName(group_sizes.type());
  AttrDict attributes;
  attributes["block"] = Attribute::Int(kBlock, ElementType::kS64);
  attributes["mode"] = Attribute::String("q8_0");
  auto out = EmitComposite(kRaggedInt8LinearComposite, {x, q, scale, group_sizes},
                           std::move(attributes), function, RaggedQ8Decomposition);
  return out.size() == 1 ? out[0] : Tensor();
}

Tensor RaggedInt8LinearExact(const Tensor& x, const Tensor& q, const Tensor& scale,
                             const Tensor& group_sizes) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid() || !q.valid() || !scale.valid() || !group_sizes.valid()) return Tensor();
  // f32 rows times their group's dequantised matrix (what nn::SparseMoe emitted as ops before).
  auto ops = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{
        RaggedDot(a[0], DequantizeInt8(a[1], a[2]), a[3], 2, ElementType::kF32)};
  };
  const int64_t k = x.rank() == 2 ? x.dim(1) : 0;
  const bool stack = x.element_type() == ElementType::kF32 &&
                     q.element_type() == ElementType::kS8 && q.rank() == 3 && scale.rank() == 3 &&
                     group_sizes.rank() == 1 && k > 0 && q.dim(2) == k &&
                     scale.dim(0) == q.dim(0) && scale.dim(1) == q.dim(1) && scale.dim(2) > 0 &&
                     k % scale.dim(2) == 0;
  // Other operands: the ops in place (DequantizeInt8 and RaggedDot name what they expected).
  if (!stack) return ops({x, q, scale, group_sizes})[0];
  const std::string function = "tlaloc_ragged_int8_linear_exact_" + CompositeTypeName(x.type()) +
                               "_" + CompositeTypeName(q.type()) + "_" +
                               CompositeTypeName(scale.type()) + "_" +
                               CompositeTypeName(group_sizes.type());
  AttrDict attributes;
  attributes["block"] = Attribute::Int(k / scale.dim(2), ElementType::kS64);
  attributes["mode"] = Attribute::String("exact");
  auto out = EmitComposite(kRaggedInt8LinearComposite, {x, q, scale, group_sizes},
                           std::move(attributes), function, ops);
  return out.size() == 1 ? out[0] : Tensor();
}

}  // namespace tlaloc::nn
