// Attention over a paged KV cache: keys and values live in a pool of fixed-size blocks, and each
// sequence names its blocks in a block table, so cache memory grows with live tokens rather than
// with batch x context. Besides the output it returns the log-sum-exp of each query's scores,
// so partial attentions over disjoint sets of keys (other pages, other devices) merge exactly
// (MergeAttention): the form context-parallel attention needs.
//
// Both are named composites (builder/composite.h), so the interpreter and kernelize find them by
// name, and XLA runs their decompositions:
// - tlaloc.paged_attention {scale}: nn::PagedAttention, the whole layer (kernelize replaces it
//   with a mapped kernel, e.g. jax's paged attention on a TPU: kernels/tpu_adapter.cc);
// - tlaloc.paged_dot {product = "keys" | "values"}: one product of decode attention with the
//   pool's rows read through the block table (PagedGroupedAttention, the decoder's attention
//   over a paged cache), which the interpreter runs as cpu::PagedMatmul where the query side is
//   a decode step's few vectors (interp/fusion_paged.cc) and as its decomposition otherwise.
#pragma once

#include <string>
#include <string_view>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/nn/layers.h"

namespace tlaloc::nn {

inline constexpr std::string_view kPagedAttentionComposite = "tlaloc.paged_attention";
inline constexpr std::string_view kPagedDotComposite = "tlaloc.paged_dot";

struct AttentionPartial {
  Tensor out;  // f32 [B, T, Hq, D]: softmax-weighted values over the keys seen (0 if none)
  Tensor lse;  // f32 [B, T, Hq]: log of the sum of exp(scaled scores) over them (-inf if none)
};

// q [B, T, Hq, D]; q_positions s32 [B, T]; k_pages, v_pages [N, Hkv, P, D] (N blocks of P
// positions); block_table s32 [B, M]; kv_start, kv_lengths s32 [B]. Row b's key j (0 <= j < M*P)
// is offset j % P of block block_table[b, j / P], holds sequence position kv_start[b] + j, and is
// seen by query t when j < kv_lengths[b] and kv_start[b] + j <= q_positions[b, t] (causal).
// Query head h reads KV head h / (Hq / Hkv). Scores, softmax and sums in f32. Emitted as
// tlaloc.paged_attention {scale} on (k_pages, block_table, v_pages, q, kv_start, kv_lengths,
// q_positions) -> (out, lse), the order kernelize passes a mapped kernel the layer's operands.
AttentionPartial PagedAttention(const Tensor& q, const Tensor& q_positions, const Tensor& k_pages,
                                const Tensor& v_pages, const Tensor& block_table,
                                const Tensor& kv_start, const Tensor& kv_lengths, double scale,
                                LayerTrace* trace = nullptr, const std::string& path = "");

// Attention over the union of two disjoint key sets from the attentions over each:
// out = (e^(lse_a - m) out_a + e^(lse_b - m) out_b) / (e^(lse_a - m) + e^(lse_b - m)),
// lse = m + log(e^(lse_a - m) + e^(lse_b - m)), m = max(lse_a, lse_b); a side that saw no key
// (lse -inf) contributes nothing.
AttentionPartial MergeAttention(const AttentionPartial& a, const AttentionPartial& b);

// pool [N, H, P, D] read through table s32 [B, M] as [B, H, M * P, D] (position j at offset
// j % P of page table[b, j / P]): one gather writing that layout, reshaped.
Tensor GatherPages(const Tensor& pool, const Tensor& table);

enum class PagedProduct { kKeys, kValues };

// The composite tlaloc.paged_dot on (lhs, pool, table), f32 [B, H, G, T, *], decomposing into
//   keys:   dot_general(lhs [B, H, G, T, D], GatherPages(pool, table)) batch {0, 1} x {0, 1},
//           contracting {4} x {3} -> [B, H, G, T, M * P]
//   values: dot_general(lhs [B, H, G, T, M * P], GatherPages(pool, table)) batch {0, 1} x
//           {0, 1}, contracting {4} x {2} -> [B, H, G, T, D]
// lhs of the pool's element type. Fails (on lhs's builder) on other shapes.
Tensor PagedDot(const Tensor& lhs, const Tensor& pool, const Tensor& table, PagedProduct product);

// GroupedAttention (layers.h) of q [B, T, Hq, D] over keys and values kept in pools
// [N, Hkv, P, D] read through block_table s32 [B, M] (S = M * P positions; mask [B, T, S]): the
// same ops, with its two products as tlaloc.paged_dot composites, so the gathered [B, Hkv, S, D]
// copies of the cache are made only where the interpreter runs a decomposition. Pools of
// another type than q's (or than f32 / bf16 / f16) take the gathered copies into
// GroupedAttention.
Tensor PagedGroupedAttention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                             const Tensor& block_table, const Tensor& mask, double scale,
                             LayerTrace* trace = nullptr, const std::string& path = "");

}  // namespace tlaloc::nn
