// Randomly initialised checkpoints (of any registered family) in Hugging Face form, for tests,
// demos and benchmarks.
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
// in; README.md there describes them, PresetNames() lists them), e.g. "tiny" (a small Qwen3 with
// the full Qwen3 vocabulary, so the real tokenizer's ids fit) or "tiny-llama".
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
  // Copied into the folder when non-empty; empty: the family's built-in tokenizer.json when it
  // has one (ModelFamily::builtin_tokenizer_json: Llama's), else none.
  std::filesystem::path tokenizer_json;
  // With a tokenizer: also write the family's tokenizer_config.json
  // (ModelFamily::tokenizer_config_json: Qwen3TokenizerConfigJson, Llama 3's), so the chat
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
// tokenizer_config.json, see InitOptions).
Status WriteRandomCheckpoint(const io::ModelConfig& config, const std::filesystem::path& dir,
                             const InitOptions& options);

}  // namespace tlaloc::models
