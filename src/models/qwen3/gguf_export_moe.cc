// Qwen3-MoE as llama.cpp's `qwen3moe` architecture: what its graph can express, the keys it
// adds to qwen3's (and the config fields the import reads back from them), and each MoE layer's
// router and stacked experts under llama.cpp's names.
// llama.cpp's qwen3moe graph (src/models/qwen3moe.cpp) routes with a softmax over all experts,
// always renormalises the top-k weights and makes every layer sparse. An int8 checkpoint's
// experts go as Q8_0, as dense int8 matrices do.
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "models/decoder/gguf_import_internal.h"
#include "models/qwen3/qwen3_family.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::models::qwen3 {

namespace {

std::string Shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Status CheckQwen3MoeExportable(const ModelConfig& config, const std::string& where) {
  const MoeConfig& c = Moe(config);
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

std::vector<io::GgufKeyValue> Qwen3MoeKeys(const ModelConfig& config) {
  const MoeConfig& c = Moe(config);
  auto u32 = [](int64_t v) { return io::GgufValue::U32(static_cast<uint32_t>(v)); };
  return {{"qwen3moe.expert_count", u32(c.num_experts)},
          {"qwen3moe.expert_used_count", u32(c.num_experts_per_tok)},
          {"qwen3moe.expert_feed_forward_length", u32(c.moe_intermediate_size)}};
}

Status Qwen3MoeImportConfig(const io::GgufContents& gguf, const std::string& src,
                            nlohmann::ordered_json& config) {
  TL_ASSIGN_OR_RETURN(config["num_experts"], decoder::GgufInt(gguf, "qwen3moe.expert_count", src));
  TL_ASSIGN_OR_RETURN(config["num_experts_per_tok"],
                      decoder::GgufInt(gguf, "qwen3moe.expert_used_count", src));
  TL_ASSIGN_OR_RETURN(const int64_t width,
                      decoder::GgufInt(gguf, "qwen3moe.expert_feed_forward_length", src));
  config["moe_intermediate_size"] = width;
  TL_ASSIGN_OR_RETURN(config["intermediate_size"],
                      decoder::GgufInt(gguf, "qwen3moe.feed_forward_length", src, width));
  // llama.cpp's qwen3moe makes every layer sparse and renormalises the top-k weights.
  config["norm_topk_prob"] = true;
  config["decoder_sparse_step"] = 1;
  config["mlp_only_layers"] = nlohmann::ordered_json::array();
  return OkStatus();
}

StatusOr<std::vector<io::GgufTensorToWrite>> Qwen3MoeLayerTensors(const io::Checkpoint& checkpoint,
                                                                  const ModelConfig& c,
                                                                  int64_t layer,
                                                                  const std::string& where) {
  const std::string l = "model.layers." + std::to_string(layer) + ".";
  const std::string blk = "blk." + std::to_string(layer) + ".";
  // A checkpoint tensor of this shape: a float one, or (`fixed`) one of exactly that type.
  auto get = [&](const std::string& name, const std::vector<int64_t>& shape,
                 std::optional<ElementType> fixed = std::nullopt) -> StatusOr<Literal> {
    const io::SafetensorsTensorInfo* info = checkpoint.Find(name);
    if (!info) return NotFound(where + ": missing tensor \"" + name + "\"");
    if (info->shape != shape)
      return InvalidArgument(where + ": tensor \"" + name + "\" has shape " + Shape(info->shape) +
                             ", expected " + Shape(shape));
    TL_ASSIGN_OR_RETURN(Literal value, checkpoint.Get(name));
    if (fixed ? value.element_type() != *fixed : !IsFloat(value.element_type()))
      return InvalidArgument(where + ": tensor \"" + name + "\" is " +
                             std::string(ShortName(value.element_type())) + " (expected " +
                             (fixed ? std::string(ShortName(*fixed)) + ", an int8 checkpoint's"
                                    : std::string("a float type")) +
                             ")");
    return value;
  };
  // Experts e = 0.. of `parts` stacked [E, ...] in type `et` (each converted to it).
  auto stack = [](const std::vector<Literal>& parts, ElementType et) {
    std::vector<int64_t> dims = parts[0].dims();
    dims.insert(dims.begin(), static_cast<int64_t>(parts.size()));
    Literal stacked(TensorType(et, dims));
    const int64_t bytes = parts[0].num_elements() * (BitWidth(et) / 8);
    for (size_t i = 0; i < parts.size(); ++i) {
      Literal part = ConvertElementType(parts[i], et);
      std::memcpy(stacked.data() + static_cast<int64_t>(i) * bytes, part.data(), bytes);
    }
    return stacked;
  };
  std::vector<io::GgufTensorToWrite> out;
  const int64_t h = c.hidden_size, w = Moe(c).moe_intermediate_size, e = Moe(c).num_experts;
  TL_ASSIGN_OR_RETURN(Literal router, get(l + "mlp.gate.weight", {e, h}));
  out.push_back({blk + "ffn_gate_inp.weight", std::move(router)});
  // ffn_{gate,up,down}_exps: the experts' [out, in] matrices stacked [E, out, in] (GGUF lists
  // the dimensions reversed, same bytes). Each expert keeps its stored type; mixed types widen.
  // int8 experts (quantization_config) are Q8_0's blocks as they are: the stacked s8 values
  // and the stacked f16 scales of every 32 inputs.
  struct Proj {
    const char* hf;
    const char* gguf;
    std::vector<int64_t> shape;
  };
  for (const Proj& p :
       {Proj{"gate_proj", "ffn_gate_exps", {w, h}}, Proj{"up_proj", "ffn_up_exps", {w, h}},
        Proj{"down_proj", "ffn_down_exps", {h, w}}}) {
    std::vector<Literal> parts, scales;
    ElementType et = ElementType::kF32;
    for (int64_t i = 0; i < e; ++i) {
      const std::string name = l + "mlp.experts." + std::to_string(i) + "." + p.hf + ".weight";
      if (c.quantization) {
        TL_ASSIGN_OR_RETURN(Literal q, get(name, p.shape, ElementType::kS8));
        TL_ASSIGN_OR_RETURN(Literal d,
                            get(Int8ScaleName(name), {p.shape[0], p.shape[1] / kQ8_0BlockElements},
                                ElementType::kF16));
        parts.push_back(std::move(q));
        scales.push_back(std::move(d));
        continue;
      }
      TL_ASSIGN_OR_RETURN(Literal part, get(name, p.shape));
      if (i == 0) et = part.element_type();
      if (part.element_type() != et) et = ElementType::kF32;
      parts.push_back(std::move(part));
    }
    const std::string name = blk + p.gguf + ".weight";
    if (c.quantization)
      out.push_back({name, stack(parts, ElementType::kS8), io::GgmlType::kQ8_0,
                     stack(scales, ElementType::kF16)});
    else
      out.push_back({name, stack(parts, et)});
  }
  return out;
}

}  // namespace tlaloc::models::qwen3
