// A GGUF file (llama.cpp's architecture of a registered family: qwen3, qwen3moe, llama; each
// family names its own, models::ModelFamily::gguf_architecture) as a Tlaloc checkpoint folder,
// the inverse of gguf_export.h: config.json from the `<arch>.*` hyperparameters,
// tokenizer.json from `tokenizer.ggml.*` (the gpt2 byte-level BPE with the "qwen2"
// pre-tokenizer), tokenizer_config.json with `tokenizer.chat_template` and the special tokens,
// and model.safetensors with the weights under transformers' names (rows in transformers'
// order: Llama's q and k back from llama.cpp's interleaved pairs). A "llama3" rope scaling
// (rope_freqs.weight) is not imported yet.
//
// Weights: F32, F16 and BF16 tensors are copied as they are. When every matrix is Q8_0 the
// folder is an int8 checkpoint (io::WeightQuantization: Q8_0's blocks are its layout), copied
// without dequantising. Otherwise Q4_0, Q4_K and Q6_K matrices stay packed (nn/gguf_linear.h:
// u8 quants and `_scale` tensors; config.json's quantization_config "tlaloc_gguf" names each
// matrix's format; the programs dequantise them in StableHLO, the composite tlaloc.gguf_linear)
// and Q8_0 matrices become int8; MoE experts and the other quantized types (Q4_1, Q5_0, Q5_1,
// Q5_K) are dequantised to f32 at import, exactly as ggml does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "tlaloc/support/status.h"

namespace tlaloc::models {

struct GgufImportSummary {
  std::string architecture;              // general.architecture: "qwen3", "qwen3moe", "llama"
  int64_t tensors = 0;                   // GGUF tensors read
  bool int8 = false;                     // written as an int8 checkpoint (every matrix Q8_0)
  int64_t dequantised = 0;               // GGUF tensors dequantised to f32
  int64_t packed = 0;                    // Q4_0 / Q4_K / Q6_K tensors kept packed
  std::map<std::string, int64_t> types;  // ggml type name -> tensors of that type
};

// Writes the folder `out` (created; files already there are replaced) from the GGUF file
// `gguf`. Unknown architectures, tensor types Tlaloc does not read (named), missing metadata
// keys, unknown tensor names and tokenizers other than gpt2 / qwen2 are refused with the file
// name and what was expected.
struct GgufImportOptions {
  // false: every quantized tensor dequantised to f32 but in an all-Q8_0 file (the form the
  // packed one is compared against in tests).
  bool keep_packed = true;
};
StatusOr<GgufImportSummary> ImportGguf(const std::filesystem::path& gguf,
                                       const std::filesystem::path& out,
                                       const GgufImportOptions& options = {});

// The folder `-m model.gguf` runs: ImportGguf's output in a cache, made on first use and
// reused while the file's path, size and modification time are unchanged. The cache is
// $TLALOC_GGUF_CACHE, else $XDG_CACHE_HOME/tlaloc/gguf, else ~/.cache/tlaloc/gguf; each file
// gets a folder named after it and a hash of its absolute path.
// `on_import`, when set, is called with the folder before an import starts (a large file takes
// a while: the CLI says so on stderr).
StatusOr<std::filesystem::path> GgufModelFolder(
    const std::filesystem::path& gguf,
    const std::function<void(const std::filesystem::path&)>& on_import = {});

}  // namespace tlaloc::models
