// Qwen3 chat template, rendered directly (see chat.h). Each step names the template line it
// follows so the two can be compared.
#include "tlaloc/tokenizer/chat.h"

#include <string_view>

namespace tlaloc {

namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// Python's str.lstrip('\n') / rstrip('\n') / strip('\n').
std::string_view LStripNewlines(std::string_view s) {
  size_t i = s.find_first_not_of('\n');
  return i == std::string_view::npos ? std::string_view() : s.substr(i);
}
std::string_view RStripNewlines(std::string_view s) {
  size_t i = s.find_last_not_of('\n');
  return i == std::string_view::npos ? std::string_view() : s.substr(0, i + 1);
}

// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string_view BeforeFirst(std::string_view s, std::string_view sep) {
  size_t i = s.find(sep);
  return i == std::string_view::npos ? s : s.substr(0, i);
}
std::string_view AfterLast(std::string_view s, std::string_view sep) {
  size_t i = s.rfind(sep);
  return i == std::string_view::npos ? s : s.substr(i + sep.size());
}

bool IsToolResponse(const ChatMessage& m) {
  return StartsWith(m.content, "<tool_response>") && EndsWith(m.content, "</tool_response>");
}

}  // namespace

StatusOr<std::string> RenderQwen3Chat(std::span<const ChatMessage> messages,
                                      const ChatOptions& options) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      return InvalidArgument("chat message " + std::to_string(i) + ": role '" + role +
                             "' is not one of system, user, assistant, tool");
  }
  std::string out;
  const size_t n = messages.size();
  // {%- if messages[0].role == 'system' %} ... system turn first.
  if (n > 0 && messages[0].role == "system")
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  // ns.last_query_index: the last user message that is not a wrapped tool response.
  size_t last_query = n == 0 ? 0 : n - 1;
  for (size_t k = n; k-- > 0;) {
    if (messages[k].role == "user" && !IsToolResponse(messages[k])) {
      last_query = k;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      if (m.reasoning_content.has_value()) {
        reasoning = *m.reasoning_content;
      } else if (content.find("</think>") != std::string_view::npos) {
        std::string_view full = m.content;
        content = LStripNewlines(AfterLast(full, "</think>"));
        reasoning =
            LStripNewlines(AfterLast(RStripNewlines(BeforeFirst(full, "</think>")), "<think>"));
      }
      const bool last = i + 1 == n;
      if (n > 0 && i > last_query && (last || !reasoning.empty())) {
        out += "<|im_start|>assistant\n<think>\n";
        out += RStripNewlines(LStripNewlines(reasoning));
        out += "\n</think>\n\n";
        out += LStripNewlines(content);
      } else {
        out += "<|im_start|>assistant\n";
        out += content;
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == n || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (options.enable_thinking.has_value() && !*options.enable_thinking)
      out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace tlaloc
