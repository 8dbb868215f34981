// The OpenAI HTTP API's request and response bodies, apart from any socket: parsing and
// checking a /v1/chat/completions or /v1/completions body (every error names the field and what
// was expected, with the HTTP status an OpenAI client expects), and building the answers and
// server-sent-event chunks. Kept pure so that the fuzz target reaches all of it.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/generate/text_generation.h"
#include "tlaloc/serve/scheduler.h"
#include "tlaloc/serve/tool_calls.h"
#include "tlaloc/tokenizer/chat.h"

namespace tlaloc::serve {

enum class Endpoint { kChatCompletions, kCompletions };

// {"error": {"message", "type", "param", "code"}} with its HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field ("" when none)
  std::string code;   // e.g. "context_length_exceeded" ("" when none)
  nlohmann::json Body() const;
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string model;
  std::vector<ChatMessage> messages;  // chat
  std::string prompt;                 // completions
  std::vector<int32_t> prompt_ids;    // completions: a prompt given as token ids
  std::optional<int64_t> max_tokens;
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k;
  // presence/frequency in [-2, 2] (OpenAI), repetition_penalty > 0 and min_p in [0, 1] (vLLM),
  // logit_bias: token id -> bias in [-100, 100].
  std::optional<double> presence_penalty, frequency_penalty, repetition_penalty, min_p;
  std::map<int32_t, float> logit_bias;
  // response_format json_object / json_schema: the grammar every reply follows (null: text).
  std::shared_ptr<const generate::JsonGrammar> json_grammar;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false, include_usage = false;
  int top_logprobs = -1;                // -1: no logprobs
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking
  bool echo = false;                    // completions: not supported, refused
  // Chat: the function definitions (OpenAI's `tools`, key order kept), given to the template;
  // null when none. Replies are parsed for tool calls when tools are given and tool_choice is
  // "auto" (the default); "none" passes the tools to the template but leaves the reply text.
  nlohmann::ordered_json tools = nullptr;
  bool parse_tool_calls = false;
  // Choices (OpenAI's `n`, 1..128; at most the server's --max-batch): choice i samples with
  // seed + i; refused above 1 with tool-call parsing.
  int64_t n = 1;
};

// Parses a request body. Unknown fields are ignored (clients send many); known ones must have
// their documented types and ranges, and fields that would change the answer but are not
// honoured (best_of, n > 1 with tools, functions, function_call, tool_choice other than "auto" or
// "none") are refused with a 400 naming them; a response_format schema outside the supported
// subset is refused naming the keyword (generate/json_constraint.h).
std::optional<ApiError> ParseApiRequest(Endpoint endpoint, std::string_view body, ApiRequest* out);

// An unknown model is a 404 "model_not_found", as OpenAI and vLLM answer; an absent model is
// the served one (OpenAI requires the field, llama-server does not: clients that omit it work).
std::optional<ApiError> CheckModel(const ApiRequest& request, const std::string& served);

// The request in TextGenerator's terms (context: positions a slot holds).
generate::TextRequest ToTextRequest(const ApiRequest& request, int64_t context);

// The whole answer of a finished request: one choice per RequestStream choice, in index order.
nlohmann::json CompletionBody(const ApiRequest& request, const std::string& id, int64_t created,
                              const std::string& model, const RequestStream& done,
                              const std::vector<StreamEvent>& events);
// One streamed chunk for `event` (null when it carries nothing to send; its choice index is the
// event's), the closing chunk of choice `index` with its finish reason, and the usage chunk
// (stream_options.include_usage: the prompt counted once, the completions of every choice).
std::optional<nlohmann::json> StreamChunk(const ApiRequest& request, const std::string& id,
                                          int64_t created, const std::string& model,
                                          const StreamEvent& event, bool first);
nlohmann::json FinishChunk(const ApiRequest& request, const std::string& id, int64_t created,
                           const std::string& model, const std::string& finish_reason,
                           int64_t index = 0);
// A streamed tool call (the `index`-th of the reply), whole: id, type, name and all arguments.
nlohmann::json ToolCallChunk(const ApiRequest& request, const std::string& id, int64_t created,
                             const std::string& model, size_t index, const ParsedToolCall& call);
// The finish reason sent: "tool_calls" when the reply called tools and stopped by itself.
std::string FinishReason(const std::string& generated, bool called_tools);
// TLALOC_TEST_REPLY (tests only): the text that replaces the generated content of chat replies
// parsed for tool calls, so that tests drive the tool-call path with a model that never calls;
// such a reply ended by itself (finish "stop", whatever the random model's generation did).
const std::optional<std::string>& TestReply();
nlohmann::json UsageChunk(const ApiRequest& request, const std::string& id, int64_t created,
                          const std::string& model, const RequestStream& done);
nlohmann::json Usage(const RequestStream& done);

// JSON text that never throws on invalid UTF-8 (replaced by U+FFFD).
std::string Dump(const nlohmann::json& j);

}  // namespace tlaloc::serve
