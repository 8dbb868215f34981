// A model folder as a GGUF file for llama.cpp (and Ollama), through its family's exporter: the
// family knows llama.cpp's architecture name, hyperparameter keys and tensor names.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "tlaloc/ir/element_type.h"
#include "tlaloc/support/status.h"

namespace tlaloc::models {

struct GgufExportOptions {
  // Type of the matrices (1-D norm weights stay f32); unset keeps each tensor's stored type
  // (f32, f16 or bf16; anything else becomes f32).
  std::optional<ElementType> dtype;
  // general.name; the folder's name when empty.
  std::string name;
};

struct GgufExportSummary {
  int64_t tensors = 0;
  uint64_t tensor_bytes = 0;
  int64_t vocab_tokens = 0;
  bool tied_output = false;
  bool chat_template = false;
};

// Writes the checkpoint folder `dir` (config.json, safetensors, tokenizer.json) as the GGUF
// file `out`: hyperparameters, the tokenizer (tokens padded to the embedding rows, their types,
// merges, special token ids, the chat template when the folder has one) and the weights under
// llama.cpp's tensor names. Families without an exporter are refused by name.
StatusOr<GgufExportSummary> ExportGguf(const std::filesystem::path& dir,
                                       const std::filesystem::path& out,
                                       const GgufExportOptions& options = {});

}  // namespace tlaloc::models
