// Qwen3's and Qwen3-MoE's own config.json fields: what transformers' Qwen3Config and
// Qwen3MoeConfig hold beyond the fields decoder families share (io/model_config.h). The family
// (src/models/qwen3/config.cc) sets their defaults, parses, writes and checks them, and keeps
// them in io::ModelConfig::family_fields; code that needs them reads them through the typed
// accessors below. What the shared code needs of them it asks through the config's family hooks
// (ModelConfig::FeedForwardOf, ModelConfig::SlidingWindow, the derived layer_types).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tlaloc/io/model_config.h"

namespace tlaloc::models::qwen3 {

// The two config classes' names (config.json "model_type" and "architectures"), for configs
// built in code: io::DefaultModelConfig(models::qwen3::kQwen3).
inline const io::ModelArchitecture kQwen3{"qwen3", "Qwen3ForCausalLM"};
inline const io::ModelArchitecture kQwen3Moe{"qwen3_moe", "Qwen3MoeForCausalLM"};

// Sliding-window attention (both classes): layers from max_window_layers on use a window of
// sliding_window positions when use_sliding_window is set (transformers' rule for layer_types
// when config.json gives none). Tlaloc parses and keeps these, and refuses to run a config that
// sets use_sliding_window (the attention is not implemented).
struct SlidingWindowConfig {
  bool use_sliding_window = false;
  // transformers keeps the window only when use_sliding_window is set; so do we.
  std::optional<int64_t> sliding_window;
  int64_t max_window_layers = 28;
};

// Qwen3-MoE's sparse MoE block: its sizes and routing, which layers use it, and the router loss
// settings (transformers' Qwen3MoeConfig).
struct MoeConfig {
  int64_t decoder_sparse_step = 1;       // every step-th layer is sparse ...
  std::vector<int64_t> mlp_only_layers;  // ... except these, which stay dense
  int64_t moe_intermediate_size = 768;
  int64_t num_experts_per_tok = 8;
  int64_t num_experts = 128;
  bool norm_topk_prob = false;
  bool output_router_logits = false;
  double router_aux_loss_coef = 0.001;

  // transformers' rule for which layers are sparse.
  bool IsSparseLayer(int64_t layer) const;
};

// What a Qwen3 or Qwen3-MoE config keeps in family_fields. A dense Qwen3 config's `moe` keeps
// its defaults and is neither read nor written.
struct Qwen3Fields {
  SlidingWindowConfig window;
  MoeConfig moe;
};

// The config's sliding-window fields; the classes' defaults when it holds none (a config built
// in code without them, or another family's).
const SlidingWindowConfig& SlidingWindow(const io::ModelConfig& c);
// The same to change: family_fields is first set to Qwen3Fields' defaults when it holds none
// (or another family's fields).
SlidingWindowConfig& MutableSlidingWindow(io::ModelConfig& c);
// The config's MoE fields; Qwen3MoeConfig's defaults when it holds none.
const MoeConfig& Moe(const io::ModelConfig& c);
// The same to change, as MutableSlidingWindow.
MoeConfig& MutableMoe(io::ModelConfig& c);

}  // namespace tlaloc::models::qwen3
