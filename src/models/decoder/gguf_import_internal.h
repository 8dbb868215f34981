// Shared by the GGUF import (gguf_import*.cc) and the families' import hooks: metadata getters
// naming the file and key, and the tokenizer files made from a GGUF's tokenizer.ggml.* keys.
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

namespace tlaloc::models::decoder {

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

// A metadata integer (any integer type); NotFound naming the key when absent and `fallback`
// is unset.
inline StatusOr<int64_t> GgufInt(const io::GgufContents& c, const std::string& key,
                                 const std::string& src,
                                 std::optional<int64_t> fallback = std::nullopt) {
  const io::GgufValue* v = c.Find(key);
  if (!v) {
    if (fallback) return *fallback;
    return NotFound(src + ": missing metadata key \"" + key + "\"");
  }
  switch (v->type) {
    case io::GgufType::kUint8:
    case io::GgufType::kInt8:
    case io::GgufType::kUint16:
    case io::GgufType::kInt16:
    case io::GgufType::kUint32:
    case io::GgufType::kInt32:
    case io::GgufType::kUint64:
    case io::GgufType::kInt64:
      return v->integer;
    default:
      return InvalidArgument(src + ": metadata key \"" + key + "\" is " +
                             std::string(io::GgufTypeName(v->type)) + ", expected an integer");
  }
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

}  // namespace tlaloc::models::decoder
