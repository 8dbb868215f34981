// Qwen3 (dense, and Qwen3-MoE) as two programs per shape bucket, built from nn/ layers:
//
//   prefill(weights..., tokens s32[B,T], positions s32[B,T], lengths s32[B], key u32[2],
//           step u32[], k_cache_0, v_cache_0, ..., k_cache_{L-1}, v_cache_{L-1})
//     -> (next_token s32[B], logits f32[B,V], k_cache_0', v_cache_0', ...)
//   decode_step(weights..., tokens s32[B], positions s32[B], key u32[2], step u32[],
//               k/v caches...) -> (next_token s32[B], logits f32[B,V], caches'...)
//
// Weights are parameters (never constants), in WeightSpecs order. Prompts are left-aligned in
// tokens and padded on the right; `lengths` are the real lengths, and logits are those of each
// row's last real token. Each layer's K and V caches are [B, kv_heads, max_len, head_dim] in the
// model type; cache slot p holds position p. Callers pass the caches by value (donated) so the
// dynamic_update_slice that writes the new entries runs in place. The next token is chosen
// inside the program (nn::SampleTokens).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/ir.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/sampling.h"

namespace tlaloc::models {

inline constexpr std::string_view kPrefillEntry = "prefill";
inline constexpr std::string_view kDecodeEntry = "decode_step";

struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// Whether Tlaloc's Qwen3 code implements this config (architecture, activation, rope type...).
Status CheckSupported(const io::ModelConfig& config);

// The weight parameters of the programs, in order (lm_head.weight only when untied).
std::vector<WeightSpec> WeightSpecs(const io::ModelConfig& config);

struct ProgramShape {
  int64_t batch = 1;
  int64_t prompt_len = 0;  // T (prefill only)
  int64_t max_len = 0;     // S: KV cache slots
  ElementType dtype = ElementType::kF32;
  nn::SamplingParams sampling;
  // Ids at or past this are never sampled (0: every row of the LM head). Qwen3's embedding has
  // rows past its tokenizer's ids (151,936 vs 151,669): no text exists for them.
  int64_t sample_vocab = 0;
};

// The feed-forward half of decoder layer `layer` (SwiGLU MLP, or the sparse MoE block on MoE
// layers) on post-attention-norm hidden states n [B, T, H]; shared by the inference programs
// and the training forward. `w` maps checkpoint names to tensors.
Tensor FeedForward(const io::ModelConfig& config, const std::map<std::string, Tensor>& w,
                   int64_t layer, const Tensor& n, nn::LayerTrace* trace = nullptr);

// The type of each KV cache argument: [B, kv_heads, max_len, head_dim].
TensorType KvCacheType(const io::ModelConfig& config, const ProgramShape& shape);

StatusOr<std::shared_ptr<Module>> BuildPrefill(const io::ModelConfig& config,
                                               const ProgramShape& shape,
                                               nn::LayerTrace* trace = nullptr);
StatusOr<std::shared_ptr<Module>> BuildDecodeStep(const io::ModelConfig& config,
                                                  const ProgramShape& shape,
                                                  nn::LayerTrace* trace = nullptr);

}  // namespace tlaloc::models
