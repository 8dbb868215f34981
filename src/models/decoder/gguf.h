// The shared decoder (Qwen3, Qwen3-MoE, Llama) as llama.cpp's GGUF: the writer every family's
// ModelFamily::export_gguf calls with its hooks (gguf_export.cc), and the tensor names both
// directions share. The import (models/gguf_import.h) finds the family of a file by
// ModelFamily::gguf_architecture.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/decoder/decoder.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/gguf.h"
#include "tlaloc/models/gguf_export.h"

namespace tlaloc::models::decoder {

// What a family adds to the shared export.
struct GgufExportHooks {
  // llama.cpp's architecture: general.architecture and the prefix of the hyperparameter keys.
  std::string arch;
  // Keys after the shared hyperparameters (Qwen3-MoE's expert counts).
  std::vector<io::GgufKeyValue> keys;
  // Tensors after the checkpoint's (Llama's rope_freqs.weight for a "llama3" rope_scaling).
  std::vector<io::GgufTensorToWrite> extra_tensors;
  // The family's own handling of a checkpoint tensor: nullopt lets the shared code write it;
  // otherwise the tensors written in its place (none: skipped). Float tensors given with
  // GgmlType kF32 take the export's type (GgufExportOptions::dtype), Q8_0 ones stay Q8_0.
  // (Qwen3-MoE: a layer's stacked experts where its router comes.)
  std::function<StatusOr<std::optional<std::vector<io::GgufTensorToWrite>>>(
      const io::Checkpoint& checkpoint, const ExpectedTensor& tensor)>
      own_tensor;
};

// Writes checkpoint folder `dir` (whose parsed config.json is `config`) as the GGUF file `out`
// of `hooks.arch`: the family's tensors (models::ExpectedTensors) under llama.cpp's names, rows
// reordered by its family's ModelFamily::gguf_row_order, the shared hyperparameter keys and the
// byte-level BPE tokenizer. No rope scaling: a family that exports its scaling as tensors passes
// them as `hooks.extra_tensors`, with config.rope_scaling reset.
StatusOr<GgufExportSummary> ExportDecoderGguf(const std::filesystem::path& dir,
                                              const std::filesystem::path& out,
                                              const GgufExportOptions& options,
                                              const ModelConfig& config, GgufExportHooks hooks);

// llama.cpp's name for a transformers tensor name of these decoders ("model.layers.3.mlp.
// up_proj.weight" -> "blk.3.ffn_up.weight"); routers and stacked experts are the family's.
StatusOr<std::string> GgufTensorName(const std::string& hf);

// The rows of `in` (order.size() rows of equal size, whatever their encoding: whole GGUF blocks
// per row) reordered: row r of the result is row order[r] of `in`; `in` as it is when `order`
// is empty.
std::vector<std::byte> PermuteRows(std::span<const std::byte> in,
                                   const std::vector<int64_t>& order);
// The inverse permutation: InverseOrder(o)[o[r]] = r.
std::vector<int64_t> InverseOrder(const std::vector<int64_t>& order);

}  // namespace tlaloc::models::decoder
