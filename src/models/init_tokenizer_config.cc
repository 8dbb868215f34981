// tokenizer_config.json for init-model's checkpoints (see init.h): the Qwen3 chat template as
// Jinja, which Tlaloc (tokenizer/chat.h), transformers and llama.cpp (through a GGUF export) all
// render from the checkpoint.
#include <nlohmann/json.hpp>

#include "tlaloc/models/init.h"

namespace tlaloc::models {

namespace {

// The rules of Qwen3's own template for plain-text turns: the first system message is the
// system turn; the last user message that is not a wrapped <tool_response> is the last query;
// an assistant reply's <think> part (reasoning_content, or the text before </think>) is shown
// only after the last query, and the final reply always keeps a (maybe empty) think block;
// consecutive tool results share one user turn; enable_thinking=false closes an empty think
// block in the generation prompt. Tool definitions and tool calls are left out.
// No trailing newline: it would be emitted after the generation prompt.
constexpr const char* kQwen3ChatTemplate =
    R"JINJA({%- set n = messages | length %}
{%- if n > 0 and messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- set ns = namespace(found=false, last_query=(n - 1 if n > 0 else 0)) %}
{%- for message in messages[::-1] %}
    {%- set text = message.content if message.content is string else '' %}
    {%- if not ns.found and message.role == 'user' and not (text.startswith('<tool_response>') and text.endswith('</tool_response>')) %}
        {%- set ns.found = true %}
        {%- set ns.last_query = n - 1 - loop.index0 %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- set content = message.content if message.content is string else '' %}
    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>\n' }}
    {%- elif message.role == 'assistant' %}
        {%- set reasoning = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning = message.reasoning_content %}
        {%- elif '</think>' in content %}
            {%- set reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query and (loop.last or reasoning) %}
            {{- '<|im_start|>assistant\n<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
        {%- else %}
            {{- '<|im_start|>assistant\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' + content + '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %})JINJA";

}  // namespace

std::string Qwen3ChatTemplate() { return kQwen3ChatTemplate; }

std::string Qwen3TokenizerConfigJson(const io::ModelConfig& config) {
  // What transformers needs to load the folder's tokenizer.json as Qwen3's: the end-of-turn and
  // padding tokens, no BOS, no space clean-up, and the chat template.
  nlohmann::json j = {
      {"tokenizer_class", "Qwen2Tokenizer"},
      {"add_bos_token", false},
      {"add_prefix_space", false},
      {"bos_token", nullptr},
      {"eos_token", "<|im_end|>"},
      {"pad_token", "<|endoftext|>"},
      {"unk_token", nullptr},
      {"errors", "replace"},
      {"clean_up_tokenization_spaces", false},
      {"split_special_tokens", false},
      {"model_max_length", config.max_position_embeddings},
      {"chat_template", kQwen3ChatTemplate},
  };
  return j.dump(2) + "\n";
}

}  // namespace tlaloc::models
