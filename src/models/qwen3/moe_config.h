// Qwen3-MoE's own config.json fields (transformers' Qwen3MoeConfig), held in
// io::ModelConfig::family_fields: the sparse MoE block's sizes and routing, which layers use it,
// and the router loss settings. The shared code asks them through ModelConfig::FeedForwardOf.
#pragma once

#include <cstdint>
#include <vector>

#include "tlaloc/io/model_config.h"

namespace tlaloc::models::qwen3 {

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

// The config's MoE fields; Qwen3MoeConfig's defaults when it holds none (a dense Qwen3 config,
// or one built in code without them).
const MoeConfig& Moe(const io::ModelConfig& c);
// The same to change: first set to the defaults when the config holds none (or another
// family's fields).
MoeConfig& MutableMoe(io::ModelConfig& c);

}  // namespace tlaloc::models::qwen3
