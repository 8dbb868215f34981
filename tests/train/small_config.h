// The demo's byte vocabulary on a model small enough for a few interpreter steps per second,
// shared by the fine-tuning and checkpoint tests.
#pragma once

#include "tlaloc/io/model_config.h"
#include "tlaloc/models/qwen3.h"
#include "tlaloc/train/finetune.h"

namespace tlaloc::train::testing {

inline io::ModelConfig SmallConfig() {
  io::ModelConfig c = DemoModelConfig();
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 1;
  models::qwen3::MutableSlidingWindow(c).max_window_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 16;
  c.layer_types.assign(1, "full_attention");
  return c;
}

}  // namespace tlaloc::train::testing
