// Llama's own config.json fields: what transformers' LlamaConfig holds beyond the fields decoder
// families share (io/model_config.h). The family (src/models/llama/family.cc) sets their
// defaults, parses and writes them, and keeps them in io::ModelConfig::family_fields; code that
// needs them reads them through the typed accessors below.
#pragma once

#include "tlaloc/io/model_config.h"

namespace tlaloc::models::llama {

// The config class's names (config.json "model_type" and "architectures"), for configs built in
// code: io::DefaultModelConfig(models::llama::kLlama).
inline const io::ModelArchitecture kLlama{"llama", "LlamaForCausalLM"};

struct LlamaFields {
  bool mlp_bias = false;  // biases on the MLP's projections
};

// The config's Llama fields; LlamaConfig's defaults when it holds none.
const LlamaFields& Fields(const io::ModelConfig& c);
// The same to change: first set to the defaults when the config holds none.
LlamaFields& MutableFields(io::ModelConfig& c);

}  // namespace tlaloc::models::llama
