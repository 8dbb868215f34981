// libFuzzer target for the Jinja engine (tlaloc/tokenizer/jinja.h): the input is a template; it
// must parse or yield an error Status, and what parses must render over a fixed chat context (or
// yield an error) within small limits, so that no template can crash, hang or exhaust memory.
// Rendering twice must give the same text (the engine keeps no state between renders).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tlaloc/tokenizer/jinja.h"

namespace {

const nlohmann::ordered_json& Context() {
  static const nlohmann::ordered_json j = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi <think>"},
      {"role": "assistant", "content": "<think>\nx\n</think>\n\nhello", "reasoning_content": null,
       "tool_calls": [{"id": "call00001", "type": "function",
                       "function": {"name": "f", "arguments": {"a": [1, 2.5, true]}}}]},
      {"role": "tool", "content": "{\"ok\": 1}"},
      {"role": "user", "content": [{"type": "text", "text": "part"}, {"type": "image"}]}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<s>", "eos_token": "</s>"})");
  return j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tmpl = tlaloc::jinja::Template::Parse(text);
  if (!tmpl.ok()) return 0;
  tlaloc::jinja::JinjaLimits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_loop_iterations = 100000;
  limits.max_call_depth = 50;
  auto a = tmpl->Render(Context(), limits);
  auto b = tmpl->Render(Context(), limits);
  if (a.ok() != b.ok() || (a.ok() && *a != *b)) {
    std::fprintf(stderr, "jinja_template_fuzz: two renders of one template differ\n");
    std::abort();
  }
  if (a.ok() && a->size() > static_cast<size_t>(limits.max_output_bytes) * 2) {
    std::fprintf(stderr, "jinja_template_fuzz: output of %zu bytes passed the limit\n", a->size());
    std::abort();
  }
  return 0;
}
