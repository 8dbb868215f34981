// Attention over a paged KV cache: keys and values live in a pool of fixed-size blocks, and each
// sequence names its blocks in a block table, so cache memory grows with live tokens rather than
// with batch x context. Besides the output it returns the log-sum-exp of each query's scores,
// so partial attentions over disjoint sets of keys (other pages, other devices) merge exactly
// (MergeAttention): the form context-parallel attention needs.
#pragma once

#include <string>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/nn/layers.h"

namespace tlaloc::nn {

struct AttentionPartial {
  Tensor out;  // f32 [B, T, Hq, D]: softmax-weighted values over the keys seen (0 if none)
  Tensor lse;  // f32 [B, T, Hq]: log of the sum of exp(scaled scores) over them (-inf if none)
};

// q [B, T, Hq, D]; q_positions s32 [B, T]; k_pages, v_pages [N, Hkv, P, D] (N blocks of P
// positions); block_table s32 [B, M]; kv_start, kv_lengths s32 [B]. Row b's key j (0 <= j < M*P)
// is offset j % P of block block_table[b, j / P], holds sequence position kv_start[b] + j, and is
// seen by query t when j < kv_lengths[b] and kv_start[b] + j <= q_positions[b, t] (causal).
// Query head h reads KV head h / (Hq / Hkv). Scores, softmax and sums in f32.
AttentionPartial PagedAttention(const Tensor& q, const Tensor& q_positions, const Tensor& k_pages,
                                const Tensor& v_pages, const Tensor& block_table,
                                const Tensor& kv_start, const Tensor& kv_lengths, double scale,
                                LayerTrace* trace = nullptr, const std::string& path = "");

// Attention over the union of two disjoint key sets from the attentions over each:
// out = (e^(lse_a - m) out_a + e^(lse_b - m) out_b) / (e^(lse_a - m) + e^(lse_b - m)),
// lse = m + log(e^(lse_a - m) + e^(lse_b - m)), m = max(lse_a, lse_b); a side that saw no key
// (lse -inf) contributes nothing.
AttentionPartial MergeAttention(const AttentionPartial& a, const AttentionPartial& b);

}  // namespace tlaloc::nn
