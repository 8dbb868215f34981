// libFuzzer target for response_format schemas (generate/json_constraint.h), which come from
// outside: the input is a schema's JSON text, a NUL byte, then choice bytes. A schema must be
// refused with a message or compiled; a compiled one's automaton is walked over the printable
// bytes, each step taking the byte the next choice picks among those allowed: a live state always
// allows a byte or is complete (no dead end), and closing it greedily (the byte that lowers
// BytesToClose) ends, within that many bytes, in text that parses as JSON and that the grammar
// matches.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/generate/json_constraint.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& text) {
  std::fprintf(stderr, "json_schema_fuzz: %s after \"%s\"\n", what, text.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tlaloc::generate;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view schema_text = input.substr(0, nul);
  const std::string_view choices =
      nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  const nlohmann::json schema =
      nlohmann::json::parse(schema_text.begin(), schema_text.end(), nullptr, false);
  if (schema.is_discarded()) return 0;
  auto grammar = JsonGrammar::FromSchema(schema);
  if (!grammar.ok()) {
    if (grammar.status().message().empty()) Fail("a refusal without a message", "");
    return 0;
  }
  JsonMatcher m(*grammar);
  JsonState s = m.Start(), next;
  std::string text;
  auto allowed = [&](const JsonState& from) {
    std::vector<uint8_t> bytes;
    for (int b = 0x20; b < 0x7f; ++b) {
      m.Advance(from, static_cast<uint8_t>(b), next);
      if (!next.dead()) bytes.push_back(static_cast<uint8_t>(b));
    }
    return bytes;
  };
  for (size_t i = 0; i < choices.size() && i < 256; ++i) {
    const std::vector<uint8_t> bytes = allowed(s);
    if (bytes.empty()) {
      if (!m.Complete(s)) Fail("a dead end", text);
      break;
    }
    const uint8_t b = bytes[static_cast<uint8_t>(choices[i]) % bytes.size()];
    m.Advance(s, b, next);
    std::swap(s, next);
    text += static_cast<char>(b);
  }
  // Closing: each step takes a byte that brings the close nearer.
  int64_t budget = m.BytesToClose(s);
  if (budget > (int64_t{1} << 30)) Fail("a live state without a finite close", text);
  while (!m.Complete(s)) {
    if (budget-- < 0) Fail("closing took more bytes than BytesToClose said", text);
    const int64_t now = m.BytesToClose(s);
    bool moved = false;
    for (uint8_t b : allowed(s)) {
      m.Advance(s, b, next);
      if (m.BytesToClose(next) < now) {
        std::swap(s, next);
        text += static_cast<char>(b);
        moved = true;
        break;
      }
    }
    if (!moved) Fail("no byte brings the close nearer", text);
  }
  if (nlohmann::json::parse(text, nullptr, false).is_discarded())
    Fail("text that is not JSON", text);
  if (!m.Matches(text)) Fail("text the grammar does not match", text);
  return 0;
}
