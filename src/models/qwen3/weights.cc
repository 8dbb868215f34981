// The tensors a Qwen3 / Qwen3-MoE checkpoint holds, in transformers' names and PyTorch shapes
// ([out, in] for projections).
#include "models/qwen3/qwen3_family.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/ir/type.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::models::qwen3 {

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
    if (const io::FeedForward ff = c.FeedForwardOf(i); ff.sparse()) {
      add(l + "mlp.gate.weight", {ff.experts, h});
      for (int64_t e = 0; e < ff.experts; ++e)
        add_mlp(l + "mlp.experts." + std::to_string(e) + ".", ff.expert_width);
    } else {
      add_mlp(l + "mlp.", c.intermediate_size);
    }
  }
  add("model.norm.weight", {h});
  // A tied head shares the embedding; its file may still store a copy.
  add("lm_head.weight", {c.vocab_size, h}, c.tie_word_embeddings);
  // int8 checkpoints (io::WeightQuantization): every matrix but an MoE router quantized.
  return decoder::Int8CheckpointTensors(c, std::move(out), [](const ExpectedTensor& t) {
    return t.name.find("mlp.gate.weight") != std::string::npos;
  });
}

std::vector<WeightSpec> WeightSpecs(const ModelConfig& c) {
  // The checkpoint's tensors, except that an MoE layer's experts enter the programs stacked
  // ([E, out, in] per projection), so that one grouped product or gather reads any subset.
  std::vector<WeightSpec> out;
  for (const auto& t : ExpectedTensors(c)) {
    if (t.optional || t.name.find(".mlp.experts.") != std::string::npos) continue;
    out.push_back({t.name, t.shape, {}, t.fixed_type});
    const std::string router = "mlp.gate.weight";
    if (t.name.size() <= router.size() ||
        t.name.compare(t.name.size() - router.size(), router.size(), router) != 0)
      continue;
    const std::string l = t.name.substr(0, t.name.size() - router.size());
    const int64_t h = c.hidden_size, w = Moe(c).moe_intermediate_size, e_count = Moe(c).num_experts;
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      WeightSpec s;
      s.name = l + "mlp.experts." + proj + ".weight";
      s.shape = std::string(proj) == "down_proj" ? std::vector<int64_t>{e_count, h, w}
                                                 : std::vector<int64_t>{e_count, w, h};
      for (int64_t e = 0; e < e_count; ++e)
        s.stacked.push_back(l + "mlp.experts." + std::to_string(e) + "." + proj + ".weight");
      // A GGUF import's experts are float (dequantised at import).
      if (!c.quantization || !c.quantization->formats.empty()) {
        out.push_back(std::move(s));
        continue;
      }
      // int8 experts: the stacked s8 matrices [E, out, in], then their stacked f16 scales
      // [E, out, in / block], each expert's scales named after its matrix.
      WeightSpec scale;
      scale.name = Int8ScaleName(s.name);
      scale.shape = s.shape;
      scale.shape.back() /= c.quantization->group_size;
      for (const std::string& part : s.stacked) scale.stacked.push_back(Int8ScaleName(part));
      scale.fixed_type = ElementType::kF16;
      s.fixed_type = ElementType::kS8;
      out.push_back(std::move(s));
      out.push_back(std::move(scale));
    }
  }
  // Untied, the embedding is only gathered by token id; tied, the head reads it whole.
  for (auto& spec : out) {
    if (spec.name == "model.embed_tokens.weight") spec.read_by_rows = !c.tie_word_embeddings;
    spec.tensor_parallel_dim = decoder::TensorParallelDim(spec.name);
  }
  return out;
}

}  // namespace tlaloc::models::qwen3
