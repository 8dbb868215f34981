// Qwen3's and Qwen3-MoE's share of config.json (io::ConfigFamily): their config classes'
// defaults and their own fields, the sliding window and the experts.
#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "models/qwen3/qwen3_family.h"

namespace tlaloc::models::qwen3 {

namespace {

using nlohmann::json;

// transformers' Qwen3MoeConfig's own defaults; it has no head_dim field (hidden / heads is used).
void MoeDefaults(ModelConfig& c) {
  c.hidden_size = 2048;
  c.intermediate_size = 6144;
  c.num_hidden_layers = 24;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 4;
  c.head_dim = c.hidden_size / c.num_attention_heads;
}

Status ParseSlidingWindow(io::JsonFields& f, ModelConfig& c) {
  TL_RETURN_IF_ERROR(f.Bool("use_sliding_window", &c.use_sliding_window));
  std::optional<int64_t> window = 4096;
  TL_RETURN_IF_ERROR(f.OptionalInt("sliding_window", &window));
  // transformers keeps the window only when use_sliding_window is set; so do we.
  c.sliding_window = c.use_sliding_window ? window : std::nullopt;
  return f.Int("max_window_layers", &c.max_window_layers);
}

Status ParseMoe(io::JsonFields& f, ModelConfig& c) {
  TL_RETURN_IF_ERROR(ParseSlidingWindow(f, c));
  TL_RETURN_IF_ERROR(f.Int("decoder_sparse_step", &c.decoder_sparse_step));
  TL_RETURN_IF_ERROR(f.Int("moe_intermediate_size", &c.moe_intermediate_size));
  TL_RETURN_IF_ERROR(f.Int("num_experts_per_tok", &c.num_experts_per_tok));
  // Newer transformers stores num_experts under its attribute-map name num_local_experts.
  int64_t local = c.num_experts;
  TL_RETURN_IF_ERROR(f.Int("num_experts", &c.num_experts));
  TL_RETURN_IF_ERROR(f.Int("num_local_experts", &local));
  if (f.Has("num_local_experts")) {
    if (f.Has("num_experts") && local != c.num_experts)
      return f.Error("num_experts and num_local_experts disagree");
    c.num_experts = local;
  }
  TL_RETURN_IF_ERROR(f.Bool("norm_topk_prob", &c.norm_topk_prob));
  TL_RETURN_IF_ERROR(f.Bool("output_router_logits", &c.output_router_logits));
  TL_RETURN_IF_ERROR(f.Double("router_aux_loss_coef", &c.router_aux_loss_coef));
  return f.IntList("mlp_only_layers", &c.mlp_only_layers);
}

void WriteSlidingWindow(const ModelConfig& c, json& j) {
  j["use_sliding_window"] = c.use_sliding_window;
  j["sliding_window"] = c.sliding_window ? json(*c.sliding_window) : json();
  j["max_window_layers"] = c.max_window_layers;
}

void WriteMoe(const ModelConfig& c, json& j) {
  WriteSlidingWindow(c, j);
  j["decoder_sparse_step"] = c.decoder_sparse_step;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["num_experts"] = c.num_experts;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["output_router_logits"] = c.output_router_logits;
  j["router_aux_loss_coef"] = c.router_aux_loss_coef;
  j["mlp_only_layers"] = c.mlp_only_layers;
}

}  // namespace

io::ConfigFamily ConfigFamilyOf(const io::ModelArchitecture& arch) {
  const bool moe = arch == io::ModelArchitecture::kQwen3Moe;
  io::ConfigFamily f;
  f.architecture = arch;
  f.head_dim_from_heads = moe;
  f.sparse_moe = moe;
  f.defaults = moe ? MoeDefaults : nullptr;  // Qwen3Config's are the shared ones
  f.parse = moe ? ParseMoe : ParseSlidingWindow;
  f.write = moe ? WriteMoe : WriteSlidingWindow;
  return f;
}

}  // namespace tlaloc::models::qwen3
