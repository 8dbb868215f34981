// Tool calls in a model's reply, as Qwen3 (and Hermes-style templates) emit them:
//   <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
// one block or several, with text around them. ParseToolCalls splits a finished reply into the
// text outside the blocks and OpenAI-form calls (arguments as a JSON string); ToolCallStreamer
// does the same on the deltas of a streamed reply, holding back text that may be the start of a
// <tool_call> marker. As vLLM's hermes parser: a block whose body is not a JSON object with a
// string "name" is no call, and the reply stays text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tlaloc::serve {

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";

struct ParsedToolCall {
  std::string id;         // "call_" and 24 random letters and digits
  std::string name;       // function.name
  std::string arguments;  // function.arguments: JSON text ("{}" when the block gives none)
};

struct ToolCallParse {
  // The text outside the blocks, without the whitespace next to a block; empty when none.
  std::string content;
  std::vector<ParsedToolCall> calls;
};

// A fresh call id ("call_" + 24 characters of [A-Za-z0-9]).
std::string NewToolCallId();

// A finished reply. Any malformed block (bad JSON, no name) makes the whole reply text with no
// calls; an unclosed last block (the reply was cut) is a call when its body parses.
ToolCallParse ParseToolCalls(std::string_view text);

// The streamed form. Feed() takes each content delta and returns what can go out now; Finish()
// returns the rest. A call goes out when its block closes, whole (its name and all its
// arguments then; an unclosed last block, at Finish, when its body parses). A malformed block goes
// out as text, since earlier deltas may already have gone out (unlike the non-streamed form, which
// then has no calls at all).
class ToolCallStreamer {
 public:
  // What can go out, in order: text pieces and completed calls.
  struct Item {
    std::string text;     // content, when !is_call
    ParsedToolCall call;  // when is_call
    bool is_call = false;
  };
  std::vector<Item> Feed(std::string_view delta);
  std::vector<Item> Finish();
  size_t calls_sent() const { return calls_sent_; }

 private:
  void Drain(std::vector<Item>& out, bool at_end);

  std::string pending_;    // text not yet sent: a possible marker start, or a block's body
  std::string ws_before_;  // whitespace before the open block (dropped when it is a call)
  bool in_block_ = false;
  bool after_block_ = false;  // whitespace right after a call is dropped
  size_t calls_sent_ = 0;
};

}  // namespace tlaloc::serve
