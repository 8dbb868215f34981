// Paged attention with its log-sum-exp as the composite tlaloc.paged_attention, the exact merge
// of two partial attentions, and decode attention's products over the pool as the composite
// tlaloc.paged_dot (paged_attention.h).
#include "tlaloc/nn/paged_attention.h"

#include <cstdio>
#include <cstring>
#include <limits>

#include "tlaloc/builder/composite.h"

namespace tlaloc::nn {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor F32(const Tensor& x) {
  return x.element_type() == ElementType::kF32 ? x : Convert(x, ElementType::kF32);
}

// nn::PagedAttention's ops on the composite's arguments (its decomposition).
std::vector<Tensor> PagedAttentionOps(const Tensor& q, const Tensor& q_positions,
                                      const Tensor& k_pages, const Tensor& v_pages,
                                      const Tensor& block_table, const Tensor& kv_start,
                                      const Tensor& kv_lengths, double scale) {
  OpBuilder* b = q.builder();
  const int64_t bsz = q.dim(0), t = q.dim(1), hq = q.dim(2), d = q.dim(3);
  const int64_t hkv = k_pages.dim(1), blocks = block_table.dim(1);
  const int64_t groups = hq / hkv, s = blocks * k_pages.dim(2);
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
  return {Reshape(Transpose(o, {0, 3, 1, 2, 4}), {bsz, t, hq, d}),
          Reshape(Transpose(Reshape(lse, {bsz, hkv, groups, t}), {0, 3, 1, 2}), {bsz, t, hq})};
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
  const int64_t bsz = q.dim(0), hq = q.dim(2), d = q.dim(3);
  const int64_t hkv = k_pages.dim(1);
  if (hkv <= 0 || hq % hkv != 0 || k_pages.dim(3) != d || v_pages.type() != k_pages.type() ||
      block_table.dim(0) != bsz) {
    b->Fail(InvalidArgument("PagedAttention: q " + q.type().ToString() + ", pages " +
                            k_pages.type().ToString() + " / " + v_pages.type().ToString() +
                            ", block table " + block_table.type().ToString() +
                            " (expected query heads a multiple of KV heads, one head size, equal "
                            "K and V pages, one table row per query row)"));
    return {};
  }
  // The composite's operands in the order kernelize passes a mapped kernel the layer's operands
  // (kernels/kernelize.cc's signature; tpu_adapter.cc maps them onto jax's kernel).
  const std::vector<Tensor> operands = {k_pages,  block_table, v_pages,    q,
                                        kv_start, kv_lengths,  q_positions};
  // One decomposition per operand types and scale (the scale is a constant of its ops).
  uint64_t scale_bits = 0;
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  char scale_hex[17];
  std::snprintf(scale_hex, sizeof scale_hex, "%016llx",
                static_cast<unsigned long long>(scale_bits));
  std::string function = "tlaloc_paged_attention";
  for (const Tensor& t : operands) function += "_" + CompositeTypeName(t.type());
  function += std::string("_scale") + scale_hex;
  AttrDict attributes;
  attributes["scale"] = Attribute::Float(scale, ElementType::kF64);
  auto out =
      EmitComposite(kPagedAttentionComposite, operands, std::move(attributes), function,
                    [scale](const std::vector<Tensor>& a) {
                      return PagedAttentionOps(a[3], a[6], a[0], a[2], a[1], a[4], a[5], scale);
                    });
  if (out.size() != 2) return {};
  AttentionPartial r;
  r.out = out[0];
  r.lse = out[1];
  return r;
}

Tensor GatherPages(const Tensor& pool, const Tensor& table) {
  if (!pool.valid() || !table.valid()) return Tensor();
  const int64_t bsz = table.dim(0), m = table.dim(1);
  const int64_t hkv = pool.dim(1), page = pool.dim(2), d = pool.dim(3);
  return Reshape(Take(pool, table, {1, 3, 4}), {bsz, hkv, m * page, d});
}

Tensor PagedDot(const Tensor& lhs, const Tensor& pool, const Tensor& table, PagedProduct product) {
  OpBuilder* b = lhs.builder();
  if (!b || !lhs.valid() || !pool.valid() || !table.valid()) return Tensor();
  const bool values = product == PagedProduct::kValues;
  const bool shapes_fit = lhs.rank() == 5 && pool.rank() == 4 && table.rank() == 2 &&
                          table.element_type() == ElementType::kS32 &&
                          lhs.element_type() == pool.element_type() && lhs.dim(0) == table.dim(0) &&
                          lhs.dim(1) == pool.dim(1) &&
                          lhs.dim(4) == (values ? table.dim(1) * pool.dim(2) : pool.dim(3));
  if (!shapes_fit) {
    b->Fail(InvalidArgument("PagedDot (" + std::string(values ? "values" : "keys") + "): lhs " +
                            lhs.type().ToString() + ", pool " + pool.type().ToString() +
                            ", table " + table.type().ToString() + " (expected lhs [B, H, G, T, " +
                            (values ? "M * P" : "D") +
                            "] of the pool's type, pool [N, H, P, D], table s32 [B, M])"));
    return Tensor();
  }
  // One decomposition per operand types and product.
  const std::string function = std::string("tlaloc_paged_dot_") + (values ? "values_" : "keys_") +
                               CompositeTypeName(lhs.type()) + "_" +
                               CompositeTypeName(pool.type()) + "_" +
                               CompositeTypeName(table.type());
  AttrDict attributes;
  attributes["product"] = Attribute::String(values ? "values" : "keys");
  auto out = EmitComposite(
      kPagedDotComposite, {lhs, pool, table}, std::move(attributes), function,
      [values](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{DotGeneral(a[0], GatherPages(a[1], a[2]), {0, 1}, {0, 1}, {4},
                                              {values ? int64_t{2} : int64_t{3}}, ElementType::kF32,
                                              /*same_as_lhs=*/false)};
      });
  return out.size() == 1 ? out[0] : Tensor();
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
