// Qwen3's and Qwen3-MoE's share of config.json (io::ConfigFamily): their config classes'
// defaults and their own fields, the sliding window and the experts (tlaloc/models/qwen3.h),
// with their checks, the layer types the window implies and the feed-forward block each layer
// has.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "models/qwen3/qwen3_family.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::models::qwen3 {

bool MoeConfig::IsSparseLayer(int64_t layer) const {
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end())
    return false;
  return num_experts > 0 && decoder_sparse_step > 0 && (layer + 1) % decoder_sparse_step == 0;
}

namespace {

const Qwen3Fields& Fields(const io::ModelConfig& c) {
  static const Qwen3Fields kDefaults;
  const Qwen3Fields* f = std::any_cast<Qwen3Fields>(&c.family_fields);
  return f ? *f : kDefaults;
}

Qwen3Fields& MutableFields(io::ModelConfig& c) {
  if (!std::any_cast<Qwen3Fields>(&c.family_fields)) c.family_fields = Qwen3Fields{};
  return *std::any_cast<Qwen3Fields>(&c.family_fields);
}

}  // namespace

const SlidingWindowConfig& SlidingWindow(const io::ModelConfig& c) { return Fields(c).window; }

SlidingWindowConfig& MutableSlidingWindow(io::ModelConfig& c) { return MutableFields(c).window; }

const MoeConfig& Moe(const io::ModelConfig& c) { return Fields(c).moe; }

MoeConfig& MutableMoe(io::ModelConfig& c) { return MutableFields(c).moe; }

namespace {

using nlohmann::json;

Status Positive(const char* name, int64_t v) {
  if (v <= 0)
    return InvalidArgument(std::string(name) + " must be positive, got " + std::to_string(v));
  return OkStatus();
}

Status CheckExpertCount(const MoeConfig& m) {
  if (m.num_experts > io::kMaxExperts)
    return InvalidArgument("num_experts " + std::to_string(m.num_experts) +
                           " is more than Tlaloc supports (" + std::to_string(io::kMaxExperts) +
                           ")");
  return OkStatus();
}

// transformers' Qwen3Config's defaults are io's shared ones; its own fields' are Qwen3Fields'.
void Defaults(ModelConfig& c) { c.family_fields = Qwen3Fields{}; }

// transformers' Qwen3MoeConfig's own defaults; it has no head_dim field (hidden / heads is used).
void MoeDefaults(ModelConfig& c) {
  c.hidden_size = 2048;
  c.intermediate_size = 6144;
  c.num_hidden_layers = 24;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 4;
  c.head_dim = c.hidden_size / c.num_attention_heads;
  c.family_fields = Qwen3Fields{};
}

Status ParseSlidingWindow(io::JsonFields& f, ModelConfig& c) {
  SlidingWindowConfig& w = MutableSlidingWindow(c);
  TL_RETURN_IF_ERROR(f.Bool("use_sliding_window", &w.use_sliding_window));
  std::optional<int64_t> window = 4096;
  TL_RETURN_IF_ERROR(f.OptionalInt("sliding_window", &window));
  // transformers keeps the window only when use_sliding_window is set; so do we.
  w.sliding_window = w.use_sliding_window ? window : std::nullopt;
  return f.Int("max_window_layers", &w.max_window_layers);
}

Status ValidateSlidingWindow(const ModelConfig& c) {
  const SlidingWindowConfig& w = SlidingWindow(c);
  if (w.use_sliding_window && (!w.sliding_window || *w.sliding_window <= 0))
    return InvalidArgument("use_sliding_window is set but sliding_window is not positive");
  if (w.max_window_layers < 0) return InvalidArgument("max_window_layers must not be negative");
  return OkStatus();
}

// transformers' rule when layer_types is absent: layers from max_window_layers on slide.
std::vector<std::string> LayerTypes(const ModelConfig& c) {
  const SlidingWindowConfig& w = SlidingWindow(c);
  std::vector<std::string> out;
  for (int64_t i = 0; i < std::max<int64_t>(c.num_hidden_layers, 0); ++i)
    out.emplace_back(w.sliding_window && i >= w.max_window_layers ? "sliding_attention"
                                                                  : "full_attention");
  return out;
}

std::optional<int64_t> Window(const ModelConfig& c) { return SlidingWindow(c).sliding_window; }

Status ParseMoe(io::JsonFields& f, ModelConfig& c) {
  TL_RETURN_IF_ERROR(ParseSlidingWindow(f, c));
  MoeConfig& m = MutableMoe(c);
  TL_RETURN_IF_ERROR(f.Int("decoder_sparse_step", &m.decoder_sparse_step));
  TL_RETURN_IF_ERROR(f.Int("moe_intermediate_size", &m.moe_intermediate_size));
  TL_RETURN_IF_ERROR(f.Int("num_experts_per_tok", &m.num_experts_per_tok));
  // Newer transformers stores num_experts under its attribute-map name num_local_experts.
  int64_t local = m.num_experts;
  TL_RETURN_IF_ERROR(f.Int("num_experts", &m.num_experts));
  TL_RETURN_IF_ERROR(f.Int("num_local_experts", &local));
  if (f.Has("num_local_experts")) {
    if (f.Has("num_experts") && local != m.num_experts)
      return f.Error("num_experts and num_local_experts disagree");
    m.num_experts = local;
  }
  // Before anything lists the experts one by one.
  if (Status count = CheckExpertCount(m); !count.ok()) return f.Error(count.message());
  TL_RETURN_IF_ERROR(f.Bool("norm_topk_prob", &m.norm_topk_prob));
  TL_RETURN_IF_ERROR(f.Bool("output_router_logits", &m.output_router_logits));
  TL_RETURN_IF_ERROR(f.Double("router_aux_loss_coef", &m.router_aux_loss_coef));
  return f.IntList("mlp_only_layers", &m.mlp_only_layers);
}

Status ValidateMoe(const ModelConfig& c) {
  TL_RETURN_IF_ERROR(ValidateSlidingWindow(c));
  const MoeConfig& m = Moe(c);
  TL_RETURN_IF_ERROR(CheckExpertCount(m));
  TL_RETURN_IF_ERROR(Positive("decoder_sparse_step", m.decoder_sparse_step));
  TL_RETURN_IF_ERROR(Positive("moe_intermediate_size", m.moe_intermediate_size));
  if (m.num_experts < 0) return InvalidArgument("num_experts must not be negative");
  if (m.num_experts > 0) {
    TL_RETURN_IF_ERROR(Positive("num_experts_per_tok", m.num_experts_per_tok));
    if (m.num_experts_per_tok > m.num_experts)
      return InvalidArgument("num_experts_per_tok (" + std::to_string(m.num_experts_per_tok) +
                             ") exceeds num_experts (" + std::to_string(m.num_experts) + ")");
  }
  if (m.router_aux_loss_coef < 0) return InvalidArgument("router_aux_loss_coef is negative");
  for (int64_t l : m.mlp_only_layers)
    if (l < 0 || l >= c.num_hidden_layers)
      return InvalidArgument("mlp_only_layers entry " + std::to_string(l) +
                             " is not a layer index in [0, " + std::to_string(c.num_hidden_layers) +
                             ")");
  return OkStatus();
}

io::FeedForward MoeFeedForward(const ModelConfig& c, int64_t layer) {
  const MoeConfig& m = Moe(c);
  if (!m.IsSparseLayer(layer)) return {};
  return {.experts = m.num_experts,
          .experts_per_token = m.num_experts_per_tok,
          .expert_width = m.moe_intermediate_size,
          .normalize_top_k = m.norm_topk_prob};
}

void WriteSlidingWindow(const ModelConfig& c, json& j) {
  const SlidingWindowConfig& w = SlidingWindow(c);
  j["use_sliding_window"] = w.use_sliding_window;
  j["sliding_window"] = w.sliding_window ? json(*w.sliding_window) : json();
  j["max_window_layers"] = w.max_window_layers;
}

void WriteMoe(const ModelConfig& c, json& j) {
  WriteSlidingWindow(c, j);
  const MoeConfig& m = Moe(c);
  j["decoder_sparse_step"] = m.decoder_sparse_step;
  j["moe_intermediate_size"] = m.moe_intermediate_size;
  j["num_experts_per_tok"] = m.num_experts_per_tok;
  j["num_experts"] = m.num_experts;
  j["norm_topk_prob"] = m.norm_topk_prob;
  j["output_router_logits"] = m.output_router_logits;
  j["router_aux_loss_coef"] = m.router_aux_loss_coef;
  j["mlp_only_layers"] = m.mlp_only_layers;
}

}  // namespace

io::ConfigFamily ConfigFamilyOf(bool moe) {
  io::ConfigFamily f;
  f.architecture = moe ? kQwen3Moe : kQwen3;
  f.head_dim_from_heads = moe;
  f.sparse_moe = moe;
  f.qk_norm = true;
  f.defaults = moe ? MoeDefaults : Defaults;
  f.parse = moe ? ParseMoe : ParseSlidingWindow;
  f.write = moe ? WriteMoe : WriteSlidingWindow;
  f.validate = moe ? ValidateMoe : ValidateSlidingWindow;
  f.feed_forward = moe ? MoeFeedForward : nullptr;
  f.layer_types = LayerTypes;
  f.sliding_window = Window;
  return f;
}

}  // namespace tlaloc::models::qwen3
