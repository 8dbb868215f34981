// Llama (LlamaForCausalLM, model_type llama, Llama 3 style): the family's pieces.
#pragma once

#include <vector>

#include "tlaloc/models/family.h"
#include "tlaloc/models/llama.h"

namespace tlaloc::models::llama {

using io::ModelConfig;
using io::RopeScaling;

// LlamaConfig's own fields (LlamaFields) and their accessors: tlaloc/models/llama.h.

Status CheckSupported(const ModelConfig& c);
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c);
std::vector<WeightSpec> WeightSpecs(const ModelConfig& c);
// The rotary frequencies transformers' Llama uses for `c`: 1 / theta^(2i / d), rescaled by a
// "llama3" rope_scaling (f32, as torch computes them).
std::vector<float> InverseFrequencies(const ModelConfig& c);

// llama.cpp's rope_freqs tensor for a "llama3" rope_scaling: per frequency, the divisor that
// turns the plain rotary frequency 1 / theta^(2i / d) into InverseFrequencies' (as llama.cpp's
// converter computes it).
std::vector<float> RopeFreqDivisors(const ModelConfig& c);

// Llama as llama.cpp's `llama` architecture (through the shared decoder export, with
// rope_freqs.weight for a "llama3" rope_scaling).
StatusOr<GgufExportSummary> ExportGguf(const std::filesystem::path& dir,
                                       const std::filesystem::path& out,
                                       const GgufExportOptions& options);

// llama.cpp's row order of checkpoint tensor `name` (ModelFamily::gguf_row_order): each head's
// q and k rows from transformers' rotary halves to llama.cpp's interleaved pairs; empty for the
// other tensors.
std::vector<int64_t> GgufRowOrder(const ModelConfig& c, const std::string& name);

// Llama 3's chat format as Jinja, and the tokenizer files of the random checkpoints Tlaloc
// writes (tokenizer.cc): a Llama 3-style tokenizer_config.json, and a built-in byte-level
// tokenizer.json of the 256 bytes then Llama 3's special tokens (ids 256-260:
// <|begin_of_text|>, <|end_of_text|>, <|start_header_id|>, <|end_header_id|>, <|eot_id|>).
std::string ChatTemplate();
std::string TokenizerConfigJson(const ModelConfig& config);
std::string BuiltinTokenizerJson();

// Adds the llama entry.
void Register(std::vector<ModelFamily>& registry);

}  // namespace tlaloc::models::llama
