// The tensors a Qwen3 / Qwen3-MoE checkpoint holds, in transformers' names and PyTorch shapes
// ([out, in] for projections).
#include <limits>

#include "io/io_util.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/type.h"
#include "tlaloc/support/checked_math.h"

namespace tlaloc::io {

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> out;
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim;
  auto add = [&](std::string name, std::vector<int64_t> shape, bool optional = false) {
    out.push_back({std::move(name), std::move(shape), optional});
  };
  auto add_mlp = [&](const std::string& prefix, int64_t width) {
    add(prefix + "gate_proj.weight", {width, h});
    add(prefix + "up_proj.weight", {width, h});
    add(prefix + "down_proj.weight", {h, width});
  };
  add("model.embed_tokens.weight", {c.vocab_size, h});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    add(l + "input_layernorm.weight", {h});
    add(l + "post_attention_layernorm.weight", {h});
    const std::string a = l + "self_attn.";
    add(a + "q_proj.weight", {q, h});
    add(a + "k_proj.weight", {kv, h});
    add(a + "v_proj.weight", {kv, h});
    add(a + "o_proj.weight", {h, q});
    if (c.attention_bias) {
      add(a + "q_proj.bias", {q});
      add(a + "k_proj.bias", {kv});
      add(a + "v_proj.bias", {kv});
      add(a + "o_proj.bias", {h});
    }
    add(a + "q_norm.weight", {c.head_dim});
    add(a + "k_norm.weight", {c.head_dim});
    if (c.IsMoeLayer(i)) {
      add(l + "mlp.gate.weight", {c.num_experts, h});
      for (int64_t e = 0; e < c.num_experts; ++e)
        add_mlp(l + "mlp.experts." + std::to_string(e) + ".", c.moe_intermediate_size);
    } else {
      add_mlp(l + "mlp.", c.intermediate_size);
    }
  }
  add("model.norm.weight", {h});
  // A tied head shares the embedding; its file may still store a copy.
  add("lm_head.weight", {c.vocab_size, h}, c.tie_word_embeddings);
  return out;
}

std::optional<int64_t> CountParameters(const ModelConfig& c) {
  bool fits = true;
  auto mul = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    fits = fits && CheckedMul(a, b, &r);
    return r;
  };
  auto add = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    fits = fits && CheckedAdd(a, b, &r);
    return r;
  };
  const int64_t h = c.hidden_size, q = mul(c.num_attention_heads, c.head_dim),
                kv = mul(c.num_key_value_heads, c.head_dim);
  // Norms, attention projections (and biases), q/k norms: the same in every layer.
  int64_t attention = add(add(mul(2, h), mul(2, mul(q, h))), mul(2, mul(kv, h)));
  if (c.attention_bias) attention = add(attention, add(add(q, mul(2, kv)), h));
  attention = add(attention, mul(2, c.head_dim));
  const int64_t dense = mul(3, mul(c.intermediate_size, h));
  const int64_t moe =
      add(mul(c.num_experts, h), mul(c.num_experts, mul(3, mul(c.moe_intermediate_size, h))));
  const int64_t embedding = mul(c.vocab_size, h);
  int64_t total = add(embedding, h);
  if (!c.tie_word_embeddings) total = add(total, embedding);
  for (int64_t i = 0; i < c.num_hidden_layers && fits; ++i)
    total = add(total, add(attention, c.IsMoeLayer(i) ? moe : dense));
  if (!fits) return std::nullopt;
  return total;
}

int64_t ParameterCount(const ModelConfig& c) {
  return CountParameters(c).value_or(std::numeric_limits<int64_t>::max());
}

}  // namespace tlaloc::io
