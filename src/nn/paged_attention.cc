// Paged attention with its log-sum-exp, and the exact merge of two partial attentions.
#include "tlaloc/nn/paged_attention.h"

#include <limits>

namespace tlaloc::nn {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor F32(const Tensor& x) {
  return x.element_type() == ElementType::kF32 ? x : Convert(x, ElementType::kF32);
}

}  // namespace

AttentionPartial PagedAttention(const Tensor& q, const Tensor& q_positions, const Tensor& k_pages,
                                const Tensor& v_pages, const Tensor& block_table,
                                const Tensor& kv_start, const Tensor& kv_lengths, double scale,
                                LayerTrace* trace, const std::string& path) {
  LayerScope scope(trace, q.builder(), kPagedAttentionLayer, path, {{"scale", scale}});
  OpBuilder* b = q.builder();
  if (!b || !q.valid() || !k_pages.valid() || !v_pages.valid() || !block_table.valid() ||
      !q_positions.valid() || !kv_start.valid() || !kv_lengths.valid())
    return {};
  const int64_t bsz = q.dim(0), t = q.dim(1), hq = q.dim(2), d = q.dim(3);
  const int64_t hkv = k_pages.dim(1), page = k_pages.dim(2), blocks = block_table.dim(1);
  if (hkv <= 0 || hq % hkv != 0 || k_pages.dim(3) != d || v_pages.type() != k_pages.type() ||
      block_table.dim(0) != bsz) {
    b->Fail(InvalidArgument("PagedAttention: q " + q.type().ToString() + ", pages " +
                            k_pages.type().ToString() + " / " + v_pages.type().ToString() +
                            ", block table " + block_table.type().ToString() +
                            " (expected query heads a multiple of KV heads, one head size, equal "
                            "K and V pages, one table row per query row)"));
    return {};
  }
  const int64_t groups = hq / hkv, s = blocks * page;
  // The sequence's pages gathered in table order: [B, M, Hkv, P, D] -> [B, Hkv, M*P, D], key j
  // at offset j % P of page j / P.
  auto gather = [&](const Tensor& pages) {
    Tensor g = Take(F32(pages), block_table);
    return Reshape(Transpose(g, {0, 2, 1, 3, 4}), {bsz, hkv, s, d});
  };
  Tensor keys = gather(k_pages), values = gather(v_pages);
  Tensor qg = Transpose(Reshape(F32(q), {bsz, t, hkv, groups, d}), {0, 2, 3, 1, 4});
  Tensor scores = DotGeneral(qg, keys, {0, 1}, {0, 1}, {4}, {3}, ElementType::kF32,
                             /*same_as_lhs=*/false) *
                  scale;  // [B, Hkv, G, T, S]
  Tensor j = Iota(*b, {bsz, t, s}, 2);
  Tensor position = j + BroadcastInDim(kv_start, {bsz, t, s}, {0});
  // One statement each: the operands' first uses, the order kernelize passes them to a kernel
  // (k_pages, block_table, v_pages, q, kv_start, kv_lengths, q_positions), must not depend on
  // the compiler's order of evaluating an operator's operands.
  Tensor written = Lt(j, BroadcastInDim(kv_lengths, {bsz, t, s}, {0}));
  Tensor causal = Le(position, BroadcastInDim(q_positions, {bsz, t, s}, {0, 1}));
  Tensor seen = written & causal;
  Tensor mask = BroadcastInDim(seen, {bsz, hkv, groups, t, s}, {0, 3, 4});
  Tensor masked = Where(mask, scores, FullLike(scores, -kInf));
  // A query that sees no key has max -inf; shifting by 0 instead keeps exp(-inf) = 0 (no NaN).
  Tensor m = ReduceMax(masked, {4}, /*keepdims=*/true);
  Tensor any = Gt(m, FullLike(m, -kInf));
  Tensor shift = Where(any, m, FullLike(m, 0));
  Tensor p = Exp(masked - shift);
  Tensor l = Sum(p, {4}, /*keepdims=*/true);  // >= 1 when any key is seen
  Tensor o = Einsum("bkgts,bksd->bkgtd", p, values);
  o = Where(any, o / Where(any, l, FullLike(l, 1)), FullLike(o, 0));
  Tensor lse = Where(any, shift + Log(Where(any, l, FullLike(l, 1))), FullLike(l, -kInf));
  AttentionPartial r;
  r.out = Reshape(Transpose(o, {0, 3, 1, 2, 4}), {bsz, t, hq, d});
  r.lse = Reshape(Transpose(Reshape(lse, {bsz, hkv, groups, t}), {0, 3, 1, 2}), {bsz, t, hq});
  return r;
}

AttentionPartial MergeAttention(const AttentionPartial& a, const AttentionPartial& b) {
  if (!a.out.valid() || !b.out.valid() || !a.lse.valid() || !b.lse.valid()) return {};
  Tensor m = Max(a.lse, b.lse);
  Tensor any = Gt(m, FullLike(m, -kInf));
  Tensor shift = Where(any, m, FullLike(m, 0));
  Tensor wa = Exp(a.lse - shift), wb = Exp(b.lse - shift);  // 0 for a side that saw nothing
  Tensor total = wa + wb;
  Tensor safe = Where(any, total, FullLike(total, 1));
  Tensor ea = ExpandDims(wa / safe, 3), eb = ExpandDims(wb / safe, 3);
  AttentionPartial r;
  r.out = ea * a.out + eb * b.out;
  r.lse = Where(any, shift + Log(safe), FullLike(m, -kInf));
  return r;
}

}  // namespace tlaloc::nn
