// Qwen3-MoE's sparse block (see moe.h): the router and the four expert forms.
//
// Pairs are the N x k (token, chosen expert) pairs in token-major order: pair p is token p / k's
// choice p % k. The sparse forms compute each pair's SwiGLU once and add the pairs of a token
// with their routing weights, in f32.
#include "tlaloc/nn/moe.h"

#include <cstdlib>
#include <limits>
#include <memory>

#include "tlaloc/ir/typed_builder.h"
#include "tlaloc/nn/int8_linear.h"

namespace tlaloc::nn {

namespace {

Tensor ToF32(const Tensor& x) {
  return x.element_type() == ElementType::kF32 ? x : Convert(x, ElementType::kF32);
}

Tensor ToType(const Tensor& x, ElementType et) {
  return x.element_type() == et ? x : Convert(x, et);
}

// Stable ascending sort of s32 `keys` [P] carrying `payload` [P]: (sorted keys, payload).
std::pair<Tensor, Tensor> SortByKey(const Tensor& keys, const Tensor& payload) {
  OpBuilder* b = keys.builder();
  auto region = std::make_unique<Region>();
  Block& blk = region->AddBlock();
  const TensorType si(ElementType::kS32, {});
  Value a0 = blk.AddArgument(si), a1 = blk.AddArgument(si);
  blk.AddArgument(si);
  blk.AddArgument(si);
  OpBuilder rb(&blk);
  hlo::Return(rb, {hlo::Compare(rb, a0, a1, hlo::CompareDirection::kLt)});
  if (!rb.ok()) {
    b->Fail(rb.status());
    return {};
  }
  auto sorted =
      hlo::Sort(*b, {keys.value(), payload.value()}, 0, /*is_stable=*/true, std::move(region));
  if (sorted.size() != 2) return {};
  return {Tensor(sorted[0], b), Tensor(sorted[1], b)};
}

// x [M, K] times each row's group matrix of w (stacked [G, out, in]), f32 accumulation,
// rounded to x's type once (as Linear does). int8 experts (`scale` valid): the composite
// tlaloc.ragged_int8_linear on f32 x in the int8 form nn::Linear takes (CurrentInt8Form; the
// exact form where the q8_0 one does not take the operands), run on the s8 experts in place.
Tensor GroupedLinear(const Tensor& x, const Tensor& w, const Tensor& scale,
                     const Tensor& group_sizes) {
  if (scale.valid()) {
    auto form = CurrentInt8Form();
    if (!form.ok()) {
      x.builder()->Fail(form.status());
      return Tensor();
    }
    const Tensor xf = ToF32(x);
    const Tensor y = *form == Int8Form::kQ8_0 && RaggedInt8Q8_0Takes(xf, w, scale, group_sizes)
                         ? RaggedInt8LinearQ8_0(xf, w, scale, group_sizes)
                         : RaggedInt8LinearExact(xf, w, scale, group_sizes);
    return ToType(y, x.element_type());
  }
  return ToType(RaggedDot(x, w, group_sizes, 2, ElementType::kF32), x.element_type());
}

// xs [P, H] sorted by expert with group sizes: the experts' SwiGLU, [P, H] in xs's type.
Tensor RaggedExperts(const Tensor& xs, const MoeWeights& w, const Tensor& group_sizes,
                     LayerTrace* trace, const std::string& path) {
  Tensor g = GroupedLinear(xs, w.gate, w.gate_scale, group_sizes);
  Tensor u = GroupedLinear(xs, w.up, w.up_scale, group_sizes);
  return GroupedLinear(SiluAndMul(g, u, trace, path + ".experts"), w.down, w.down_scale,
                       group_sizes);
}

// Per pair: x_p [P, in] times its own matrix ws [P, out, in] -> [P, out] in x's type (int8
// matrices: f32 x times the dequantised ones, `scales` [P, out, in / B]).
Tensor PairLinear(const Tensor& x, const Tensor& ws, const Tensor& scales = Tensor()) {
  if (scales.valid())
    return ToType(DotGeneral(ToF32(x), DequantizeInt8(ws, scales), {0}, {0}, {1}, {2}),
                  x.element_type());
  return ToType(DotGeneral(x, ws, {0}, {0}, {1}, {2}, ElementType::kF32, /*same_as_lhs=*/false),
                x.element_type());
}

// Rows `ids` of an optional stacked tensor (int8 scales): unset stays unset.
Tensor TakeIfSet(const Tensor& stacked, const Tensor& ids) {
  return stacked.valid() ? Take(stacked, ids) : Tensor();
}

// y [P, H] in token-major pair order, weights f32 [N, k]: sum_j weights[n, j] y[n*k + j].
Tensor CombinePairs(const Tensor& y, const Tensor& weights, ElementType et) {
  const int64_t n = weights.dim(0), k = weights.dim(1), h = y.dim(1);
  return ToType(Einsum("nkh,nk->nh", Reshape(ToF32(y), {n, k, h}), weights), et);
}

// Everything the sorted forms share: pairs ordered by expert (stable, so token order within
// an expert), the token of each sorted pair, its weight, and each expert's pair count.
struct SortedPairs {
  Tensor token;        // s32 [P]
  Tensor weight;       // f32 [P]
  Tensor group_sizes;  // s32 [E]
};

SortedPairs SortPairs(const MoeRouting& r, int64_t experts) {
  OpBuilder& b = *r.experts.builder();
  const int64_t n = r.experts.dim(0), k = r.experts.dim(1), p = n * k;
  Tensor e = Reshape(r.experts, {p});
  Tensor pair = Iota(b, {p}, 0, ElementType::kS32);
  auto [sorted_e, perm] = SortByKey(e, pair);
  (void)sorted_e;
  SortedPairs s;
  s.token = perm / FullLike(perm, static_cast<double>(k));
  s.weight = Take(Reshape(r.weights, {p}), perm);
  s.group_sizes = Sum(OneHot(e, experts, ElementType::kS32), {0});
  return s;
}

Tensor RaggedDotForm(const Tensor& x, const MoeWeights& w, const MoeRouting& r, LayerTrace* trace,
                     const std::string& path) {
  OpBuilder& b = *x.builder();
  const int64_t n = x.dim(0), h = x.dim(1), experts = w.gate.dim(0);
  SortedPairs s = SortPairs(r, experts);
  Tensor y = RaggedExperts(Take(x, s.token), w, s.group_sizes, trace, path);
  Tensor weighted = ToF32(y) * ExpandDims(s.weight, 1);
  // Scatter-add of each pair into its token's row: pairs of a token arrive in expert order.
  hlo::ScatterDimensionNumbers d;
  d.update_window_dims = {1};
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  Tensor zeros = Zeros(b, {n, h}, ElementType::kF32);
  Value out =
      hlo::Scatter(b, zeros.value(), Reshape(s.token, {s.token.dim(0), 1}).value(),
                   weighted.value(), d, hlo::ScalarBinaryRegion(ElementType::kF32, hlo::Add));
  return ToType(Tensor(out, &b), x.element_type());
}

Tensor OneHotPermuteForm(const Tensor& x, const MoeWeights& w, const MoeRouting& r,
                         LayerTrace* trace, const std::string& path) {
  const int64_t n = x.dim(0), experts = w.gate.dim(0);
  SortedPairs s = SortPairs(r, experts);
  // perm [P, N]: row p is the one-hot of sorted pair p's token. Products with it move rows
  // exactly (one 1 per row; f32 accumulation of bf16 values is exact).
  Tensor perm = OneHot(s.token, n, x.element_type());
  Tensor xs =
      ToType(DotGeneral(perm, x, {}, {}, {1}, {0}, ElementType::kF32, false), x.element_type());
  Tensor y = RaggedExperts(xs, w, s.group_sizes, trace, path);
  Tensor weighted = ToF32(y) * ExpandDims(s.weight, 1);
  Tensor out = DotGeneral(ToF32(perm), weighted, {}, {}, {0}, {0});  // [N, H]
  return ToType(out, x.element_type());
}

Tensor PairGatherForm(const Tensor& x, const MoeWeights& w, const MoeRouting& r, LayerTrace* trace,
                      const std::string& path) {
  OpBuilder& b = *x.builder();
  const int64_t n = r.experts.dim(0), k = r.experts.dim(1), p = n * k;
  Tensor e = Reshape(r.experts, {p});
  Tensor token =
      Iota(b, {p}, 0, ElementType::kS32) / Full(b, {p}, static_cast<double>(k), ElementType::kS32);
  Tensor xp = Take(x, token);
  Tensor g = PairLinear(xp, Take(w.gate, e), TakeIfSet(w.gate_scale, e));
  Tensor u = PairLinear(xp, Take(w.up, e), TakeIfSet(w.up_scale, e));
  Tensor y = PairLinear(SiluAndMul(g, u, trace, path + ".experts"), Take(w.down, e),
                        TakeIfSet(w.down_scale, e));
  return CombinePairs(y, r.weights, x.element_type());
}

Tensor DenseMaskedForm(const Tensor& x, const MoeWeights& w, const MoeRouting& r, LayerTrace* trace,
                       const std::string& path) {
  const int64_t experts = w.gate.dim(0);
  // Dense routing weights [N, E]: zero for experts not chosen.
  Tensor dense = Einsum("nke,nk->ne", OneHot(r.experts, experts), r.weights);
  Tensor out;
  for (int64_t e = 0; e < experts; ++e) {
    auto expert = [&](const Tensor& stacked) {
      if (!stacked.valid()) return Tensor();  // float experts' unset scales
      return Reshape(SliceAxis(stacked, 0, e, e + 1), {stacked.dim(1), stacked.dim(2)});
    };
    Tensor y = SwiGluMlp(x, expert(w.gate), expert(w.up), expert(w.down), trace,
                         path + ".experts." + std::to_string(e),
                         {expert(w.gate_scale), expert(w.up_scale), expert(w.down_scale)});
    Tensor contrib = ToF32(y) * SliceAxis(dense, -1, e, e + 1);
    out = out.valid() ? out + contrib : contrib;
  }
  return ToType(out, x.element_type());
}

}  // namespace

std::string_view MoeFormName(MoeForm form) {
  switch (form) {
    case MoeForm::kAuto:
      return "auto";
    case MoeForm::kRaggedDot:
      return "ragged_dot";
    case MoeForm::kOneHotPermute:
      return "onehot";
    case MoeForm::kPairGather:
      return "gather";
    case MoeForm::kDenseMasked:
      return "dense";
  }
  return "auto";
}

StatusOr<MoeForm> ParseMoeForm(std::string_view name) {
  for (MoeForm f : {MoeForm::kAuto, MoeForm::kRaggedDot, MoeForm::kOneHotPermute,
                    MoeForm::kPairGather, MoeForm::kDenseMasked})
    if (name == MoeFormName(f)) return f;
  return InvalidArgument("MoE form \"" + std::string(name) +
                         "\": expected auto, ragged_dot, onehot, gather or dense");
}

MoeForm MoeFormForPairs(int64_t pairs) {
  if (const char* env = std::getenv("TLALOC_MOE_FORM")) {
    auto f = ParseMoeForm(env);
    if (f.ok() && *f != MoeForm::kAuto) return *f;
  }
  // bench/moe_bench.cc BM_MoeForm on the interpreter (2 cores, Qwen3-30B-A3B's widths, f32;
  // docs/performance.md): the one-hot permute ties ragged_dot up to 1,024 pairs (6.75 vs
  // 6.92 ms CPU at 8 pairs, 266 vs 266 ms at 1,024), then loses (1.5x at 8,192); the pair
  // gather loses from the start (2.6x at 8 pairs, 4.4x at 32). No count favours another form
  // here, so every count takes ragged_dot; a backend without a grouped matmul would measure
  // its own crossover with the same benchmark. Re-measured in bf16 after the grouped kernels
  // (BM_MoeFormBf16, loaded machine, CPU ms): the two tie from 8 to 2,048 pairs (3.6 vs 3.4 at
  // 8, 143 vs 138 at 2,048; single runs, within the noise) and ragged_dot wins at 8,192 (430 vs
  // 674), so the choice stands.
  (void)pairs;
  return MoeForm::kRaggedDot;
}

MoeRouting RouteTopK(const Tensor& logits, int64_t top_k, bool norm_topk_prob, TopKMethod method) {
  OpBuilder* b = logits.builder();
  if (!b || !logits.valid()) return {};
  const int64_t n = logits.dim(0), experts = logits.dim(1);
  if (top_k < 1 || top_k > experts) {
    b->Fail(InvalidArgument("RouteTopK: top_k " + std::to_string(top_k) + " is not in [1, " +
                            std::to_string(experts) + "]"));
    return {};
  }
  Tensor probs = Softmax(ToF32(logits), -1);  // [N, E]
  Tensor ids;
  if (method == TopKMethod::kMaxMask) {
    // k passes: the first maximum, then that expert masked out. Ties go to the lower id, as
    // the stable sort gives. Probabilities are finite and >= 0, so no NaN handling (Argmax's)
    // is needed and -1 masks.
    Tensor iota = Iota(*b, {n, experts}, 1, ElementType::kS32);
    Tensor past_end = FullLike(iota, static_cast<double>(experts));
    Tensor masked = probs;
    std::vector<Tensor> picks;
    for (int64_t j = 0; j < top_k; ++j) {
      Tensor m = ReduceMax(masked, {1}, true);
      Tensor pick = ReduceMin(Where(Eq(masked, m), iota, past_end), {1}, true);  // s32 [N, 1]
      picks.push_back(pick);
      if (j + 1 < top_k) masked = Where(Eq(iota, pick), FullLike(masked, -1.0), masked);
    }
    ids = picks.size() == 1 ? picks[0] : Concat(picks, 1);
  } else if (method == TopKMethod::kChloTopK) {
    std::vector<Value> r =
        b->Create("chlo.top_k", {probs.value()}, {{"k", Attribute::Int(top_k, ElementType::kS64)}});
    if (r.size() != 2) return {};
    ids = Tensor(r[1], b);
  } else {
    ids = TopK(probs, top_k).second;
  }
  // The weights as a contraction of the probabilities, so that gradients reach the router.
  Tensor weights = Einsum("nke,ne->nk", OneHot(ids, experts), probs);
  if (norm_topk_prob) weights = weights / Sum(weights, {-1}, true);
  return {weights, ids};
}

Tensor SparseMoe(const Tensor& x, const MoeWeights& w, int64_t top_k, bool norm_topk_prob,
                 MoeForm form, LayerTrace* trace, const std::string& path) {
  LayerScope scope(trace, x.builder(), kMoeLayer, path);
  OpBuilder* b = x.builder();
  if (!b || !x.valid() || !w.router.valid() || !w.gate.valid() || !w.up.valid() || !w.down.valid())
    return Tensor();
  const int64_t experts = w.router.dim(0), h = x.rank() == 2 ? x.dim(1) : -1;
  const int64_t local = w.gate.dim(0), width = w.gate.dim(1);
  const bool sliced = w.first_expert.valid();
  const bool shapes_ok = x.rank() == 2 && w.router.dims() == std::vector<int64_t>{experts, h} &&
                         (sliced ? local > 0 && experts % local == 0 : local == experts) &&
                         w.gate.dims() == std::vector<int64_t>{local, width, h} &&
                         w.up.dims() == std::vector<int64_t>{local, width, h} &&
                         w.down.dims() == std::vector<int64_t>{local, h, width} &&
                         (!sliced || w.first_expert.rank() == 0);
  // int8 experts: all three s8 with scales [.., in / B] for one block size B, or none.
  const bool int8 = w.gate_scale.valid();
  bool int8_ok = int8 == w.up_scale.valid() && int8 == w.down_scale.valid();
  if (int8 && int8_ok && shapes_ok) {
    const int64_t hb = w.gate_scale.dim(-1), ib = w.down_scale.dim(-1);
    int8_ok = hb > 0 && ib > 0 && h % hb == 0 && width % ib == 0 && h / hb == width / ib &&
              w.gate_scale.dims() == std::vector<int64_t>{local, width, hb} &&
              w.up_scale.dims() == std::vector<int64_t>{local, width, hb} &&
              w.down_scale.dims() == std::vector<int64_t>{local, h, ib};
    for (const Tensor* m : {&w.gate, &w.up, &w.down})
      int8_ok = int8_ok && m->element_type() == ElementType::kS8;
  }
  if (!int8_ok) {
    b->Fail(InvalidArgument(
        "SparseMoe: int8 experts need gate, up and down s8 with block scales gate and up [E, I, "
        "H / B], down [E, H, I / B] (all three or none); got gate " +
        w.gate.type().ToString() + " scales " +
        (w.gate_scale.valid() ? w.gate_scale.type().ToString() : std::string("unset")) +
        ", up scales " +
        (w.up_scale.valid() ? w.up_scale.type().ToString() : std::string("unset")) +
        ", down scales " +
        (w.down_scale.valid() ? w.down_scale.type().ToString() : std::string("unset"))));
    return Tensor();
  }
  if (!shapes_ok) {
    b->Fail(InvalidArgument(
        std::string("SparseMoe: expected x [N, H], router [E, H], gate and up [E, I, H], down "
                    "[E, H, I] (or a slice of L experts dividing E, with a scalar first_expert)") +
        "; got x " + x.type().ToString() + ", router " + w.router.type().ToString() + ", gate " +
        w.gate.type().ToString() + ", up " + w.up.type().ToString() + ", down " +
        w.down.type().ToString() +
        (sliced ? ", first_expert " + w.first_expert.type().ToString()
                : std::string(", no first_expert"))));
    return Tensor();
  }
  Tensor logits = DotGeneral(x, w.router, {}, {}, {1}, {1}, ElementType::kF32, false);
  MoeRouting r = RouteTopK(logits, top_k, norm_topk_prob);
  if (sliced) {
    // Pairs of experts held elsewhere get the id past this slice's last (sorted last, in no
    // ragged_dot group, so never computed; a zero one-hot row) and weight 0.
    Tensor first = ToType(w.first_expert, ElementType::kS32);
    Tensor id = r.experts - BroadcastInDim(first, r.experts.dims(), {});
    Tensor here = Ge(id, FullLike(id, 0.0)) & Lt(id, FullLike(id, static_cast<double>(local)));
    r.experts = Where(here, id, FullLike(id, static_cast<double>(local)));
    r.weights = Where(here, r.weights, FullLike(r.weights, 0.0));
  }
  if (form == MoeForm::kAuto) form = MoeFormForPairs(x.dim(0) * top_k);
  switch (form) {
    case MoeForm::kOneHotPermute:
      return OneHotPermuteForm(x, w, r, trace, path);
    case MoeForm::kPairGather:
      return PairGatherForm(x, w, r, trace, path);
    case MoeForm::kDenseMasked:
      return DenseMaskedForm(x, w, r, trace, path);
    case MoeForm::kAuto:
    case MoeForm::kRaggedDot:
      break;
  }
  return RaggedDotForm(x, w, r, trace, path);
}

}  // namespace tlaloc::nn
