// int8 weight-only checkpoints (`tlaloc quantize IN OUT --dtype int8`; the layout is
// io::WeightQuantization, docs/performance.md "int8 weights"). Every linear-layer matrix and the
// embedding table [out, in] become `X.weight` s8 [out, in] plus `X.weight_scale` f16
// [out, in / 32]: one scale per block of 32 consecutive inputs of a row, GGUF Q8_0's block, so
// the export to Q8_0 is a copy. Norm weights keep their stored type.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "tlaloc/ir/literal.h"
#include "tlaloc/support/status.h"

namespace tlaloc::models {

// A matrix `value` (f32, bf16 or f16, [rows, K], K a multiple of 32; or a stack [..., rows, K]
// of them, scales [..., rows, K / 32]) as s8 values and f16
// scales: per block, scale = f16(max |x| / 127) and q = round-to-nearest-even(x / scale)
// (clamped to [-127, 127]), so |x - q * scale| <= scale / 2; a block whose max |x| / 127 rounds
// to an f16 zero (max |x| < 127 * 2^-25) becomes zero, as in ggml. Non-finite values and blocks
// whose scale overflows f16 are refused naming `name`, the row and the block.
StatusOr<std::pair<Literal, Literal>> QuantizeInt8Matrix(const Literal& value,
                                                         const std::string& name);
// q * scale in f32 (exact), the same shape as q.
Literal DequantizeInt8Matrix(const Literal& q, const Literal& scale);

struct QuantizeSummary {
  int64_t quantized_tensors = 0;  // matrices made int8
  int64_t kept_tensors = 0;       // norms etc., copied as stored
  uint64_t bytes_in = 0;          // weight bytes read
  uint64_t bytes_out = 0;         // weight bytes written (scales included)
  double max_abs_error = 0;       // largest |x - q * scale| over every matrix
};

struct QuantizeOptions {
  // Shard the output into files of at most this many tensor bytes (0: one model.safetensors).
  // nullopt: io::kDefaultMaxShardBytes when the input is sharded or the output exceeds it, as
  // transformers shards; else one file.
  std::optional<uint64_t> max_shard_bytes;
};

// Writes the int8 form of checkpoint folder `in` to `out` (absent or an empty folder): the
// weights, config.json with its quantization_config, and every other file of `in` (tokenizer,
// generation config, chat template) copied. Tensors are read, quantized and written one at a
// time (io::CheckpointStreamWriter), so memory holds about the largest tensor, not the model.
// The folder is staged under a temporary name beside `out` and renamed into place, so `out` is
// complete or absent. Refuses an already-quantized checkpoint and tensors missing or of the
// wrong shape, naming them.
StatusOr<QuantizeSummary> QuantizeCheckpoint(const std::filesystem::path& in,
                                             const std::filesystem::path& out,
                                             const QuantizeOptions& options = {});

}  // namespace tlaloc::models
