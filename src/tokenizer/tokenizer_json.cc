// Loading tokenizer.json: validates each component and builds Tokenizer::Impl. Anything the
// encoder does not implement is rejected here, naming the component, rather than silently
// encoding differently from the `tokenizers` library.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tlaloc/tokenizer/utf8.h"
#include "tokenizer_impl.h"

namespace tlaloc {

namespace tokenizer_internal {

const std::array<char32_t, 256>& ByteToCodePoint() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = printable(b) ? static_cast<char32_t>(b) : next++;
    return t;
  }();
  return table;
}

}  // namespace tokenizer_internal

std::string ByteLevelSymbol(uint8_t b) {
  return utf8::Encode(tokenizer_internal::ByteToCodePoint()[b]);
}

namespace {

using json = nlohmann::json;
using tokenizer_internal::RegexSplitter;

StatusOr<std::unique_ptr<Tokenizer::Impl>> LoadTokenizerJson(std::string_view json_text,
                                                             const std::string& source);

std::string TypeOf(const json& j) {
  if (j.is_object() && j.contains("type") && j["type"].is_string()) return j["type"];
  return "<no type>";
}

bool FlagOr(const json& j, const char* key, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  return j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

Status LoadNormalizer(const json& j, const std::string& where, Tokenizer::Impl* impl) {
  if (j.is_null()) return OkStatus();
  std::string type = TypeOf(j);
  if (type == "NFC") {
    impl->nfc = true;
    return OkStatus();
  }
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      return InvalidArgument(where + ": Sequence normalizer lacks a 'normalizers' array");
    for (size_t i = 0; i < j["normalizers"].size(); ++i)
      TL_RETURN_IF_ERROR(LoadNormalizer(j["normalizers"][i],
                                        where + ".normalizers[" + std::to_string(i) + "]", impl));
    return OkStatus();
  }
  return Unimplemented(where + ": normalizer type '" + type +
                       "' is not supported (expected NFC, Sequence or null)");
}

Status LoadPreTokenizer(const json& j, const std::string& where, Tokenizer::Impl* impl) {
  if (j.is_null()) return OkStatus();
  std::string type = TypeOf(j);
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      return InvalidArgument(where + ": Sequence pre-tokenizer lacks a 'pretokenizers' array");
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i)
      TL_RETURN_IF_ERROR(LoadPreTokenizer(
          j["pretokenizers"][i], where + ".pretokenizers[" + std::to_string(i) + "]", impl));
    return OkStatus();
  }
  if (type == "Split") {
    std::string behavior = j.value("behavior", std::string());
    if (behavior != "Isolated")
      return Unimplemented(where + ": Split behavior '" + behavior +
                           "' is not supported (expected Isolated)");
    if (FlagOr(j, "invert", false))
      return Unimplemented(where + ": Split with invert true is not supported");
    if (!j.contains("pattern") || !j["pattern"].is_object())
      return InvalidArgument(where + ": Split lacks a 'pattern' object");
    const json& p = j["pattern"];
    bool literal = false;
    std::string pattern;
    if (p.contains("Regex") && p["Regex"].is_string()) {
      pattern = p["Regex"];
    } else if (p.contains("String") && p["String"].is_string()) {
      pattern = p["String"];
      literal = true;
    } else {
      return InvalidArgument(where + ".pattern: expected {\"Regex\": ...} or {\"String\": ...}");
    }
    auto splitter = RegexSplitter::Compile(pattern, literal);
    if (!splitter.ok()) return splitter.status().WithContext(where + ".pattern");
    impl->splitters.push_back(std::move(*splitter));
    return OkStatus();
  }
  if (type == "ByteLevel") {
    if (FlagOr(j, "add_prefix_space", false))
      return Unimplemented(where + ": ByteLevel add_prefix_space true is not supported");
    if (FlagOr(j, "use_regex", true)) {
      auto splitter = RegexSplitter::Compile(tokenizer_internal::kGpt2Pattern, false);
      if (!splitter.ok()) return splitter.status().WithContext(where);
      impl->splitters.push_back(std::move(*splitter));
    }
    return OkStatus();  // the byte mapping itself happens in the model
  }
  return Unimplemented(where + ": pre-tokenizer type '" + type +
                       "' is not supported (expected Split, ByteLevel, Sequence or null)");
}

Status CheckByteLevel(const json& j, const std::string& where, bool allow_null) {
  if (j.is_null() && allow_null) return OkStatus();
  std::string type = TypeOf(j);
  if (type == "ByteLevel") return OkStatus();
  if (type == "Sequence" && allow_null) {
    const char* key = j.contains("processors") ? "processors" : "decoders";
    if (j.contains(key) && j[key].is_array()) {
      for (size_t i = 0; i < j[key].size(); ++i)
        TL_RETURN_IF_ERROR(
            CheckByteLevel(j[key][i], where + "." + key + "[" + std::to_string(i) + "]", false));
      return OkStatus();
    }
  }
  return Unimplemented(where + ": type '" + type + "' is not supported (expected ByteLevel" +
                       (allow_null ? " or null)" : ")"));
}

Status LoadModel(const json& m, Tokenizer::Impl* impl) {
  if (!m.is_object()) return InvalidArgument("model: expected an object");
  std::string type = m.value("type", std::string("BPE"));
  if (type != "BPE")
    return Unimplemented("model: type '" + type + "' is not supported (expected BPE)");
  if (m.contains("dropout") && !m["dropout"].is_null() &&
      !(m["dropout"].is_number() && m["dropout"].get<double>() == 0.0))
    return Unimplemented("model: BPE dropout is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (m.contains(key) && m[key].is_string() && !m[key].get<std::string>().empty())
      return Unimplemented(std::string("model: ") + key + " is not supported with byte-level BPE");
  }
  if (FlagOr(m, "byte_fallback", false))
    return Unimplemented("model: byte_fallback is not supported with byte-level BPE");
  impl->ignore_merges = FlagOr(m, "ignore_merges", false);

  if (!m.contains("vocab") || !m["vocab"].is_object())
    return InvalidArgument("model.vocab: expected an object of token -> id");
  int32_t max_id = -1;
  for (const auto& [token, id] : m["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      return InvalidArgument("model.vocab: token '" + token + "' has id " + id.dump() +
                             ", expected a non-negative integer");
    max_id = std::max(max_id, static_cast<int32_t>(id.get<int64_t>()));
  }
  impl->id_to_token.assign(max_id + 1, std::string());
  impl->id_kind.assign(max_id + 1, 0);
  impl->token_to_id.reserve(m["vocab"].size() * 2);
  for (const auto& [token, id_json] : m["vocab"].items()) {
    auto id = static_cast<int32_t>(id_json.get<int64_t>());
    if (impl->id_kind[id] != 0)
      return InvalidArgument("model.vocab: id " + std::to_string(id) + " is used by both '" +
                             impl->id_to_token[id] + "' and '" + token + "'");
    impl->id_to_token[id] = token;
    impl->id_kind[id] = 1;
    impl->token_to_id.emplace(token, id);
  }
  const auto& alphabet = tokenizer_internal::ByteToCodePoint();
  for (int b = 0; b < 256; ++b) {
    auto it = impl->token_to_id.find(utf8::Encode(alphabet[b]));
    if (it == impl->token_to_id.end()) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", b);
      return InvalidArgument(std::string("model.vocab: lacks the byte-level symbol for byte ") +
                             hex + " (a byte-level BPE vocabulary has all 256)");
    }
    impl->byte_ids[b] = it->second;
  }

  if (!m.contains("merges") || !m["merges"].is_array())
    return InvalidArgument("model.merges: expected an array");
  const json& merges = m["merges"];
  impl->merges.Reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& entry = merges[rank];
    std::string a, b;
    std::string where = "model.merges[" + std::to_string(rank) + "]";
    if (entry.is_string()) {
      const std::string& s = entry.get_ref<const std::string&>();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        return InvalidArgument(where + ": '" + s + "' is not two tokens separated by one space");
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
               entry[1].is_string()) {
      a = entry[0];
      b = entry[1];
    } else {
      return InvalidArgument(where + ": expected \"a b\" or [\"a\", \"b\"], got " +
                             entry.dump().substr(0, 80));
    }
    auto ia = impl->token_to_id.find(a), ib = impl->token_to_id.find(b),
         im = impl->token_to_id.find(a + b);
    if (ia == impl->token_to_id.end() || ib == impl->token_to_id.end())
      return InvalidArgument(where + ": token '" + (ia == impl->token_to_id.end() ? a : b) +
                             "' is not in the vocab");
    if (im == impl->token_to_id.end())
      return InvalidArgument(where + ": merged token '" + a + b + "' is not in the vocab");
    impl->merges.Insert(ia->second, ib->second,
                        Tokenizer::Impl::Merge{static_cast<int32_t>(rank), im->second});
  }
  impl->num_merges = merges.size();
  return OkStatus();
}

Status LoadAddedTokens(const json& j, Tokenizer::Impl* impl) {
  if (j.is_null()) return OkStatus();
  if (!j.is_array()) return InvalidArgument("added_tokens: expected an array");
  for (size_t i = 0; i < j.size(); ++i) {
    const json& t = j[i];
    std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string())
      return InvalidArgument(where + ": expected an object with integer 'id' and string 'content'");
    AddedToken tok;
    int64_t id = t["id"].get<int64_t>();
    if (id < 0 || id > INT32_MAX) return InvalidArgument(where + ": id out of range");
    tok.id = static_cast<int32_t>(id);
    tok.content = t["content"];
    if (tok.content.empty()) return InvalidArgument(where + ": empty content");
    if (!utf8::IsValid(tok.content)) return InvalidArgument(where + ": content is not UTF-8");
    tok.special = FlagOr(t, "special", false);
    tok.lstrip = FlagOr(t, "lstrip", false);
    tok.rstrip = FlagOr(t, "rstrip", false);
    tok.single_word = FlagOr(t, "single_word", false);
    tok.normalized = FlagOr(t, "normalized", !tok.special);
    if (static_cast<size_t>(tok.id) >= impl->id_to_token.size()) {
      impl->id_to_token.resize(tok.id + 1);
      impl->id_kind.resize(tok.id + 1, 0);
    }
    if (impl->id_kind[tok.id] == 1) impl->token_to_id.erase(impl->id_to_token[tok.id]);
    impl->id_to_token[tok.id] = tok.content;
    impl->id_kind[tok.id] = tok.special ? 3 : 2;
    impl->token_to_id[tok.content] = tok.id;
    impl->added.push_back(std::move(tok));
  }
  for (uint32_t i = 0; i < impl->added.size(); ++i)
    impl->added_by_first_byte[static_cast<unsigned char>(impl->added[i].content[0])].push_back(i);
  for (auto& list : impl->added_by_first_byte) {
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return impl->added[a].content.size() > impl->added[b].content.size();
    });
  }
  return OkStatus();
}

void BuildIdBytes(Tokenizer::Impl* impl) {
  // Inverse of the byte alphabet; characters outside it decode to their own UTF-8, as the
  // `tokenizers` ByteLevel decoder does.
  std::unordered_map<char32_t, char> inverse;
  const auto& alphabet = tokenizer_internal::ByteToCodePoint();
  for (int b = 0; b < 256; ++b) inverse[alphabet[b]] = static_cast<char>(b);
  impl->id_to_bytes.assign(impl->id_to_token.size(), std::string());
  for (size_t id = 0; id < impl->id_to_token.size(); ++id) {
    const std::string& token = impl->id_to_token[id];
    if (impl->id_kind[id] >= 2) {
      impl->id_to_bytes[id] = token;
      continue;
    }
    std::string bytes;
    for (size_t pos = 0; pos < token.size();) {
      size_t start = pos;
      char32_t c = utf8::Next(token, &pos);
      auto it = inverse.find(c);
      if (it != inverse.end()) {
        bytes += it->second;
      } else {
        bytes.append(token, start, pos - start);
      }
    }
    impl->id_to_bytes[id] = std::move(bytes);
  }
}

}  // namespace

StatusOr<Tokenizer> Tokenizer::FromJson(std::string_view json_text, const std::string& source) {
  // nlohmann::json throws on type mismatches the checks above did not foresee; turn any of them
  // into an error rather than a crash.
  try {
    auto impl = LoadTokenizerJson(json_text, source);
    if (!impl.ok()) return impl.status();
    return Tokenizer(std::move(*impl));
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(source + ": unexpected structure: " + e.what());
  }
}

namespace {

StatusOr<std::unique_ptr<Tokenizer::Impl>> LoadTokenizerJson(std::string_view json_text,
                                                             const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    return InvalidArgument(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) return InvalidArgument(source + ": expected a JSON object at the top level");
  auto impl = std::make_unique<Tokenizer::Impl>();
  auto fail = [&](const Status& s) { return s.WithContext(source); };
  if (!j.contains("model")) return InvalidArgument(source + ": lacks 'model'");
  if (j.contains("truncation") && !j["truncation"].is_null())
    return fail(Unimplemented("truncation: only null is supported"));
  Status s = LoadModel(j["model"], impl.get());
  if (!s.ok()) return fail(s);
  if (j.contains("added_tokens")) {
    s = LoadAddedTokens(j["added_tokens"], impl.get());
    if (!s.ok()) return fail(s);
  }
  s = LoadNormalizer(j.value("normalizer", json()), "normalizer", impl.get());
  if (!s.ok()) return fail(s);
  s = LoadPreTokenizer(j.value("pre_tokenizer", json()), "pre_tokenizer", impl.get());
  if (!s.ok()) return fail(s);
  s = CheckByteLevel(j.value("post_processor", json()), "post_processor", true);
  if (!s.ok()) return fail(s);
  s = CheckByteLevel(j.value("decoder", json()), "decoder", false);
  if (!s.ok()) return fail(s);
  BuildIdBytes(impl.get());
  return impl;
}

}  // namespace

StatusOr<Tokenizer> Tokenizer::FromFile(const std::string& path) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) p /= "tokenizer.json";
  std::ifstream in(p, std::ios::binary);
  if (!in) return NotFound(p.string() + ": cannot open tokenizer file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return DataLoss(p.string() + ": read error");
  return FromJson(text.str(), p.string());
}

}  // namespace tlaloc
