// The shared decoder layer (Qwen3's; Llama's without the q/k norms), written once for prefill,
// decode and training. The modes differ only in where the attention's keys come from (the chunk's
// own, or the whole cache) and whether they are written to a cache.
#include <cmath>

#include "models/decoder/decoder.h"
#include "tlaloc/nn/moe.h"
#include "tlaloc/nn/paged_attention.h"

namespace tlaloc::models::decoder {

namespace {

// The feed-forward half on post-attention-norm hidden states n [B, T, H]: the SwiGLU MLP, or
// the sparse MoE block on MoE layers.
Tensor FeedForward(const ModelConfig& c, const WeightTensors& w, int64_t layer, const Tensor& n,
                   const ParallelHooks& par, nn::LayerTrace* trace) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  auto W = [&](const std::string& name) { return w.at(p + name); };
  auto S = [&](const std::string& name) { return Int8Scale(w, p + name); };
  const io::FeedForward ff = c.FeedForwardOf(layer);
  if (!ff.sparse())
    return nn::SwiGluMlp(
        n, W("mlp.gate_proj.weight"), W("mlp.up_proj.weight"), W("mlp.down_proj.weight"), trace,
        p + "mlp", {S("mlp.gate_proj.weight"), S("mlp.up_proj.weight"), S("mlp.down_proj.weight")});
  const std::string ep = "mlp.experts.";
  nn::MoeWeights mw{W("mlp.gate.weight"), W(ep + "gate_proj.weight"), W(ep + "up_proj.weight"),
                    W(ep + "down_proj.weight")};
  // int8 experts: their stacked block scales (unset for float experts).
  mw.gate_scale = S(ep + "gate_proj.weight");
  mw.up_scale = S(ep + "up_proj.weight");
  mw.down_scale = S(ep + "down_proj.weight");
  // Expert parallelism: this device holds a slice of the experts (the hook says which).
  if (mw.gate.dim(0) != ff.experts && par.first_expert)
    mw.first_expert = par.first_expert(*n.builder(), mw.gate.dim(0));
  const int64_t bsz = n.dim(0), t = n.dim(1);
  Tensor flat = Reshape(n, {bsz * t, c.hidden_size});
  return Reshape(nn::SparseMoe(flat, mw, ff.experts_per_token, ff.normalize_top_k,
                               nn::MoeForm::kAuto, trace, p + "mlp"),
                 {bsz, t, c.hidden_size});
}

// Writes kt / vt [B, Hkv, T, D] into the caches: prefill row r into slot slots[r] from position
// 0, decode row r (T = 1) into slot r at positions[r]. Each write is in place (the cache is
// donated and dies at its update).
void WriteCache(const LayerContext& ctx, const Tensor& kt, const Tensor& vt, LayerCache& cache) {
  OpBuilder* b = kt.builder();
  Tensor zero = Scalar(*b, 0, ElementType::kS32);
  for (int64_t r = 0; r < kt.dim(0); ++r) {
    Tensor slot, pos;
    if (ctx.mode == Mode::kPrefill) {
      slot = Reshape(SliceAxis(ctx.slots, 0, r, r + 1), {});
      pos = zero;
    } else {
      slot = Scalar(*b, static_cast<double>(r), ElementType::kS32);
      pos = Reshape(SliceAxis(ctx.positions, 0, r, r + 1), {});
    }
    cache.k = DynamicUpdateSlice(cache.k, SliceAxis(kt, 0, r, r + 1), {slot, zero, pos, zero});
    cache.v = DynamicUpdateSlice(cache.v, SliceAxis(vt, 0, r, r + 1), {slot, zero, pos, zero});
  }
}

// Paged form: writes row r's new keys kt[r] [Hkv, T, D] (the first lengths[r] of them real) at
// positions starts[r].. of its sequence. Block w of the chunk (write_blocks[r, w]) covers the
// positions from base + w * P, base being starts[r] rounded down to a block: the W blocks are read
// (one gather), the new keys that fall in them replace their positions, and each is written back
// in place (the pool dies at each update): a few ops per block, where a chain of about twenty per
// block and pool made a 512-token prefill run some 35,000 more small ops. Padding tokens write
// nothing, so a padding row leaves the pool as it was.
void WritePages(const LayerContext& ctx, const Tensor& kt, const Tensor& vt, LayerCache& cache) {
  OpBuilder* b = kt.builder();
  const int64_t hkv = kt.dim(1), t = kt.dim(2), d = kt.dim(3), page = ctx.page_size;
  const int64_t blocks = ctx.write_blocks.dim(1);
  Tensor zero = Scalar(*b, 0, ElementType::kS32);
  Tensor page_s = Scalar(*b, static_cast<double>(page), ElementType::kS32);
  // Chunk offset of position p of block w, w * P + p (chunks only).
  Tensor block_offsets;
  if (t > 1)
    block_offsets = Reshape(Iota(*b, {blocks * page}, 0, ElementType::kS32), {blocks, page});
  for (int64_t r = 0; r < kt.dim(0); ++r) {
    Tensor start = Reshape(SliceAxis(ctx.starts, 0, r, r + 1), {});
    Tensor len = Reshape(SliceAxis(ctx.lengths, 0, r, r + 1), {});
    Tensor offset = Rem(start, page_s);
    if (t == 1) {
      // One token (decode): only its own position changes, so the block is not read and written
      // whole. A padding row (length 0) writes back what its position held.
      Tensor block = Reshape(SliceAxis(SliceAxis(ctx.write_blocks, 0, r, r + 1), 1, 0, 1), {});
      Tensor fresh = BroadcastInDim(Gt(len, zero), {1, hkv, 1, d}, {});
      for (Tensor* pool : {&cache.k, &cache.v}) {
        const Tensor& rows = pool == &cache.k ? kt : vt;
        Tensor incoming = Reshape(SliceAxis(rows, 0, r, r + 1), {1, hkv, 1, d});
        Tensor old = DynamicSlice(*pool, {block, zero, offset, zero}, {1, hkv, 1, d});
        *pool = DynamicUpdateSlice(*pool, Where(fresh, incoming, old), {block, zero, offset, zero});
      }
      continue;
    }
    // A chunk: all its blocks at once. Chunk index of each block position ([W, P], block w
    // from base + w * P), and which of them are new.
    Tensor first = zero - offset;  // base - start, in (-P, 0]
    Tensor index = BroadcastInDim(first, {blocks, page}, {}) + block_offsets;
    Tensor fresh =
        Ge(index, FullLike(index, 0)) & Lt(index, BroadcastInDim(len, {blocks, page}, {}));
    Tensor fresh_rows = BroadcastInDim(fresh, {blocks, hkv, page, d}, {0, 2});
    Tensor ids = Reshape(SliceAxis(ctx.write_blocks, 0, r, r + 1), {blocks});
    std::vector<Tensor> id(blocks);
    for (int64_t w = 0; w < blocks; ++w) id[w] = Reshape(SliceAxis(ids, 0, w, w + 1), {});
    for (Tensor* pool : {&cache.k, &cache.v}) {
      const Tensor& rows = pool == &cache.k ? kt : vt;
      // The chunk with P zeros before it and W * P after, so the W blocks' slice is in range.
      Tensor padded = Pad(Reshape(SliceAxis(rows, 0, r, r + 1), {hkv, t, d}),
                          Scalar(*b, 0, rows.element_type()), {0, page, 0}, {0, blocks * page, 0});
      Tensor incoming = Transpose(
          Reshape(DynamicSlice(padded, {zero, first + page_s, zero}, {hkv, blocks * page, d}),
                  {hkv, blocks, page, d}),
          {1, 0, 2, 3});
      Tensor merged = Where(fresh_rows, incoming, Take(*pool, ids));  // [W, Hkv, P, D]
      // Last block first: entries past the sequence's blocks (at the end, all fresh-less) name
      // block 0, which may also be one of the sequence's own; written first, they put back what
      // block 0 held before the step, and the sequence's own write of it comes after.
      for (int64_t w = blocks - 1; w >= 0; --w)
        *pool =
            DynamicUpdateSlice(*pool, SliceAxis(merged, 0, w, w + 1), {id[w], zero, zero, zero});
    }
  }
}

}  // namespace

Tensor DecoderLayer(const ModelConfig& c, const WeightTensors& w, int64_t layer, const Tensor& x,
                    const LayerContext& ctx, LayerCache* cache, nn::LayerTrace* trace) {
  OpBuilder* b = x.builder();
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  nn::LayerScope scope(trace, b, nn::kDecoderLayer, p.substr(0, p.size() - 1));
  auto W = [&](const std::string& name) { return w.at(p + name); };
  // A projection: float weights, or int8 ones with their block scales.
  auto Proj = [&](const Tensor& in, const std::string& name, const std::string& path) {
    return nn::Linear(in, W(name), trace, path, Int8Scale(w, p + name));
  };
  const int64_t bsz = x.dim(0), t = x.dim(1), d = c.head_dim;
  // Head counts from the projections' rows: a tensor-parallel step passes each device its heads.
  const int64_t hq = W("self_attn.q_proj.weight").dim(0) / d;
  const int64_t hkv = W("self_attn.k_proj.weight").dim(0) / d;
  const ParallelHooks& par = ctx.parallel;
  const double eps = c.rms_norm_eps;

  Tensor h = nn::RmsNormLayer(x, W("input_layernorm.weight"), eps, trace, p + "input_layernorm");
  const std::string a = p + "self_attn.";
  Tensor q = Reshape(Proj(h, "self_attn.q_proj.weight", a + "q_proj"), {bsz, t, hq, d});
  Tensor k = Reshape(Proj(h, "self_attn.k_proj.weight", a + "k_proj"), {bsz, t, hkv, d});
  Tensor v = Reshape(Proj(h, "self_attn.v_proj.weight", a + "v_proj"), {bsz, t, hkv, d});
  q = par.Annotate("heads", q);
  k = par.Annotate("heads", k);
  v = par.Annotate("heads", v);
  if (ctx.qk_norm) {
    q = nn::RmsNormLayer(q, W("self_attn.q_norm.weight"), eps, trace, a + "q_norm");
    k = nn::RmsNormLayer(k, W("self_attn.k_norm.weight"), eps, trace, a + "k_norm");
  }
  q = nn::ApplyRotary(q, ctx.cos, ctx.sin, trace, a + "rotary_emb");
  k = nn::ApplyRotary(k, ctx.cos, ctx.sin, trace, a + "rotary_emb");
  Tensor keys = Transpose(k, {0, 2, 1, 3});  // [B, Hkv, T, D]
  Tensor values = Transpose(v, {0, 2, 1, 3});
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  // What the cache stores: the keys and values rounded to its type where it is narrower than the
  // activations (an f32 model's bf16 cache). A slot-form prefill attends over its own f32 chunk.
  Tensor stored_keys = keys, stored_values = values;
  if (cache && ctx.mode != Mode::kTrain && cache->k.element_type() != keys.element_type()) {
    stored_keys = Convert(keys, cache->k.element_type());
    stored_values = Convert(values, cache->v.element_type());
  }
  Tensor attn;
  if (ctx.page_size > 0) {
    // The pools read through the block table (nn::PagedGroupedAttention's tlaloc.paged_dot
    // products: no gathered copy of the cache where the interpreter runs their kernel).
    WritePages(ctx, stored_keys, stored_values, *cache);
    attn = nn::PagedGroupedAttention(q, cache->k, cache->v, ctx.block_table, ctx.mask, scale, trace,
                                     a + "attn");
  } else {
    if (ctx.mode != Mode::kTrain) {
      WriteCache(ctx, stored_keys, stored_values, *cache);
      if (ctx.mode == Mode::kDecode) {
        keys = cache->k;
        values = cache->v;
      }
    }
    attn = nn::GroupedAttention(q, keys, values, ctx.mask, scale, trace, a + "attn");
  }
  attn = Reshape(attn, {bsz, t, hq * d});
  Tensor hidden = x + par.Reduce(Proj(attn, "self_attn.o_proj.weight", a + "o_proj"));
  Tensor n = nn::RmsNormLayer(hidden, W("post_attention_layernorm.weight"), eps, trace,
                              p + "post_attention_layernorm");
  return hidden + par.Reduce(FeedForward(c, w, layer, n, par, trace));
}

Tensor FinalNorm(const ModelConfig& c, const WeightTensors& w, const Tensor& x,
                 nn::LayerTrace* trace) {
  return nn::RmsNormLayer(x, w.at("model.norm.weight"), c.rms_norm_eps, trace, "model.norm");
}

std::string HeadWeightName(const ModelConfig& c) {
  return c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
}

}  // namespace tlaloc::models::decoder
