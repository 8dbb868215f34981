// Shared by gguf_import.cc and gguf_import_tokenizer.cc: metadata getters naming the file and
// key, and the tokenizer files made from a GGUF's tokenizer.ggml.* keys.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/io/gguf.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/support/status.h"

namespace tlaloc::models::qwen3 {

// A string metadata value; NotFound naming `key` when absent.
inline StatusOr<std::string> GgufString(const io::GgufContents& c, const std::string& key,
                                        const std::string& src) {
  const io::GgufValue* v = c.Find(key);
  if (!v) return NotFound(src + ": missing metadata key \"" + key + "\"");
  if (v->type != io::GgufType::kString)
    return InvalidArgument(src + ": metadata key \"" + key + "\" is " +
                           std::string(io::GgufTypeName(v->type)) + ", expected a string");
  return v->text;
}

struct GgufTokenizer {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
  int64_t num_tokens = 0;
  std::optional<int64_t> bos, eos, pad;
  // eos, then the other ids llama.cpp ends generation at (eot, eom, control tokens such as
  // <|im_end|> and <|endoftext|>).
  std::vector<int64_t> end_ids;
  bool chat_template = false;
};

StatusOr<GgufTokenizer> ImportGgufTokenizer(const io::GgufContents& c, const std::string& src);

// The packed format (q4_0, q4_k or q6_k: nn/gguf_linear.h) a GGUF type is kept in, or nullopt
// for the types imported otherwise (Q8_0 included).
std::optional<QuantFormat> PackedFormatOf(io::GgmlType t);
// Whole blocks of Q4_0 / Q4_K / Q6_K split into the packed quants `q` and the `scale` tensor's
// bytes (gguf_import_packed.cc).
Status RepackGgml(io::GgmlType t, std::span<const std::byte> blocks, std::vector<std::byte>& q,
                  std::vector<std::byte>& scale);

}  // namespace tlaloc::models::qwen3
