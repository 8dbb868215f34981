// Llama's tokenizer files for the random checkpoints Tlaloc writes (init-model): a Llama 3-style
// tokenizer_config.json (BOS <|begin_of_text|>, end of turn <|eot_id|>, Llama 3's chat template)
// and, when no tokenizer.json is given, a small built-in byte-level BPE one holding the 256 bytes
// and Llama 3's special tokens, so a random Llama folder can be chatted with, exported to GGUF
// and loaded by transformers without Meta's tokenizer.
#include <nlohmann/json.hpp>

#include "models/llama/llama_family.h"

namespace tlaloc::models::llama {

namespace {

using nlohmann::json;

// Ids 256.. of the built-in tokenizer, in this order.
constexpr const char* kSpecialTokens[] = {"<|begin_of_text|>", "<|end_of_text|>",
                                          "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};

// GPT-2's byte-level spelling of byte b: printable bytes stand for themselves, the others map
// in order to code points from 256 on (UTF-8 encoded).
std::string ByteToken(int b) {
  auto printable = [](int i) {
    return (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174;
  };
  int code = b;
  if (!printable(b)) {
    code = 256;
    for (int i = 0; i < b; ++i) code += !printable(i);
  }
  std::string s;
  if (code < 0x80) {
    s += static_cast<char>(code);
  } else {
    s += static_cast<char>(0xC0 | (code >> 6));
    s += static_cast<char>(0x80 | (code & 0x3F));
  }
  return s;
}

}  // namespace

std::string BuiltinTokenizerJson() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteToken(b)] = b;
  json added = json::array();
  int id = 256;
  for (const char* t : kSpecialTokens) {
    vocab[t] = id;
    added.push_back({{"id", id++},
                     {"content", t},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  json j;
  j["version"] = "1.0";
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  // Qwen2's split pattern (as the GGUF export's "qwen2" pre-tokenizer name says) before the
  // byte-level mapping: Tlaloc, transformers and llama.cpp split text the same way.
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern",
          {{"Regex",
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"},
         {"add_prefix_space", false},
         {"trim_offsets", false},
         {"use_regex", false}}}}};
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "ByteLevel"},
                  {"add_prefix_space", false},
                  {"trim_offsets", false},
                  {"use_regex", false}};
  // No merges: every byte is its own token (a random model has nothing to gain from more).
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", json::array()}};
  return j.dump(2) + "\n";
}

std::string TokenizerConfigJson(const ModelConfig& config) {
  // What transformers and the GGUF export read: a BOS token prepended to every text (the chat
  // template writes it itself), <|eot_id|> ending a chat turn, and the chat template.
  json j = {
      {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"add_bos_token", true},
      {"bos_token", "<|begin_of_text|>"},
      {"eos_token", "<|eot_id|>"},
      {"pad_token", nullptr},
      {"clean_up_tokenization_spaces", true},
      {"model_max_length", config.max_position_embeddings},
      {"chat_template", ChatTemplate()},
  };
  return j.dump(2) + "\n";
}

}  // namespace tlaloc::models::llama
