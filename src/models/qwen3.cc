// Qwen3 prefill and decode-step programs. Both share one decoder body; they differ in where
// the keys come from (the prompt's own keys, or the whole cache) and in the mask.
#include "tlaloc/models/qwen3.h"

#include <cmath>
#include <limits>

#include "tlaloc/builder/tensor.h"

namespace tlaloc::models {

namespace {

using io::ModelConfig;

// Weight parameters by name.
using Weights = std::map<std::string, Tensor>;

Weights AddWeightArgs(FunctionBuilder& fb, const ModelConfig& c, ElementType dtype) {
  Weights w;
  for (const auto& spec : WeightSpecs(c)) w[spec.name] = fb.AddArg(TensorType(dtype, spec.shape));
  return w;
}

struct LayerCache {
  Tensor k, v;
};

enum class Mode { kPrefill, kDecode };

// One decoder layer. x [B, T, H]; positions [B, T]; mask [B, T, keys]. In prefill the layer
// attends over its own T keys and writes them to cache slots [0, T); in decode (T = 1) it
// writes row b's key at slot positions[b] and attends over the whole cache.
Tensor DecoderLayer(const ModelConfig& c, const Weights& w, int64_t layer, Mode mode,
                    const Tensor& x, const Tensor& positions, const Tensor& cos, const Tensor& sin,
                    const Tensor& mask, LayerCache& cache, nn::LayerTrace* trace) {
  OpBuilder* b = x.builder();
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  nn::LayerScope scope(trace, b, nn::kDecoderLayer, p.substr(0, p.size() - 1));
  auto W = [&](const std::string& name) { return w.at(p + name); };
  const int64_t bsz = x.dim(0), t = x.dim(1), d = c.head_dim;
  const int64_t hq = c.num_attention_heads, hkv = c.num_key_value_heads;
  const double eps = c.rms_norm_eps;

  Tensor h = nn::RmsNormLayer(x, W("input_layernorm.weight"), eps, trace, p + "input_layernorm");
  const std::string a = p + "self_attn.";
  Tensor q =
      Reshape(nn::Linear(h, W("self_attn.q_proj.weight"), trace, a + "q_proj"), {bsz, t, hq, d});
  Tensor k =
      Reshape(nn::Linear(h, W("self_attn.k_proj.weight"), trace, a + "k_proj"), {bsz, t, hkv, d});
  Tensor v =
      Reshape(nn::Linear(h, W("self_attn.v_proj.weight"), trace, a + "v_proj"), {bsz, t, hkv, d});
  q = nn::RmsNormLayer(q, W("self_attn.q_norm.weight"), eps, trace, a + "q_norm");
  k = nn::RmsNormLayer(k, W("self_attn.k_norm.weight"), eps, trace, a + "k_norm");
  q = nn::ApplyRotary(q, cos, sin, trace, a + "rotary_emb");
  k = nn::ApplyRotary(k, cos, sin, trace, a + "rotary_emb");
  Tensor kt = Transpose(k, {0, 2, 1, 3});  // [B, Hkv, T, D]
  Tensor vt = Transpose(v, {0, 2, 1, 3});
  Tensor zero = Scalar(*b, 0, ElementType::kS32);
  Tensor keys, values;
  if (mode == Mode::kPrefill) {
    cache.k = DynamicUpdateSlice(cache.k, kt, {zero, zero, zero, zero});
    cache.v = DynamicUpdateSlice(cache.v, vt, {zero, zero, zero, zero});
    keys = kt;
    values = vt;
  } else {
    for (int64_t r = 0; r < bsz; ++r) {
      Tensor row = Scalar(*b, static_cast<double>(r), ElementType::kS32);
      Tensor pos = Reshape(SliceAxis(positions, 0, r, r + 1), {});
      cache.k = DynamicUpdateSlice(cache.k, SliceAxis(kt, 0, r, r + 1), {row, zero, pos, zero});
      cache.v = DynamicUpdateSlice(cache.v, SliceAxis(vt, 0, r, r + 1), {row, zero, pos, zero});
    }
    keys = cache.k;
    values = cache.v;
  }
  Tensor attn = nn::GroupedAttention(q, keys, values, mask, 1.0 / std::sqrt(static_cast<double>(d)),
                                     trace, a + "attn");
  attn = Reshape(attn, {bsz, t, hq * d});
  Tensor hidden = x + nn::Linear(attn, W("self_attn.o_proj.weight"), trace, a + "o_proj");

  Tensor n = nn::RmsNormLayer(hidden, W("post_attention_layernorm.weight"), eps, trace,
                              p + "post_attention_layernorm");
  return hidden + FeedForward(c, w, layer, n, trace);
}

// Final norm and LM head on [B, H] hidden states -> f32 logits [B, V].
Tensor Head(const ModelConfig& c, const Weights& w, const Tensor& x, nn::LayerTrace* trace) {
  Tensor n = nn::RmsNormLayer(x, w.at("model.norm.weight"), c.rms_norm_eps, trace, "model.norm");
  nn::LayerScope scope(trace, x.builder(), nn::kLmHeadLayer, "lm_head");
  const Tensor& head =
      c.tie_word_embeddings ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight");
  Tensor logits = nn::Linear(n, head, trace, "lm_head");
  return logits.element_type() == ElementType::kF32 ? logits : Convert(logits, ElementType::kF32);
}

StatusOr<std::shared_ptr<Module>> Build(const ModelConfig& c, const ProgramShape& shape, Mode mode,
                                        nn::LayerTrace* trace) {
  TL_RETURN_IF_ERROR(CheckSupported(c));
  const int64_t bsz = shape.batch, s = shape.max_len;
  const int64_t t = mode == Mode::kPrefill ? shape.prompt_len : 1;
  if (bsz <= 0 || t <= 0 || s <= 0 || t > s)
    return InvalidArgument("Qwen3 program shape: batch " + std::to_string(bsz) + ", prompt " +
                           std::to_string(t) + ", max_len " + std::to_string(s) +
                           " (expected positive sizes with prompt <= max_len)");
  if (shape.dtype != ElementType::kF32 && shape.dtype != ElementType::kBF16 &&
      shape.dtype != ElementType::kF16)
    return InvalidArgument("Qwen3 program dtype " + std::string(MlirName(shape.dtype)) +
                           ": expected f32, bf16 or f16");
  auto module = std::make_shared<Module>("qwen3");
  FunctionBuilder fb(module.get(),
                     std::string(mode == Mode::kPrefill ? kPrefillEntry : kDecodeEntry));
  OpBuilder& b = fb.ops();
  Weights w = AddWeightArgs(fb, c, shape.dtype);
  const std::vector<int64_t> tok_dims =
      mode == Mode::kPrefill ? std::vector<int64_t>{bsz, t} : std::vector<int64_t>{bsz};
  Tensor tokens = fb.AddArg(TensorType(ElementType::kS32, tok_dims));
  Tensor positions = fb.AddArg(TensorType(ElementType::kS32, tok_dims));
  Tensor lengths;
  if (mode == Mode::kPrefill) lengths = fb.AddArg(TensorType(ElementType::kS32, {bsz}));
  Tensor key = fb.AddArg(TensorType(ElementType::kU32, {2}));
  Tensor step = fb.AddArg(TensorType(ElementType::kU32, {}));
  std::vector<LayerCache> caches(c.num_hidden_layers);
  TensorType cache_type = KvCacheType(c, shape);
  for (auto& lc : caches) {
    lc.k = fb.AddArg(cache_type);
    lc.v = fb.AddArg(cache_type);
  }

  Tensor pos2 = mode == Mode::kPrefill ? positions : Reshape(positions, {bsz, 1});
  Tensor x = nn::Embedding(w.at("model.embed_tokens.weight"),
                           mode == Mode::kPrefill ? tokens : Reshape(tokens, {bsz, 1}), trace,
                           "model.embed_tokens");
  auto [cos, sin] = nn::RotaryTables(pos2, c.head_dim, c.rope_theta);

  Tensor mask;
  if (mode == Mode::kPrefill) {
    // Query i may see key j when j <= i (causal) and j < length (not padding).
    Tensor qi = Iota(b, {bsz, t, t}, 1), kj = Iota(b, {bsz, t, t}, 2);
    Tensor len = BroadcastInDim(lengths, {bsz, t, t}, {0});
    mask = Le(kj, qi) & Lt(kj, len);
  } else {
    // The query at position p sees cache slots 0..p (its own key was just written at p).
    Tensor kj = Iota(b, {bsz, 1, s}, 2);
    mask = Le(kj, BroadcastInDim(positions, {bsz, 1, s}, {0}));
  }

  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    x = DecoderLayer(c, w, l, mode, x, pos2, cos, sin, mask, caches[l], trace);

  // Hidden state of each row's last real token: a one-hot contraction over T (exact: one 1).
  Tensor last;
  if (mode == Mode::kPrefill) {
    Tensor sel = OneHot(lengths - FullLike(lengths, 1), t, x.element_type());  // [B, T]
    last = Einsum("bt,bth->bh", sel, x);
  } else {
    last = Reshape(x, {bsz, c.hidden_size});
  }
  Tensor logits = Head(c, w, last, trace);
  Tensor next;
  {
    nn::LayerScope scope(trace, &b, nn::kSamplerLayer, "sampler");
    Tensor candidates = logits;
    if (shape.sample_vocab > 0 && shape.sample_vocab < c.vocab_size) {
      Tensor ids = Iota(b, {bsz, c.vocab_size}, 1);
      candidates = Where(Lt(ids, FullLike(ids, static_cast<double>(shape.sample_vocab))), logits,
                         FullLike(logits, -std::numeric_limits<double>::infinity()));
    }
    next = nn::SampleTokens(candidates, key, step, shape.sampling);
  }
  std::vector<Tensor> results{next, logits};
  for (auto& lc : caches) {
    results.push_back(lc.k);
    results.push_back(lc.v);
  }
  TL_RETURN_IF_ERROR(fb.Return(results));
  // Each cache argument aliases its updated result (tf.aliasing_output), so PJRT backends can
  // donate the buffer the way the interpreter does.
  Function* fn = fb.function();
  const int first_cache = fn->num_arguments() - 2 * static_cast<int>(c.num_hidden_layers);
  for (int i = 0; i < 2 * static_cast<int>(c.num_hidden_layers); ++i)
    fn->arg_attrs(first_cache + i)["tf.aliasing_output"] = Attribute::Int(2 + i, ElementType::kS32);
  return module;
}

}  // namespace

Tensor FeedForward(const io::ModelConfig& c, const std::map<std::string, Tensor>& w, int64_t layer,
                   const Tensor& n, nn::LayerTrace* trace) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  auto W = [&](const std::string& name) { return w.at(p + name); };
  const int64_t bsz = n.dim(0), t = n.dim(1);
  Tensor mlp;
  if (c.IsMoeLayer(layer)) {
    std::vector<Tensor> gs, us, ds;
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::string ep = "mlp.experts." + std::to_string(e) + ".";
      gs.push_back(W(ep + "gate_proj.weight"));
      us.push_back(W(ep + "up_proj.weight"));
      ds.push_back(W(ep + "down_proj.weight"));
    }
    Tensor flat = Reshape(n, {bsz * t, c.hidden_size});
    mlp = Reshape(nn::SparseMoe(flat, W("mlp.gate.weight"), gs, us, ds, c.num_experts_per_tok,
                                c.norm_topk_prob, trace, p + "mlp"),
                  {bsz, t, c.hidden_size});
  } else {
    mlp = nn::SwiGluMlp(n, W("mlp.gate_proj.weight"), W("mlp.up_proj.weight"),
                        W("mlp.down_proj.weight"), trace, p + "mlp");
  }
  return mlp;
}

Status CheckSupported(const ModelConfig& c) {
  TL_RETURN_IF_ERROR(io::ValidateModelConfig(c));
  if (c.hidden_act != "silu")
    return InvalidArgument("config hidden_act \"" + c.hidden_act +
                           "\": Tlaloc's Qwen3 expects silu");
  if (c.attention_bias)
    return InvalidArgument("config attention_bias true: Tlaloc's Qwen3 has no projection biases");
  if (c.use_sliding_window)
    return InvalidArgument(
        "config use_sliding_window true: sliding-window attention is not "
        "implemented");
  if (c.rope_scaling && c.rope_scaling->rope_type != "default")
    return InvalidArgument("config rope_scaling type \"" + c.rope_scaling->rope_type +
                           "\": only the default rotary embedding is implemented");
  if (c.head_dim % 2 != 0)
    return InvalidArgument("config head_dim " + std::to_string(c.head_dim) + ": expected even");
  return OkStatus();
}

std::vector<WeightSpec> WeightSpecs(const ModelConfig& c) {
  std::vector<WeightSpec> out;
  for (const auto& t : io::ExpectedTensors(c))
    if (!t.optional) out.push_back({t.name, t.shape});
  return out;
}

TensorType KvCacheType(const ModelConfig& c, const ProgramShape& shape) {
  return TensorType(shape.dtype, {shape.batch, c.num_key_value_heads, shape.max_len, c.head_dim});
}

StatusOr<std::shared_ptr<Module>> BuildPrefill(const ModelConfig& c, const ProgramShape& shape,
                                               nn::LayerTrace* trace) {
  return Build(c, shape, Mode::kPrefill, trace);
}

StatusOr<std::shared_ptr<Module>> BuildDecodeStep(const ModelConfig& c, const ProgramShape& shape,
                                                  nn::LayerTrace* trace) {
  return Build(c, shape, Mode::kDecode, trace);
}

}  // namespace tlaloc::models
