// The small Qwen3 that the sharding, sharded-training and tensor-parallel tests share: hidden
// 32, 2 full-attention layers of head_dim 8, an intermediate size of 64, 64 positions and an
// untied LM head. Heads, vocabulary and the initializer range vary by test (plans need head
// counts their mesh axes divide; greedy tests want peaked logits, far from ties).
#pragma once

#include <cstdint>
#include <optional>

#include "tlaloc/io/model_config.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::testing {

struct TinyQwen3Shape {
  int64_t vocab_size = 64;
  int64_t num_attention_heads = 8;
  int64_t num_key_value_heads = 4;
  std::optional<double> initializer_range = std::nullopt;  // unset: the config default
};

inline io::ModelConfig TinyQwen3Config(const TinyQwen3Shape& shape = {}) {
  io::ModelConfig c = io::DefaultModelConfig(models::qwen3::kQwen3);
  c.vocab_size = shape.vocab_size;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = shape.num_attention_heads;
  c.num_key_value_heads = shape.num_key_value_heads;
  c.head_dim = 8;
  c.max_position_embeddings = 64;
  models::qwen3::MutableSlidingWindow(c).max_window_layers = 2;
  if (shape.initializer_range) c.initializer_range = *shape.initializer_range;
  c.tie_word_embeddings = false;
  c.layer_types.assign(2, "full_attention");
  return c;
}

}  // namespace tlaloc::testing
