// GGUF's tokenizer.ggml.* (llama.cpp's "gpt2" byte-level BPE with the "qwen2" pre-tokenizer,
// which the export writes for every family)
// as the tokenizer.json and tokenizer_config.json Tlaloc's tokenizer and chat template read:
// the inverse of ReadVocabulary in gguf_export.cc.
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>

#include "models/decoder/gguf_import_internal.h"

namespace tlaloc::models::decoder {

using json = nlohmann::ordered_json;

namespace {

// llama.cpp's token types (llama_token_type).
enum TokenType : int64_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

// Qwen2/Qwen3's split pattern: what llama.cpp's "qwen2" pre-tokenizer applies.
constexpr const char* kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Texts llama.cpp treats as end of generation whatever the eos id (llama-vocab.cpp's list).
constexpr const char* kEndTexts[] = {"<|eot_id|>",    "<|im_end|>",    "<|end|>",
                                     "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
                                     "<EOT>",         "_<EOT>",        "<|end_of_text|>"};

json ByteLevel() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", false},
          {"use_regex", false}};
}

}  // namespace

StatusOr<GgufTokenizer> ImportGgufTokenizer(const io::GgufContents& c, const std::string& src) {
  TL_ASSIGN_OR_RETURN(std::string model, GgufString(c, "tokenizer.ggml.model", src));
  if (model != "gpt2")
    return Unimplemented(src + ": tokenizer.ggml.model \"" + model +
                         "\" (Tlaloc reads the byte-level BPE \"gpt2\" tokenizer)");
  // The pre-tokenizer fixes how text is split before merging; Qwen2/Qwen3 files say "qwen2".
  TL_ASSIGN_OR_RETURN(std::string pre, GgufString(c, "tokenizer.ggml.pre", src));
  if (pre != "qwen2")
    return Unimplemented(src + ": tokenizer.ggml.pre \"" + pre +
                         "\" (expected \"qwen2\", the Qwen2/Qwen3 pre-tokenizer)");
  const io::GgufValue* tokens = c.Find("tokenizer.ggml.tokens");
  if (!tokens || !tokens->is_array() || tokens->array_type != io::GgufType::kString)
    return InvalidArgument(src +
                           ": missing metadata key \"tokenizer.ggml.tokens\" (an array of "
                           "strings)");
  const io::GgufValue* types = c.Find("tokenizer.ggml.token_type");
  if (types && (!types->is_array() || types->integers.size() != tokens->texts.size()))
    return InvalidArgument(src + ": tokenizer.ggml.token_type is not an integer array of " +
                           std::to_string(tokens->texts.size()) + " entries (one per token)");
  GgufTokenizer out;
  out.num_tokens = static_cast<int64_t>(tokens->texts.size());
  json vocab = json::object();
  // ordered_json's operator[] searches its entries linearly, which made 151,936 insertions
  // quadratic (about 25 s); entries are appended to the underlying vector instead, with an index
  // so that a repeated text keeps its first place and takes the later id, as operator[] did.
  auto& vocab_entries = static_cast<json::object_t::Container&>(vocab.get_ref<json::object_t&>());
  std::unordered_map<std::string_view, size_t> vocab_index;
  vocab_index.reserve(tokens->texts.size());
  json added = json::array();
  for (size_t i = 0; i < tokens->texts.size(); ++i) {
    const std::string& text = tokens->texts[i];
    const int64_t type = types ? types->integers[i] : kNormal;
    const auto id = static_cast<int64_t>(i);
    if (type == kUnused) continue;  // padding rows ("[PAD151669]"): no text maps to them
    if (type == kControl || type == kUserDefined) {
      added.push_back({{"id", id},
                       {"content", text},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type == kControl}});
      if (type == kControl)
        for (const char* end : kEndTexts)
          if (text == end) out.end_ids.push_back(id);
      continue;
    }
    if (type == kByte)
      return Unimplemented(src + ": token " + std::to_string(i) +
                           " is a byte-fallback token, which a gpt2 vocabulary does not have");
    if (type != kNormal && type != kUnknown)
      return InvalidArgument(src + ": token " + std::to_string(i) + " has token type " +
                             std::to_string(type) + " (expected 1 to 6)");
    if (auto [it, fresh] = vocab_index.emplace(text, vocab_entries.size()); fresh)
      vocab_entries.emplace_back(text, json(id));
    else
      vocab_entries[it->second].second = id;
  }
  json merges = json::array();
  if (const io::GgufValue* m = c.Find("tokenizer.ggml.merges")) {
    if (!m->is_array() || m->array_type != io::GgufType::kString)
      return InvalidArgument(src + ": tokenizer.ggml.merges is not an array of strings");
    for (const std::string& merge : m->texts) {
      // Byte-level tokens spell a space as "Ġ", so the one real space separates the pair.
      const size_t space = merge.find(' ');
      if (space == std::string::npos || merge.find(' ', space + 1) != std::string::npos)
        return InvalidArgument(src + ": tokenizer.ggml.merges entry \"" + merge +
                               "\" is not two tokens separated by one space");
      merges.push_back(json::array({merge.substr(0, space), merge.substr(space + 1)}));
    }
  }
  json tok;
  tok["version"] = "1.0";
  tok["truncation"] = nullptr;
  tok["padding"] = nullptr;
  tok["added_tokens"] = std::move(added);
  // No NFC normalizer (Qwen's tokenizer.json has one): llama.cpp does not normalise, and the
  // file is llama.cpp's; text already in NFC, nearly all text, tokenizes the same either way.
  tok["normalizer"] = nullptr;
  tok["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", json::array({{{"type", "Split"},
                                      {"pattern", {{"Regex", kQwen2SplitPattern}}},
                                      {"behavior", "Isolated"},
                                      {"invert", false}},
                                     ByteLevel()})}};
  tok["post_processor"] = ByteLevel();
  tok["decoder"] = ByteLevel();
  tok["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"continuing_subword_prefix", ""},
                  {"end_of_word_suffix", ""},
                  {"fuse_unk", false},
                  {"byte_fallback", false},
                  {"ignore_merges", false},
                  {"vocab", std::move(vocab)},
                  {"merges", std::move(merges)}};
  out.tokenizer_json = tok.dump(2);

  auto special = [&](const char* key) -> StatusOr<std::optional<int64_t>> {
    const io::GgufValue* v = c.Find(std::string("tokenizer.ggml.") + key);
    if (!v) return std::optional<int64_t>();
    if (v->is_array() || v->type == io::GgufType::kString || v->type == io::GgufType::kFloat32 ||
        v->type == io::GgufType::kFloat64 || v->integer < 0 || v->integer >= out.num_tokens)
      return InvalidArgument(src + ": tokenizer.ggml." + key + " is not a token id below " +
                             std::to_string(out.num_tokens));
    return std::optional<int64_t>(v->integer);
  };
  TL_ASSIGN_OR_RETURN(out.bos, special("bos_token_id"));
  TL_ASSIGN_OR_RETURN(out.eos, special("eos_token_id"));
  TL_ASSIGN_OR_RETURN(out.pad, special("padding_token_id"));
  TL_ASSIGN_OR_RETURN(std::optional<int64_t> eot, special("eot_token_id"));
  TL_ASSIGN_OR_RETURN(std::optional<int64_t> eom, special("eom_token_id"));
  // End ids: eos first (config.json's eos_token_id list), then those llama.cpp also stops at.
  std::vector<int64_t> ends;
  for (const auto& id : {out.eos, eot, eom})
    if (id) ends.push_back(*id);
  for (int64_t id : out.end_ids)
    if (std::find(ends.begin(), ends.end(), id) == ends.end()) ends.push_back(id);
  out.end_ids = std::move(ends);
  // Qwen3 files never prepend a BOS token, Llama's do: kept as the file says, as the folders
  // Tlaloc writes for each family say it (tokenizer_config.json's add_bos_token).
  bool add_bos = false;
  if (const io::GgufValue* v = c.Find("tokenizer.ggml.add_bos_token");
      v && v->type == io::GgufType::kBool)
    add_bos = v->integer != 0;

  json config = json::object();
  config["tokenizer_class"] = add_bos ? "PreTrainedTokenizerFast" : "Qwen2Tokenizer";
  config["add_bos_token"] = add_bos;
  config["model_max_length"] = 131072;
  auto text_of = [&](const std::optional<int64_t>& id) -> json {
    return id ? json(tokens->texts[static_cast<size_t>(*id)]) : json(nullptr);
  };
  config["bos_token"] = text_of(out.bos);
  config["eos_token"] = text_of(out.eos);
  config["pad_token"] = text_of(out.pad);
  config["unk_token"] = nullptr;
  if (const io::GgufValue* t = c.Find("tokenizer.chat_template")) {
    if (t->type != io::GgufType::kString)
      return InvalidArgument(src + ": tokenizer.chat_template is not a string");
    config["chat_template"] = t->text;
    out.chat_template = true;
  }
  out.tokenizer_config_json = config.dump(2);
  return out;
}

}  // namespace tlaloc::models::decoder
