// Request parsing and answer building for the OpenAI HTTP API.
#include "tlaloc/serve/openai_api.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace tlaloc::serve {

namespace {

using nlohmann::json;

ApiError Bad(std::string param, std::string message, std::string code = "") {
  ApiError e;
  e.status = 400;
  e.param = std::move(param);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

std::string TypeName(const json& v) { return v.type_name(); }

// Each reader leaves `out` alone and returns an error when the field has the wrong type or
// range; a missing or null field is no error.
std::optional<ApiError> ReadInt(const json& body, const char* name, int64_t lo, int64_t hi,
                                std::optional<int64_t>* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (it->is_number_integer() || it->is_number_unsigned()) {
    // Unsigned values above INT64_MAX read back negative; both are outside any range below.
    const bool big = it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX;
    const int64_t v = big ? std::numeric_limits<int64_t>::max() : it->get<int64_t>();
    if (!big && v >= lo && v <= hi) {
      *out = v;
      return std::nullopt;
    }
  } else if (it->is_number_float()) {
    const double d = it->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) &&
        d <= static_cast<double>(hi)) {
      *out = static_cast<int64_t>(d);
      return std::nullopt;
    }
  } else {
    return Bad(name, std::string("'") + name + "' must be an integer, got " + TypeName(*it));
  }
  return Bad(name, std::string("'") + name + "' must be an integer in " + std::to_string(lo) +
                       ".." + std::to_string(hi));
}

// A bound as people write it: 0, 2, 0.5 (std::to_string would say 0.000000).
std::string Short(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::optional<ApiError> ReadNumber(const json& body, const char* name, double lo, double hi,
                                   bool lo_open, std::optional<double>* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number())
    return Bad(name, std::string("'") + name + "' must be a number, got " + TypeName(*it));
  const double v = it->get<double>();
  if (!std::isfinite(v) || v > hi || (lo_open ? v <= lo : v < lo)) {
    std::string range = (lo_open ? "(" : "[") + Short(lo) + ", " + Short(hi) + "]";
    return Bad(name, std::string("'") + name + "' must be a number in " + range);
  }
  *out = v;
  return std::nullopt;
}

std::optional<ApiError> ReadBool(const json& body, const char* name, bool* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    return Bad(name, std::string("'") + name + "' must be a boolean, got " + TypeName(*it));
  *out = it->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> ReadString(const json& body, const char* name, std::string* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string())
    return Bad(name, std::string("'") + name + "' must be a string, got " + TypeName(*it));
  *out = it->get<std::string>();
  return std::nullopt;
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::optional<ApiError> ReadContent(const json& v, const std::string& param, std::string* out) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array())
    return Bad(param,
               "'" + param + "' must be a string or an array of text parts, got " + TypeName(v));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    const json& part = v[i];
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return Bad(p, "'" + p + "' must be an object with a string 'type'");
    if (part["type"] != "text")
      return Bad(p, "'" + p + "': only text parts are supported, got type '" +
                        part["type"].get<std::string>() + "'");
    if (!part.contains("text") || !part["text"].is_string())
      return Bad(p + ".text", "'" + p + ".text' must be a string");
    *out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

using OrderedJson = nlohmann::ordered_json;

// An assistant message's `tool_calls`: [{id, type: "function", function: {name, arguments}}],
// arguments a JSON string in OpenAI's form (kept a string: the template prints a string as it is,
// as transformers' apply_chat_template does with OpenAI-form messages) or an object.
std::optional<ApiError> ReadToolCalls(const OrderedJson& v, const std::string& p,
                                      std::vector<ToolCall>* out) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_array()) return Bad(p, "'" + p + "' must be an array, got " + v.type_name());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string q = p + "[" + std::to_string(i) + "]";
    const OrderedJson& c = v[i];
    if (!c.is_object()) return Bad(q, "'" + q + "' must be an object, got " + c.type_name());
    if (c.contains("type") && c["type"] != "function")
      return Bad(q + ".type", "'" + q + ".type' must be \"function\"");
    if (!c.contains("function") || !c["function"].is_object())
      return Bad(q + ".function", "'" + q + ".function' must be an object {name, arguments}");
    const OrderedJson& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      return Bad(q + ".function.name", "'" + q + ".function.name' must be a non-empty string");
    ToolCall call;
    call.name = f["name"].get<std::string>();
    if (c.contains("id") && !c["id"].is_null()) {
      if (!c["id"].is_string()) return Bad(q + ".id", "'" + q + ".id' must be a string");
      call.id = c["id"].get<std::string>();
    }
    if (f.contains("arguments") && !f["arguments"].is_null()) {
      const OrderedJson& a = f["arguments"];
      if (!a.is_string() && !a.is_object())
        return Bad(q + ".function.arguments",
                   "'" + q + ".function.arguments' must be a JSON string or an object, got " +
                       a.type_name());
      call.arguments = a;
    }
    out->push_back(std::move(call));
  }
  return std::nullopt;
}

// `tools`: [{type: "function", function: {name, description?, parameters?}}].
std::optional<ApiError> ReadTools(const OrderedJson& v, OrderedJson* out) {
  if (!v.is_array())
    return Bad("tools", std::string("'tools' must be an array, got ") + v.type_name());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = "tools[" + std::to_string(i) + "]";
    const OrderedJson& t = v[i];
    if (!t.is_object()) return Bad(p, "'" + p + "' must be an object, got " + t.type_name());
    if (!t.contains("type") || t["type"] != "function")
      return Bad(p + ".type", "'" + p + ".type' must be \"function\" (the only tool type)");
    if (!t.contains("function") || !t["function"].is_object())
      return Bad(p + ".function",
                 "'" + p + ".function' must be an object {name, description, parameters}");
    const OrderedJson& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      return Bad(p + ".function.name", "'" + p + ".function.name' must be a non-empty string");
    if (f.contains("description") && !f["description"].is_null() && !f["description"].is_string())
      return Bad(p + ".function.description", "'" + p + ".function.description' must be a string");
    if (f.contains("parameters") && !f["parameters"].is_null() && !f["parameters"].is_object())
      return Bad(p + ".function.parameters",
                 "'" + p + ".function.parameters' must be a JSON Schema object");
  }
  *out = v;
  return std::nullopt;
}

std::optional<ApiError> ReadMessages(const json& body, const OrderedJson& ordered,
                                     std::vector<ChatMessage>* out) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null())
    return Bad("messages", "'messages' is required: an array of {role, content} objects");
  if (!it->is_array()) return Bad("messages", "'messages' must be an array, got " + TypeName(*it));
  if (it->empty()) return Bad("messages", "'messages' must hold at least one message");
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    const json& m = (*it)[i];
    if (!m.is_object()) return Bad(p, "'" + p + "' must be an object, got " + TypeName(m));
    ChatMessage msg;
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return Bad(p + ".role", "'" + p + ".role' must be a string");
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      return Bad(p + ".role", "'" + p + ".role' is '" + msg.role +
                                  "': expected system, developer, user, assistant or tool");
    if (auto c = m.find("content"); c != m.end())
      if (auto e = ReadContent(*c, p + ".content", &msg.content)) return e;
    if (auto r = m.find("reasoning_content"); r != m.end() && !r->is_null()) {
      if (!r->is_string())
        return Bad(p + ".reasoning_content", "'" + p + ".reasoning_content' must be a string");
      msg.reasoning_content = r->get<std::string>();
    }
    if (m.contains("tool_calls")) {
      if (msg.role != "assistant")
        return Bad(p + ".tool_calls", "'" + p + ".tool_calls' belongs to assistant messages");
      if (auto e = ReadToolCalls(ordered["messages"][i]["tool_calls"], p + ".tool_calls",
                                 &msg.tool_calls))
        return e;
    }
    if (auto id = m.find("tool_call_id"); id != m.end() && !id->is_null()) {
      if (!id->is_string())
        return Bad(p + ".tool_call_id", "'" + p + ".tool_call_id' must be a string");
      msg.tool_call_id = id->get<std::string>();
    }
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

// logit_bias: an object of token ids (decimal strings) to biases in [-100, 100].
std::optional<ApiError> ReadLogitBias(const json& body, std::map<int32_t, float>* out) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object())
    return Bad("logit_bias",
               "'logit_bias' must be an object of token ids to biases, got " + TypeName(*it));
  for (const auto& [key, value] : it->items()) {
    char* end = nullptr;
    errno = 0;
    const long long id = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || errno != 0 || id < 0 || id > INT32_MAX)
      return Bad("logit_bias", "'logit_bias' key \"" + key + "\" is not a token id");
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100 ||
        value.get<double>() > 100)
      return Bad("logit_bias", "'logit_bias' of token " + key + " must be a number in [-100, 100]");
    (*out)[static_cast<int32_t>(id)] = value.get<float>();
  }
  return std::nullopt;
}

// Fields that would change the answer if honoured, and are not: a 400 naming the field, rather
// than a 200 whose answer silently ignores them. Absent, null and neutral values (an empty
// functions list, function_call "none", best_of 1)
// pass; fields that change nothing (user, store, metadata, service_tier...) are not looked at.
std::optional<ApiError> RefuseResultChangingFields(const json& j, Endpoint endpoint) {
  auto present = [&](const char* name) -> const json* {
    auto it = j.find(name);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  };
  auto refuse = [](const char* name, const std::string& why) {
    return Bad(name, std::string("'") + name + "' is not supported: " + why,
               "unsupported_parameter");
  };
  if (endpoint == Endpoint::kCompletions)
    if (const json* v = present("best_of"); v && !(v->is_number() && v->get<double>() == 1))
      return refuse("best_of", "one candidate is generated per request (best_of 1 only)");
  if (const json* v = present("functions"); v && !(v->is_array() && v->empty()))
    return refuse("functions", "the deprecated 'functions' form is not read; send 'tools'");
  if (const json* v = present("function_call"); v && !(v->is_string() && *v == "none"))
    return refuse("function_call",
                  "the deprecated 'function_call' is not read; send 'tool_choice' (\"none\" only "
                  "here)");
  if (const json* v = present("tool_choice");
      v && !(v->is_string() && (*v == "none" || *v == "auto"))) {
    if (v->is_string() && *v != "required")
      return Bad("tool_choice",
                 "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                 "{\"type\": \"function\", ...}, got \"" +
                     v->get<std::string>() + "\"");
    if (!v->is_string() && !v->is_object())
      return Bad("tool_choice", "'tool_choice' must be a string or an object, got " + TypeName(*v));
    return refuse("tool_choice",
                  "only \"auto\" and \"none\": calls are not forced (no constrained decoding)");
  }
  return std::nullopt;
}

// A completion's prompt as OpenAI takes it: a string, token ids, or an array of either; an
// array holds one prompt here (several would be a batch of choices, which is refused).
std::optional<ApiError> ReadPrompt(const json& v, std::string* text, std::vector<int32_t>* ids) {
  auto read_ids = [&](const json& list) -> std::optional<ApiError> {
    for (const json& id : list) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        return Bad("prompt", "'prompt' token ids must be integers >= 0, got " + id.dump());
      ids->push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    return std::nullopt;
  };
  if (v.is_string()) {
    *text = v.get<std::string>();
    return std::nullopt;
  }
  if (v.is_array() && v.empty()) return Bad("prompt", "'prompt' must not be empty");
  if (v.is_array() && v[0].is_number()) return read_ids(v);
  if (v.is_array() && v.size() > 1)
    return Bad("prompt",
               "'prompt' holds " + std::to_string(v.size()) +
                   " prompts: one prompt per request is supported (send them separately)",
               "unsupported_parameter");
  if (v.is_array() && v.size() == 1 && v[0].is_string()) {
    *text = v[0].get<std::string>();
    return std::nullopt;
  }
  if (v.is_array() && v.size() == 1 && v[0].is_array()) return read_ids(v[0]);
  return Bad("prompt",
             "'prompt' must be a string or an array of token ids (or an array of one "
             "of those), got " +
                 TypeName(v));
}

std::optional<ApiError> ReadStop(const json& body, std::vector<std::string>* out) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return std::nullopt;
  std::vector<json> items;
  if (it->is_string()) {
    items.push_back(*it);
  } else if (it->is_array()) {
    items.assign(it->begin(), it->end());
  } else {
    return Bad("stop", "'stop' must be a string or an array of strings, got " + TypeName(*it));
  }
  if (items.size() > 16) return Bad("stop", "'stop' holds at most 16 strings");
  for (const json& s : items) {
    if (!s.is_string()) return Bad("stop", "'stop' must hold strings, got " + TypeName(s));
    if (s.get<std::string>().empty()) return Bad("stop", "'stop' strings must not be empty");
    out->push_back(s.get<std::string>());
  }
  return std::nullopt;
}

json TokenEntry(const TokenLogprob& t) {
  json bytes = json::array();
  for (unsigned char c : t.token) bytes.push_back(static_cast<int>(c));
  return {{"token", t.token},
          {"logprob", std::isfinite(t.logprob) ? t.logprob : -9999.0},
          {"bytes", bytes}};
}

// Chat: {"content": [{token, logprob, bytes, top_logprobs}]}; completions: the legacy columns.
json LogprobsOf(const ApiRequest& r, const std::vector<const StreamEvent*>& events) {
  if (r.top_logprobs < 0) return nullptr;
  if (r.endpoint == Endpoint::kChatCompletions) {
    json content = json::array();
    for (const StreamEvent* e : events) {
      if (!e->chosen) continue;
      json entry = TokenEntry(*e->chosen);
      json top = json::array();
      for (const auto& t : e->top) top.push_back(TokenEntry(t));
      entry["top_logprobs"] = top;
      content.push_back(entry);
    }
    return {{"content", content}};
  }
  json tokens = json::array(), lps = json::array(), tops = json::array();
  for (const StreamEvent* e : events) {
    if (!e->chosen) continue;
    tokens.push_back(e->chosen->token);
    lps.push_back(std::isfinite(e->chosen->logprob) ? e->chosen->logprob : -9999.0);
    json top = json::object();
    for (const auto& t : e->top) top[t.token] = t.logprob;
    tops.push_back(top);
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}};
}

const char* ObjectName(const ApiRequest& r, bool chunk) {
  if (r.endpoint == Endpoint::kCompletions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

}  // namespace

json ApiError::Body() const {
  json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? json(nullptr) : json(param);
  e["code"] = code.empty() ? json(nullptr) : json(code);
  return {{"error", e}};
}

std::optional<ApiError> CheckModel(const ApiRequest& request, const std::string& served) {
  if (request.model.empty() || request.model == served) return std::nullopt;
  ApiError e;
  e.status = 404;
  e.param = "model";
  e.code = "model_not_found";
  e.message = "The model '" + request.model + "' does not exist: this server serves '" + served +
              "' (GET /v1/models)";
  return e;
}

std::optional<ApiError> ParseApiRequest(Endpoint endpoint, std::string_view body, ApiRequest* out) {
  ApiRequest r;
  r.endpoint = endpoint;
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad("", "the request body is not valid JSON");
  if (!j.is_object()) return Bad("", "the request body must be a JSON object, got " + TypeName(j));
  if (auto e = ReadString(j, "model", &r.model)) return e;
  if (endpoint == Endpoint::kChatCompletions) {
    // Tools and call arguments keep their key order (the template prints them as JSON).
    const OrderedJson ordered = OrderedJson::parse(body.begin(), body.end(), nullptr, false);
    if (auto e = ReadMessages(j, ordered, &r.messages)) return e;
    if (auto it = ordered.find("tools"); it != ordered.end() && !it->is_null())
      if (auto e = ReadTools(*it, &r.tools)) return e;
  } else {
    auto it = j.find("prompt");
    if (it == j.end() || it->is_null())
      return Bad("prompt", "'prompt' is required: a string or an array of token ids");
    if (auto e = ReadPrompt(*it, &r.prompt, &r.prompt_ids)) return e;
    if (r.prompt.empty() && r.prompt_ids.empty())
      return Bad("prompt", "'prompt' must not be empty");
  }
  std::optional<int64_t> max_tokens, max_completion_tokens;
  constexpr int64_t kMaxTokens = int64_t{1} << 30;
  if (auto e = ReadInt(j, "max_tokens", 1, kMaxTokens, &max_tokens)) return e;
  if (auto e = ReadInt(j, "max_completion_tokens", 1, kMaxTokens, &max_completion_tokens)) return e;
  r.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  if (auto e = ReadNumber(j, "temperature", 0, 2, false, &r.temperature)) return e;
  if (auto e = ReadNumber(j, "top_p", 0, 1, true, &r.top_p)) return e;
  // top_k: -1 means no limit in vLLM's and llama.cpp's APIs, as 0 does here.
  if (auto e = ReadInt(j, "top_k", -1, INT32_MAX, &r.top_k)) return e;
  if (r.top_k && *r.top_k < 0) r.top_k = 0;
  std::optional<int64_t> seed;
  if (auto e = ReadInt(j, "seed", std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max(), &seed))
    return e;
  if (seed) r.seed = static_cast<uint64_t>(*seed);
  if (auto e = ReadStop(j, &r.stop)) return e;
  if (auto e = ReadBool(j, "stream", &r.stream)) return e;
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object())
      return Bad("stream_options", "'stream_options' must be an object, got " + TypeName(*it));
    if (auto e = ReadBool(*it, "include_usage", &r.include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  std::optional<int64_t> n;
  if (auto e = ReadInt(j, "n", 1, generate::kMaxChoices, &n)) return e;
  if (n) r.n = *n;
  if (auto e = RefuseResultChangingFields(j, endpoint)) return e;
  if (endpoint == Endpoint::kCompletions && j.contains("tools") &&
      !(j["tools"].is_null() || (j["tools"].is_array() && j["tools"].empty())))
    return Bad("tools", "'tools' is a chat field: use /v1/chat/completions",
               "unsupported_parameter");
  r.parse_tool_calls = r.tools.is_array() && !r.tools.empty() &&
                       !(j.contains("tool_choice") && j["tool_choice"] == "none");
  if (r.parse_tool_calls && r.n > 1)
    return Bad("n", "'n' must be 1 when the reply is parsed for tool calls (tools given)",
               "unsupported_parameter");
  if (auto e = ReadNumber(j, "presence_penalty", -2, 2, false, &r.presence_penalty)) return e;
  if (auto e = ReadNumber(j, "frequency_penalty", -2, 2, false, &r.frequency_penalty)) return e;
  if (auto e = ReadNumber(j, "repetition_penalty", 0, std::numeric_limits<double>::infinity(), true,
                          &r.repetition_penalty))
    return e;
  if (auto e = ReadNumber(j, "min_p", 0, 1, false, &r.min_p)) return e;
  if (auto e = ReadLogitBias(j, &r.logit_bias)) return e;
  if (auto it = j.find("response_format"); it != j.end() && !it->is_null()) {
    auto grammar = generate::GrammarOfResponseFormat(*it);
    if (!grammar.ok())
      return Bad(
          "response_format", grammar.status().message(),
          grammar.status().code() == StatusCode::kUnimplemented ? "unsupported_parameter" : "");
    r.json_grammar = *grammar;
  }
  if (endpoint == Endpoint::kChatCompletions) {
    bool logprobs = false;
    if (auto e = ReadBool(j, "logprobs", &logprobs)) return e;
    std::optional<int64_t> top;
    if (auto e = ReadInt(j, "top_logprobs", 0, 20, &top)) return e;
    if (top && !logprobs) return Bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (logprobs) r.top_logprobs = static_cast<int>(top.value_or(0));
    if (auto it = j.find("chat_template_kwargs"); it != j.end() && !it->is_null()) {
      if (!it->is_object())
        return Bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
      bool thinking = true;
      if (it->contains("enable_thinking")) {
        if (auto e = ReadBool(*it, "enable_thinking", &thinking)) {
          e->param = "chat_template_kwargs.enable_thinking";
          return e;
        }
        r.enable_thinking = thinking;
      }
    }
  } else {
    std::optional<int64_t> lp;
    if (auto e = ReadInt(j, "logprobs", 0, 5, &lp)) return e;
    if (lp) r.top_logprobs = static_cast<int>(*lp);
    if (auto e = ReadBool(j, "echo", &r.echo)) return e;
    if (r.echo) return Bad("echo", "'echo' is not supported");
    std::string suffix;
    if (auto e = ReadString(j, "suffix", &suffix)) return e;
    if (!suffix.empty()) return Bad("suffix", "'suffix' is not supported");
  }
  *out = std::move(r);
  return std::nullopt;
}

generate::TextRequest ToTextRequest(const ApiRequest& r, int64_t context) {
  generate::TextRequest t;
  t.messages = r.messages;
  t.prompt = r.prompt;
  t.prompt_ids = r.prompt_ids;
  t.enable_thinking = r.enable_thinking;
  t.tools = r.tools;
  t.max_new_tokens = r.max_tokens;
  t.temperature = r.temperature;
  t.top_p = r.top_p;
  t.top_k = r.top_k;
  t.presence_penalty = r.presence_penalty;
  t.frequency_penalty = r.frequency_penalty;
  t.repetition_penalty = r.repetition_penalty;
  t.min_p = r.min_p;
  t.logit_bias = r.logit_bias;
  t.json_grammar = r.json_grammar;
  t.seed = r.seed;
  t.stop = r.stop;
  t.max_context = context;
  return t;
}

json Usage(const RequestStream& done) {
  return {{"prompt_tokens", done.prompt_tokens()},
          {"completion_tokens", done.completion_tokens()},
          {"total_tokens", done.prompt_tokens() + done.completion_tokens()}};
}

namespace {

// One choice of a finished request, its logprobs from its own events.
json CompletionChoice(const ApiRequest& r, const RequestStream& done,
                      const std::vector<StreamEvent>& events, int64_t index) {
  std::vector<const StreamEvent*> ptrs;
  for (const auto& e : events)
    if (e.choice == index) ptrs.push_back(&e);
  json choice = {{"index", index},
                 {"finish_reason", generate::FinishReasonName(done.finish_reason(index))}};
  choice["logprobs"] = LogprobsOf(r, ptrs);
  if (r.endpoint == Endpoint::kChatCompletions) {
    json message = {{"role", "assistant"}, {"content", done.content(index)}};
    if (r.parse_tool_calls) {
      const ToolCallParse parse = ParseToolCalls(TestReply().value_or(done.content(index)));
      message["content"] = parse.content;
      if (!parse.calls.empty()) {
        // OpenAI's form: content null when the reply is only calls.
        if (parse.content.empty()) message["content"] = nullptr;
        json calls = json::array();
        for (const ParsedToolCall& c : parse.calls)
          calls.push_back({{"id", c.id},
                           {"type", "function"},
                           {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        message["tool_calls"] = calls;
      }
      choice["finish_reason"] = FinishReason(
          TestReply() ? "stop" : std::string(generate::FinishReasonName(done.finish_reason(index))),
          !parse.calls.empty());
    }
    if (!done.reasoning(index).empty()) message["reasoning_content"] = done.reasoning(index);
    choice["message"] = message;
  } else {
    // A completion is the text as generated: reasoning is not split out of it.
    choice["text"] = done.content(index);
  }
  return choice;
}

}  // namespace

json CompletionBody(const ApiRequest& r, const std::string& id, int64_t created,
                    const std::string& model, const RequestStream& done,
                    const std::vector<StreamEvent>& events) {
  json choices = json::array();
  for (int64_t index = 0; index < done.choices(); ++index)
    choices.push_back(CompletionChoice(r, done, events, index));
  return {{"id", id},           {"object", ObjectName(r, false)},
          {"created", created}, {"model", model},
          {"choices", choices}, {"usage", Usage(done)}};
}

std::optional<json> StreamChunk(const ApiRequest& r, const std::string& id, int64_t created,
                                const std::string& model, const StreamEvent& event, bool first) {
  const bool has_logprobs = r.top_logprobs >= 0 && event.chosen;
  if (!first && event.content.empty() && event.reasoning.empty() && !has_logprobs)
    return std::nullopt;
  json choice = {{"index", event.choice}, {"finish_reason", nullptr}};
  choice["logprobs"] = has_logprobs ? LogprobsOf(r, {&event}) : json(nullptr);
  if (r.endpoint == Endpoint::kChatCompletions) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!event.content.empty() || first) delta["content"] = event.content;
    if (!event.reasoning.empty()) delta["reasoning_content"] = event.reasoning;
    choice["delta"] = delta;
  } else {
    choice["text"] = event.content;
  }
  return json{{"id", id},
              {"object", ObjectName(r, true)},
              {"created", created},
              {"model", model},
              {"choices", json::array({choice})}};
}

json FinishChunk(const ApiRequest& r, const std::string& id, int64_t created,
                 const std::string& model, const std::string& finish_reason, int64_t index) {
  json choice = {{"index", index}, {"finish_reason", finish_reason}, {"logprobs", nullptr}};
  if (r.endpoint == Endpoint::kChatCompletions)
    choice["delta"] = json::object();
  else
    choice["text"] = "";
  return {{"id", id},
          {"object", ObjectName(r, true)},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})}};
}

json ToolCallChunk(const ApiRequest& r, const std::string& id, int64_t created,
                   const std::string& model, size_t index, const ParsedToolCall& call) {
  json delta = {
      {"tool_calls",
       json::array({{{"index", index},
                     {"id", call.id},
                     {"type", "function"},
                     {"function", {{"name", call.name}, {"arguments", call.arguments}}}}})}};
  json choice = {{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}, {"logprobs", nullptr}};
  return {{"id", id},
          {"object", ObjectName(r, true)},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})}};
}

std::string FinishReason(const std::string& generated, bool called_tools) {
  return called_tools && generated == "stop" ? "tool_calls" : generated;
}

const std::optional<std::string>& TestReply() {
  static const std::optional<std::string> reply = []() -> std::optional<std::string> {
    const char* env = std::getenv("TLALOC_TEST_REPLY");
    if (env == nullptr) return std::nullopt;
    return std::string(env);
  }();
  return reply;
}

json UsageChunk(const ApiRequest& r, const std::string& id, int64_t created,
                const std::string& model, const RequestStream& done) {
  return {{"id", id},       {"object", ObjectName(r, true)}, {"created", created},
          {"model", model}, {"choices", json::array()},      {"usage", Usage(done)}};
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace tlaloc::serve
