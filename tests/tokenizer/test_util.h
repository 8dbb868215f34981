// Helpers shared by the tokenizer tests: a small byte-level BPE tokenizer.json built in code, and
// the location of the real Qwen3 tokenizer.json installed by scripts/setup.sh.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "testing/oracle.h"
#include "tlaloc/tokenizer/tokenizer.h"
#include "tlaloc/tokenizer/utf8.h"

namespace tlaloc::testing {

// The GPT-2 byte alphabet, re-derived here independently of the library (printable Latin-1
// bytes keep their code point, the others take U+0100 upwards in byte order).
inline std::string ByteSymbol(int b) {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int next = 256;
    for (int i = 0; i < 256; ++i) {
      bool printable = (i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE;
      int cp = printable ? i : next++;
      std::string s;
      if (cp < 0x80) {
        s += static_cast<char>(cp);
      } else {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
      }
      t[i] = s;
    }
    return t;
  }();
  return table[b];
}

// A tokenizer.json with the 256 byte symbols (id = byte value), then one id per merge result
// in order, the given merges, the given added tokens, NFC and the GPT-2 ByteLevel pre-tokenizer.
inline nlohmann::json SmallTokenizerJson(
    const std::vector<std::pair<std::string, std::string>>& merges,
    const nlohmann::json& added = nlohmann::json::array()) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteSymbol(b)] = b;
  int next = 256;
  nlohmann::json merge_list = nlohmann::json::array();
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    merge_list.push_back(a + " " + b);
  }
  nlohmann::json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["post_processor"] = {{"type", "ByteLevel"}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}};
  return j;
}

inline std::string QwenTokenizerPath() {
  if (const char* env = std::getenv("TLALOC_QWEN3_TOKENIZER")) return env;
  return std::string(TLALOC_SOURCE_DIR) + "/data/qwen3/tokenizer.json";
}

// The real Qwen3 tokenizer, loaded once per test binary; null when the file is absent.
inline const Tokenizer* QwenTokenizer(std::string* why = nullptr) {
  static std::string error;
  static const Tokenizer* tok = []() -> const Tokenizer* {
    std::string path = QwenTokenizerPath();
    if (!std::filesystem::exists(path)) {
      error = path + " is missing (the repository carries it in data/qwen3/)";
      return nullptr;
    }
    auto t = Tokenizer::FromFile(path);
    if (!t.ok()) {
      error = t.status().ToString();
      return nullptr;
    }
    return new Tokenizer(std::move(*t));
  }();
  if (why) *why = error;
  return tok;
}

}  // namespace tlaloc::testing

// Binds `tok` to the real Qwen3 tokenizer; skips (naming the file) when it is not installed and
// fails when it is installed but does not load.
#define TL_REQUIRE_QWEN_TOKENIZER(tok)                                           \
  std::string tok##_why;                                                         \
  const ::tlaloc::Tokenizer* tok = ::tlaloc::testing::QwenTokenizer(&tok##_why); \
  if (tok == nullptr) {                                                          \
    if (std::filesystem::exists(::tlaloc::testing::QwenTokenizerPath())) {       \
      FAIL() << tok##_why;                                                       \
    } else {                                                                     \
      TL_ORACLE_MISSING(tok##_why);                                              \
    }                                                                            \
  }
