// Randomly initialised Qwen3 checkpoints in Hugging Face form, for tests, demos and benchmarks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/io/model_config.h"
#include "tlaloc/io/safetensors.h"

namespace tlaloc::models {

// The config of preset `name`, one config.json file each under src/models/presets/ (compiled
// in; README.md there describes them): "tiny" (hidden 64, 2 layers, 4 query / 2 KV heads,
// head_dim 16, intermediate 128, the full Qwen3 vocabulary so the real tokenizer's ids fit,
// untied head), "tiny-moe" (the same with a 4-expert top-2 MoE block), "qwen3-0.6b" (the real
// model's shapes, tied head, bf16) and "qwen3-30b-a3b-2l" (Qwen3-30B-A3B with 2 of its layers).
StatusOr<io::ModelConfig> PresetConfig(const std::string& name);
// Every preset's name, sorted.
std::vector<std::string> PresetNames();

// Every parameter of `config` (models::WeightSpecs order), normal(0, initializer_range) for
// matrices and ones for norms, from a seeded host PRNG, stored as `dtype`.
std::vector<io::NamedTensor> RandomWeights(const io::ModelConfig& config, uint64_t seed,
                                           ElementType dtype);

struct InitOptions {
  uint64_t seed = 0;
  ElementType dtype = ElementType::kF32;
  // Copied into the folder when non-empty.
  std::filesystem::path tokenizer_json;
  // With a tokenizer: also write tokenizer_config.json (Qwen3TokenizerConfigJson), so the chat
  // template travels with the checkpoint (GGUF export, transformers).
  bool write_tokenizer_config = true;
};

// Qwen3's chat template in Jinja (plain-text turns, as Qwen3's own template renders them).
std::string Qwen3ChatTemplate();

// tokenizer_config.json for a Qwen3-style tokenizer.json: eos <|im_end|>, pad <|endoftext|>, no
// BOS, model_max_length from `config`, and Qwen3ChatTemplate().
std::string Qwen3TokenizerConfigJson(const io::ModelConfig& config);

// Writes a Hugging Face folder: model.safetensors (the tensors as given), config.json,
// generation_config.json, and a copy of `tokenizer_json` when it is non-empty.
Status WriteModelFolder(const io::ModelConfig& config, const std::filesystem::path& dir,
                        std::span<const io::NamedTensor> weights,
                        const io::GenerationConfig& generation,
                        const std::filesystem::path& tokenizer_json);

// Writes config.json, model.safetensors, generation_config.json (and tokenizer.json plus
// tokenizer_config.json).
Status WriteRandomCheckpoint(const io::ModelConfig& config, const std::filesystem::path& dir,
                             const InitOptions& options);

}  // namespace tlaloc::models
