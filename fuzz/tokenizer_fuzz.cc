// libFuzzer target for the tokenizer. The first input byte picks the mode:
//   even: the rest is a tokenizer.json; loading must return a Status, never crash;
//   odd:  the rest is text for a small fixed tokenizer; encoding must not crash, decoding the
//         ids must give well-formed UTF-8, the streaming decoder must agree with Decode, and
//         well-formed NFC text without added tokens must round-trip exactly.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tlaloc/tokenizer/tokenizer.h"
#include "tlaloc/tokenizer/utf8.h"

namespace {

const tlaloc::Tokenizer& Small() {
  static const tlaloc::Tokenizer* tok = [] {
    std::string vocab, merges;
    for (int b = 0; b < 256; ++b) {
      std::string sym = tlaloc::ByteLevelSymbol(static_cast<uint8_t>(b));
      if (sym == "\"" || sym == "\\") sym = "\\" + sym;
      vocab += (b ? ",\"" : "\"") + sym + "\":" + std::to_string(b);
    }
    const char* pairs[][2] = {
        {"t", "h"}, {"th", "e"}, {"\xC4\xA0", "the"}, {"i", "n"},
        {"e", "r"}, {"a", "a"},  {"aa", "aa"},        {"\xC3\x83", "\xC2\xA9"}};
    int id = 256;
    for (auto& p : pairs) {
      vocab += ",\"" + std::string(p[0]) + p[1] + "\":" + std::to_string(id++);
      merges += std::string(merges.empty() ? "" : ",") + "\"" + p[0] + " " + p[1] + "\"";
    }
    std::string json =
        "{\"added_tokens\":[{\"id\":400,\"content\":\"<|s|>\",\"special\":true},"
        "{\"id\":401,\"content\":\"<t>\",\"special\":false,\"rstrip\":true}],"
        "\"normalizer\":{\"type\":\"NFC\"},"
        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
        "\"decoder\":{\"type\":\"ByteLevel\"},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{" +
        vocab + "},\"merges\":[" + merges + "]}}";
    auto t = tlaloc::Tokenizer::FromJson(json, "fuzz");
    if (!t.ok()) std::abort();
    return new tlaloc::Tokenizer(std::move(*t));
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    auto t = tlaloc::Tokenizer::FromJson(input, "fuzz");
    if (t.ok()) (void)t->Encode("fuzz <|x|> text");
    return 0;
  }
  const tlaloc::Tokenizer& tok = Small();
  std::vector<int32_t> ids = tok.Encode(input);
  auto text = tok.Decode(ids);
  if (!text.ok() || !tlaloc::utf8::IsValid(*text)) std::abort();
  tlaloc::StreamDecoder stream(tok);
  std::string streamed;
  for (int32_t id : ids) streamed += *stream.Push(id);
  streamed += stream.Finish();
  if (streamed != *text) std::abort();
  if (tlaloc::utf8::IsValid(input) && tlaloc::utf8::Nfc(input) == input &&
      input.find('<') == std::string::npos && *text != input)
    std::abort();
  return 0;
}
