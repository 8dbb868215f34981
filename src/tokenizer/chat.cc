// Chat templates from checkpoints, rendered with the Jinja engine (see chat.h).
#include "tlaloc/tokenizer/chat.h"

#include <fstream>
#include <sstream>

namespace tlaloc {

namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

StatusOr<std::string> ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A special token as tokenizer_config.json writes it: a string, or an AddedToken object
// {"content": ...}; null when unset.
std::optional<std::string> TokenText(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string())
    return j["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

Json ChatMessageJson(const ChatMessage& m) {
  Json j = Json::object();
  // transformers also passes the reasoning as `thinking` (first) for templates that read that.
  if (m.reasoning_content) j["thinking"] = *m.reasoning_content;
  j["role"] = m.role;
  j["content"] = m.content;
  if (!m.tool_calls.empty()) {
    Json calls = Json::array();
    for (const ToolCall& c : m.tool_calls) {
      Json call = Json::object();
      if (!c.id.empty()) call["id"] = c.id;
      call["type"] = "function";
      call["function"] = {{"name", c.name}, {"arguments", c.arguments}};
      calls.push_back(std::move(call));
    }
    j["tool_calls"] = std::move(calls);
  }
  if (m.tool_call_id) j["tool_call_id"] = *m.tool_call_id;
  if (m.reasoning_content) j["reasoning_content"] = *m.reasoning_content;
  return j;
}

StatusOr<ChatTemplate> ChatTemplate::FromSource(const std::string& source, Json special_tokens,
                                                std::string origin) {
  auto parsed = jinja::Template::Parse(source);
  if (!parsed.ok()) return parsed.status().WithContext(origin);
  ChatTemplate t;
  t.template_ = std::move(*parsed);
  t.source_ = source;
  t.special_tokens_ = special_tokens.is_object() ? std::move(special_tokens) : Json::object();
  t.origin_ = std::move(origin);
  return t;
}

StatusOr<ChatTemplate> ChatTemplate::FromCheckpoint(const fs::path& dir) {
  const fs::path config_path = dir / "tokenizer_config.json";
  Json config = Json::object();
  if (fs::exists(config_path)) {
    TL_ASSIGN_OR_RETURN(std::string text, ReadText(config_path));
    config = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object())
      return InvalidArgument(config_path.string() + ": not a JSON object");
  }
  std::optional<std::string> source;
  std::string origin;
  if (auto it = config.find("chat_template"); it != config.end() && !it->is_null()) {
    origin = config_path.string() + " chat_template";
    if (it->is_string()) {
      source = it->get<std::string>();
    } else if (it->is_array()) {
      // Several named templates: the one named "default" renders conversations.
      for (const Json& named : *it) {
        if (named.is_object() && named.value("name", "") == "default" &&
            named.contains("template") && named["template"].is_string())
          source = named["template"].get<std::string>();
      }
      if (!source)
        return InvalidArgument(origin + ": a list of named templates without one named 'default'");
    } else {
      return InvalidArgument(origin + ": expected a string or a list of {name, template}");
    }
  } else if (fs::exists(dir / "chat_template.jinja")) {
    origin = (dir / "chat_template.jinja").string();
    TL_ASSIGN_OR_RETURN(source, ReadText(dir / "chat_template.jinja"));
  }
  if (!source)
    return NotFound(dir.string() +
                    " has no chat template (neither a chat_template in tokenizer_config.json nor "
                    "chat_template.jinja), so conversations cannot be rendered for this model");
  Json special = Json::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    if (auto it = config.find(key); it != config.end()) {
      if (auto text = TokenText(*it)) special[key] = *text;
    }
  }
  return FromSource(*source, std::move(special), std::move(origin));
}

StatusOr<std::string> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                           const ChatOptions& options) const {
  Json ctx = special_tokens_;
  Json list = Json::array();
  for (const ChatMessage& m : messages) list.push_back(ChatMessageJson(m));
  ctx["messages"] = std::move(list);
  ctx["tools"] = options.tools;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = options.add_generation_prompt;
  if (options.enable_thinking) ctx["enable_thinking"] = *options.enable_thinking;
  if (options.extra.is_object()) {
    for (const auto& [k, v] : options.extra.items()) ctx[k] = v;
  }
  auto text = template_.Render(ctx);
  if (!text.ok()) return text.status().WithContext(origin_);
  return text;
}

}  // namespace tlaloc
