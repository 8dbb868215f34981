// A PCRE2 regex (UTF + UCP, JIT-compiled) that splits text the way the `tokenizers` Split
// pre-tokenizer does with behavior "Isolated": every match and every gap between matches becomes
// its own piece.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc::tokenizer_internal {

class RegexSplitter {
 public:
  // `literal` compiles `pattern` as a plain string (the Split pattern {"String": ...}).
  static StatusOr<std::unique_ptr<RegexSplitter>> Compile(const std::string& pattern, bool literal);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends the pieces of `text` (well-formed UTF-8), in order, to `out`. Thread-safe.
  void Split(std::string_view text, std::vector<std::string_view>* out) const;

 private:
  RegexSplitter() = default;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

// The GPT-2 pattern the ByteLevel pre-tokenizer uses when use_regex is true.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace tlaloc::tokenizer_internal
