// Qwen3 training forward (see qwen3_train.h), built from the same nn/ layers as the prefill
// program so the two compute the same function.
#include "tlaloc/models/qwen3_train.h"

#include <cmath>

#include "tlaloc/models/qwen3.h"
#include "tlaloc/nn/layers.h"

namespace tlaloc::models {

StatusOr<TrainInputs> TrainEmbed(const io::ModelConfig& c, const WeightTensors& w,
                                 const Tensor& input_ids) {
  TL_RETURN_IF_ERROR(CheckSupported(c));
  if (input_ids.rank() != 2 || input_ids.element_type() != ElementType::kS32)
    return InvalidArgument("Qwen3 training forward: input_ids " + input_ids.type().ToString() +
                           ": expected s32 [batch, seq_len]");
  OpBuilder& b = *input_ids.builder();
  const int64_t bsz = input_ids.dim(0), t = input_ids.dim(1);
  TrainInputs in;
  in.hidden = nn::Embedding(w.at("model.embed_tokens.weight"), input_ids);
  Tensor positions = Iota(b, {bsz, t}, 1);
  std::tie(in.cos, in.sin) = nn::RotaryTables(positions, c.head_dim, c.rope_theta);
  in.mask = Le(Iota(b, {bsz, t, t}, 2), Iota(b, {bsz, t, t}, 1));
  return in;
}

Tensor TrainDecoderLayer(const io::ModelConfig& c, const WeightTensors& w, int64_t layer,
                         const Tensor& x, const TrainInputs& in) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  auto W = [&](const std::string& name) { return w.at(p + name); };
  const int64_t bsz = x.dim(0), t = x.dim(1), d = c.head_dim;
  const int64_t hq = c.num_attention_heads, hkv = c.num_key_value_heads;
  const double eps = c.rms_norm_eps;
  Tensor h = nn::RmsNormLayer(x, W("input_layernorm.weight"), eps);
  Tensor q = Reshape(nn::Linear(h, W("self_attn.q_proj.weight")), {bsz, t, hq, d});
  Tensor k = Reshape(nn::Linear(h, W("self_attn.k_proj.weight")), {bsz, t, hkv, d});
  Tensor v = Reshape(nn::Linear(h, W("self_attn.v_proj.weight")), {bsz, t, hkv, d});
  q = nn::ApplyRotary(nn::RmsNormLayer(q, W("self_attn.q_norm.weight"), eps), in.cos, in.sin);
  k = nn::ApplyRotary(nn::RmsNormLayer(k, W("self_attn.k_norm.weight"), eps), in.cos, in.sin);
  Tensor attn = nn::GroupedAttention(q, Transpose(k, {0, 2, 1, 3}), Transpose(v, {0, 2, 1, 3}),
                                     in.mask, 1.0 / std::sqrt(static_cast<double>(d)));
  Tensor hidden = x + nn::Linear(Reshape(attn, {bsz, t, hq * d}), W("self_attn.o_proj.weight"));
  Tensor n = nn::RmsNormLayer(hidden, W("post_attention_layernorm.weight"), eps);
  return hidden + FeedForward(c, w, layer, n);
}

Tensor TrainFinalNorm(const io::ModelConfig& c, const WeightTensors& w, const Tensor& x) {
  return nn::RmsNormLayer(x, w.at("model.norm.weight"), c.rms_norm_eps);
}

const Tensor& TrainHeadWeight(const io::ModelConfig& c, const WeightTensors& w) {
  return c.tie_word_embeddings ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight");
}

}  // namespace tlaloc::models
