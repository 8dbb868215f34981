// Chat rendering: a conversation becomes the prompt text a model was trained on, by the model's
// own Jinja chat template (tokenizer_config.json's `chat_template`, or chat_template.jinja, in
// its checkpoint folder), rendered with Tlaloc's Jinja engine (tokenizer/jinja.h) as
// transformers' apply_chat_template renders it: the messages, `tools`, `add_generation_prompt`,
// `enable_thinking` and any extra keyword arguments, with the special tokens of
// tokenizer_config.json (bos_token, eos_token, ...) as template variables.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/support/status.h"
#include "tlaloc/tokenizer/jinja.h"

namespace tlaloc {

// An assistant's call of a tool (OpenAI's `tool_calls[i]`).
struct ToolCall {
  std::string id;
  std::string name;
  // The arguments: a JSON object, or a string when given as text (templates accept both).
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool" (the template decides what it takes)
  std::string content;
  // The template's `reasoning_content`; when absent, templates that know <think> take it from
  // the content.
  std::optional<std::string> reasoning_content;
  std::vector<ToolCall> tool_calls = {};         // assistant turns that call tools
  std::optional<std::string> tool_call_id = {};  // tool turns: the call answered
};

struct ChatOptions {
  bool add_generation_prompt = true;
  // The template's enable_thinking (Qwen3: false closes an empty think block in the generation
  // prompt); unset leaves it undefined, as transformers does.
  std::optional<bool> enable_thinking;
  // The tool (function) definitions, a JSON list; null for none.
  nlohmann::ordered_json tools = nullptr;
  // More template variables (transformers' **kwargs, OpenAI's chat_template_kwargs).
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

class ChatTemplate {
 public:
  // The template of a checkpoint folder: tokenizer_config.json's `chat_template` (a string, or a
  // list of {name, template} of which "default" is taken), else chat_template.jinja; the special
  // tokens come from tokenizer_config.json. A folder with no template is an error naming it.
  static StatusOr<ChatTemplate> FromCheckpoint(const std::filesystem::path& dir);
  // A template given as text; `special_tokens` (e.g. {"eos_token": "<|im_end|>"}) become
  // variables. `origin` names it in errors.
  static StatusOr<ChatTemplate> FromSource(const std::string& source,
                                           nlohmann::ordered_json special_tokens = {},
                                           std::string origin = "chat template");

  // The prompt text of the conversation; an error (the template's raise_exception, or a
  // construct it cannot render) names the template's origin and line.
  StatusOr<std::string> Render(std::span<const ChatMessage> messages,
                               const ChatOptions& options = {}) const;

  const std::string& source() const { return source_; }

 private:
  jinja::Template template_;
  std::string source_;
  nlohmann::ordered_json special_tokens_;
  std::string origin_;
};

// The message as a chat template sees it (transformers' form: role, content, tool_calls with
// {id, type, function: {name, arguments}}, tool_call_id, and reasoning_content also under
// `thinking`).
nlohmann::ordered_json ChatMessageJson(const ChatMessage& message);

}  // namespace tlaloc
