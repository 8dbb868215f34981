// The Qwen3 chat format: what the model's Jinja chat template (tokenizer_config.json of Qwen3)
// renders for plain-text conversations, written out in C++ so no template engine is needed.
//
//   <|im_start|>system\n{system}<|im_end|>\n
//   <|im_start|>user\n{user}<|im_end|>\n
//   <|im_start|>assistant\n{reply}<|im_end|>\n
//   <|im_start|>assistant\n                        (the generation prompt)
//
// Details kept from the template: a system message is only special as the first message (a
// later one renders like a user turn); an assistant reply's "<think>...</think>" part is moved
// to reasoning and dropped from turns before the last user query, while turns after it keep a
// (possibly empty) <think> block; tool results render as <tool_response> inside a user turn; and
// with enable_thinking = false the generation prompt ends with an empty think block.
// Tool definitions and tool calls are not supported.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "tlaloc/support/status.h"

namespace tlaloc {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  // The template's `reasoning_content`; when absent it is taken from <think>...</think> in content.
  std::optional<std::string> reasoning_content;
};

struct ChatOptions {
  bool add_generation_prompt = true;
  // false appends "<think>\n\n</think>\n\n" to the generation prompt (the template's
  // enable_thinking=false); true or unset leave the model free to think.
  std::optional<bool> enable_thinking;
};

// Renders the conversation; an unknown role is an error naming the message.
StatusOr<std::string> RenderQwen3Chat(std::span<const ChatMessage> messages,
                                      const ChatOptions& options = {});

}  // namespace tlaloc
