// Qwen3-MoE as llama.cpp's `qwen3moe` architecture: what its graph can express, the keys it
// adds to qwen3's, and each MoE layer's router and stacked experts under llama.cpp's names.
// llama.cpp's qwen3moe graph (src/models/qwen3moe.cpp) routes with a softmax over all experts,
// always renormalises the top-k weights and makes every layer sparse.
#include "models/qwen3/qwen3_family.h"
#include "tlaloc/io/checkpoint.h"

namespace tlaloc::models::qwen3 {

namespace {

std::string Shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Status CheckQwen3MoeExportable(const ModelConfig& c, const std::string& where) {
  if (!c.norm_topk_prob)
    return Unimplemented(where +
                         ": norm_topk_prob false: llama.cpp's qwen3moe always renormalises the "
                         "top-k routing weights, so the GGUF file would compute another model");
  if (c.decoder_sparse_step != 1)
    return Unimplemented(where + ": decoder_sparse_step " + std::to_string(c.decoder_sparse_step) +
                         ": llama.cpp's qwen3moe makes every layer sparse (expected 1)");
  if (!c.mlp_only_layers.empty())
    return Unimplemented(where + ": mlp_only_layers is not empty (" +
                         std::to_string(c.mlp_only_layers.size()) +
                         " dense layers): llama.cpp's qwen3moe makes every layer sparse");
  if (c.num_experts <= 0)
    return Unimplemented(where + ": num_experts " + std::to_string(c.num_experts) +
                         ": llama.cpp's qwen3moe needs experts");
  return OkStatus();
}

std::vector<io::GgufKeyValue> Qwen3MoeKeys(const ModelConfig& c) {
  auto u32 = [](int64_t v) { return io::GgufValue::U32(static_cast<uint32_t>(v)); };
  return {{"qwen3moe.expert_count", u32(c.num_experts)},
          {"qwen3moe.expert_used_count", u32(c.num_experts_per_tok)},
          {"qwen3moe.expert_feed_forward_length", u32(c.moe_intermediate_size)}};
}

StatusOr<std::vector<std::pair<std::string, Literal>>> Qwen3MoeLayerTensors(
    const io::Checkpoint& checkpoint, const ModelConfig& c, int64_t layer,
    const std::string& where) {
  const std::string l = "model.layers." + std::to_string(layer) + ".";
  const std::string blk = "blk." + std::to_string(layer) + ".";
  auto get = [&](const std::string& name, const std::vector<int64_t>& shape) -> StatusOr<Literal> {
    const io::SafetensorsTensorInfo* info = checkpoint.Find(name);
    if (!info) return NotFound(where + ": missing tensor \"" + name + "\"");
    if (info->shape != shape)
      return InvalidArgument(where + ": tensor \"" + name + "\" has shape " + Shape(info->shape) +
                             ", expected " + Shape(shape));
    TL_ASSIGN_OR_RETURN(Literal value, checkpoint.Get(name));
    if (!IsFloat(value.element_type()))
      return InvalidArgument(where + ": tensor \"" + name + "\" is " +
                             std::string(ShortName(value.element_type())) +
                             " (expected a float type)");
    return value;
  };
  std::vector<std::pair<std::string, Literal>> out;
  const int64_t h = c.hidden_size, w = c.moe_intermediate_size, e = c.num_experts;
  TL_ASSIGN_OR_RETURN(Literal router, get(l + "mlp.gate.weight", {e, h}));
  out.emplace_back(blk + "ffn_gate_inp.weight", std::move(router));
  // ffn_{gate,up,down}_exps: the experts' [out, in] matrices stacked [E, out, in] (GGUF lists
  // the dimensions reversed, same bytes). Each expert keeps its stored type; mixed types widen.
  struct Proj {
    const char* hf;
    const char* gguf;
    std::vector<int64_t> shape;
  };
  for (const Proj& p :
       {Proj{"gate_proj", "ffn_gate_exps", {w, h}}, Proj{"up_proj", "ffn_up_exps", {w, h}},
        Proj{"down_proj", "ffn_down_exps", {h, w}}}) {
    std::vector<Literal> parts;
    ElementType et = ElementType::kF32;
    for (int64_t i = 0; i < e; ++i) {
      TL_ASSIGN_OR_RETURN(
          Literal part,
          get(l + "mlp.experts." + std::to_string(i) + "." + p.hf + ".weight", p.shape));
      if (i == 0) et = part.element_type();
      if (part.element_type() != et) et = ElementType::kF32;
      parts.push_back(std::move(part));
    }
    Literal stacked(TensorType(et, {e, p.shape[0], p.shape[1]}));
    const int64_t bytes = p.shape[0] * p.shape[1] * (BitWidth(et) / 8);
    for (int64_t i = 0; i < e; ++i) {
      Literal part = ConvertElementType(parts[i], et);
      std::memcpy(stacked.data() + i * bytes, part.data(), bytes);
    }
    out.emplace_back(blk + p.gguf + ".weight", std::move(stacked));
  }
  return out;
}

}  // namespace tlaloc::models::qwen3
