// Request bodies the OpenAI endpoints refuse (each error names the field, with status 400) and
// accept, and the shapes of the answers built from a finished request.
#include "tlaloc/serve/openai_api.h"

#include <gtest/gtest.h>

namespace tlaloc::serve {
namespace {

using nlohmann::json;

std::optional<ApiError> Chat(const std::string& body, ApiRequest* out = nullptr) {
  ApiRequest r;
  return ParseApiRequest(Endpoint::kChatCompletions, body, out ? out : &r);
}

void ExpectRefused(const std::string& body, const std::string& param,
                   Endpoint endpoint = Endpoint::kChatCompletions) {
  ApiRequest r;
  auto e = ParseApiRequest(endpoint, body, &r);
  ASSERT_TRUE(e) << body << " was accepted";
  EXPECT_EQ(e->status, 400) << body;
  EXPECT_EQ(e->param, param) << body << ": " << e->message;
  EXPECT_FALSE(e->message.empty());
  json j = e->Body();
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["message"], e->message);
}

TEST(OpenAiApi, RefusesMalformedAndWrongTypedBodies) {
  ExpectRefused("{not json", "");
  ExpectRefused("", "");
  ExpectRefused("[1,2]", "");
  ExpectRefused("{}", "messages");
  ExpectRefused(R"({"messages": "hi"})", "messages");
  ExpectRefused(R"({"messages": []})", "messages");
  ExpectRefused(R"({"messages": [1]})", "messages[0]");
  ExpectRefused(R"({"messages": [{"content": "hi"}]})", "messages[0].role");
  ExpectRefused(R"({"messages": [{"role": "wizard", "content": "hi"}]})", "messages[0].role");
  ExpectRefused(R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content");
  ExpectRefused(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                "messages[0].content[0]");
  const std::string msg = R"("messages": [{"role": "user", "content": "hi"}])";
  ExpectRefused("{" + msg + R"(, "max_tokens": "10"})", "max_tokens");
  ExpectRefused("{" + msg + R"(, "max_tokens": 0})", "max_tokens");
  ExpectRefused("{" + msg + R"(, "max_tokens": 1.5})", "max_tokens");
  ExpectRefused("{" + msg + R"(, "temperature": "hot"})", "temperature");
  ExpectRefused("{" + msg + R"(, "temperature": -1})", "temperature");
  ExpectRefused("{" + msg + R"(, "top_p": 0})", "top_p");
  ExpectRefused("{" + msg + R"(, "top_k": 1.5})", "top_k");
  ExpectRefused("{" + msg + R"(, "seed": "x"})", "seed");
  ExpectRefused("{" + msg + R"(, "stop": 3})", "stop");
  ExpectRefused("{" + msg + R"(, "stop": [""]})", "stop");
  ExpectRefused("{" + msg + R"(, "stream": "yes"})", "stream");
  ExpectRefused("{" + msg + R"(, "stream_options": {"include_usage": 1}})",
                "stream_options.include_usage");
  ExpectRefused("{" + msg + R"(, "n": 0})", "n");
  ExpectRefused("{" + msg + R"(, "n": 129})", "n");
  ExpectRefused("{" + msg + R"(, "logprobs": 3})", "logprobs");
  ExpectRefused("{" + msg + R"(, "top_logprobs": 3})", "top_logprobs");
  ExpectRefused("{" + msg + R"(, "logprobs": true, "top_logprobs": 50})", "top_logprobs");
  ExpectRefused("{" + msg + R"(, "presence_penalty": 2.5})", "presence_penalty");
  ExpectRefused("{" + msg + R"(, "model": 7})", "model");
  ExpectRefused(R"({"prompt": 5})", "prompt", Endpoint::kCompletions);
  ExpectRefused(R"({"prompt": ""})", "prompt", Endpoint::kCompletions);
  ExpectRefused(R"({})", "prompt", Endpoint::kCompletions);
  ExpectRefused(R"({"prompt": "x", "logprobs": 9})", "logprobs", Endpoint::kCompletions);
  ExpectRefused(R"({"prompt": "x", "echo": true})", "echo", Endpoint::kCompletions);
}

// Fields that would change the answer are refused by name, not silently ignored (issue 38);
// their neutral values pass.
TEST(OpenAiApi, RefusesFieldsThatWouldChangeTheAnswer) {
  const std::string msg = R"("messages": [{"role": "user", "content": "hi"}])";
  for (const auto& [field, value] : std::vector<std::pair<std::string, std::string>>{
           {"functions", R"([{"name": "f"}])"},
           {"tool_choice", R"("required")"},
           {"tool_choice", R"({"type": "function", "function": {"name": "f"}})"},
           {"function_call", R"("auto")"},
           {"response_format",
            R"({"type": "json_schema", "json_schema": {"schema": {"type": "string",
                "pattern": "a+"}}})"}}) {
    ExpectRefused("{" + msg + ", \"" + field + "\": " + value + "}", field);
    ApiRequest r;
    auto e = ParseApiRequest(Endpoint::kChatCompletions,
                             "{" + msg + ", \"" + field + "\": " + value + "}", &r);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code, "unsupported_parameter");
  }
  ExpectRefused("{" + msg + R"(, "response_format": "text"})", "response_format");
  ExpectRefused("{" + msg + R"(, "response_format": {"type": "xml"}})", "response_format");
  ExpectRefused(R"({"prompt": "x", "best_of": 3})", "best_of", Endpoint::kCompletions);
  EXPECT_FALSE(Chat("{" + msg +
                    R"(, "logit_bias": {}, "tools": [], "tool_choice": "none", "n": 1,
                    "response_format": {"type": "text"}, "user": "u", "store": false,
                    "metadata": {"k": "v"}, "parallel_tool_calls": false})"));
  ApiRequest r;
  EXPECT_FALSE(ParseApiRequest(Endpoint::kCompletions, R"({"prompt": "x", "best_of": 1})", &r));
}

// Tools (issue 39): definitions are checked field by field and kept in their key order for the
// template; assistant tool_calls (arguments a JSON string, kept a string) and tool_call_id reach
// the chat messages; tool_choice "none" keeps the reply text.
TEST(OpenAiApi, ToolsAndToolMessages) {
  const std::string msg = R"("messages": [{"role": "user", "content": "hi"}])";
  for (const auto& [tools, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type": "function"})", "tools"},
           {R"([5])", "tools[0]"},
           {R"([{"type": "retrieval", "function": {"name": "f"}}])", "tools[0].type"},
           {R"([{"type": "function"}])", "tools[0].function"},
           {R"([{"type": "function", "function": {"name": ""}}])", "tools[0].function.name"},
           {R"([{"type": "function", "function": {"name": "f", "description": 3}}])",
            "tools[0].function.description"},
           {R"([{"type": "function", "function": {"name": "f", "parameters": "x"}}])",
            "tools[0].function.parameters"}})
    ExpectRefused("{" + msg + R"(, "tools": )" + tools + "}", param);
  ExpectRefused("{" + msg + R"(, "tool_choice": "sometimes"})", "tool_choice");
  // Choices are parsed for tool calls one reply at a time: n > 1 with tools is refused.
  ExpectRefused(
      "{" + msg + R"(, "n": 2, "tools": [{"type": "function", "function": {"name": "f"}}]})", "n");
  ExpectRefused(R"({"prompt": "x", "tools": [{"type": "function", "function": {"name": "f"}}]})",
                "tools", Endpoint::kCompletions);
  ExpectRefused(R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})",
                "messages[0].tool_calls");
  ExpectRefused(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {}}]}]})",
                "messages[0].tool_calls[0].function.name");
  ExpectRefused(R"({"messages": [{"role": "assistant", "tool_calls": [{"function":
                 {"name": "f", "arguments": 5}}]}]})",
                "messages[0].tool_calls[0].function.arguments");
  ExpectRefused(R"({"messages": [{"role": "tool", "content": "1", "tool_call_id": 3}]})",
                "messages[0].tool_call_id");

  const std::string body = R"({"messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
               "parameters": {"type": "object", "properties": {"zeta": {}, "alpha": {}}}}}],
    "tool_choice": "auto"})";
  ApiRequest r;
  ASSERT_FALSE(Chat(body, &r));
  EXPECT_TRUE(r.parse_tool_calls);
  ASSERT_EQ(r.messages.size(), 3u);
  ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[1].tool_calls[0].id, "call_1");
  EXPECT_EQ(r.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.messages[1].tool_calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(r.messages[2].tool_call_id, "call_1");
  // Key order as sent (a sorted map would put "alpha" first).
  EXPECT_EQ(r.tools[0]["function"]["parameters"]["properties"].dump(), R"({"zeta":{},"alpha":{}})");
  EXPECT_EQ(ToTextRequest(r, 0).tools, r.tools);
  std::string none = body;
  none.replace(none.find(R"("auto")"), 6, R"("none")");
  ASSERT_FALSE(Chat(none, &r));
  EXPECT_FALSE(r.parse_tool_calls);
  EXPECT_TRUE(r.tools.is_array());
  EXPECT_EQ(FinishReason("stop", true), "tool_calls");
  EXPECT_EQ(FinishReason("length", true), "length");
  EXPECT_EQ(FinishReason("stop", false), "stop");
}

// A completion's prompt may be token ids, alone or as the one prompt of a list; several prompts
// are refused by name rather than answered as one.
TEST(OpenAiApi, PromptAsTokenIds) {
  ApiRequest r;
  ASSERT_FALSE(ParseApiRequest(Endpoint::kCompletions, R"({"prompt": [1, 2, 3]})", &r));
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ToTextRequest(r, 0).prompt_ids, r.prompt_ids);
  ApiRequest nested;
  ASSERT_FALSE(ParseApiRequest(Endpoint::kCompletions, R"({"prompt": [[4, 5]]})", &nested));
  EXPECT_EQ(nested.prompt_ids, (std::vector<int32_t>{4, 5}));
  ExpectRefused(R"({"prompt": [[1], [2]]})", "prompt", Endpoint::kCompletions);
  ExpectRefused(R"({"prompt": ["a", "b"]})", "prompt", Endpoint::kCompletions);
  ExpectRefused(R"({"prompt": [1, -2]})", "prompt", Endpoint::kCompletions);
  ExpectRefused(R"({"prompt": [1, 2.5]})", "prompt", Endpoint::kCompletions);
  ExpectRefused(R"({"prompt": []})", "prompt", Endpoint::kCompletions);
  ExpectRefused(R"({"prompt": [[]]})", "prompt", Endpoint::kCompletions);
}

TEST(OpenAiApi, UnknownModelIsNotFound) {
  ApiRequest r;
  EXPECT_FALSE(CheckModel(r, "tiny"));  // absent: the served one
  r.model = "tiny";
  EXPECT_FALSE(CheckModel(r, "tiny"));
  r.model = "gpt-4o";
  auto e = CheckModel(r, "tiny");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 404);
  EXPECT_EQ(e->code, "model_not_found");
  EXPECT_EQ(e->param, "model");
}

// A range is written as people write it ("[0, 2]"), not with std::to_string's six decimals.
TEST(OpenAiApi, RangesInMessagesAreShort) {
  const std::string msg = R"("messages": [{"role": "user", "content": "hi"}])";
  auto e = Chat("{" + msg + R"(, "temperature": 3})");
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("[0, 2]"), std::string::npos) << e->message;
  EXPECT_EQ(e->message.find("0.000000"), std::string::npos) << e->message;
  e = Chat("{" + msg + R"(, "top_p": 0})");
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("(0, 1]"), std::string::npos) << e->message;
}

TEST(OpenAiApi, ReadsEveryField) {
  ApiRequest r;
  auto e = Chat(R"({"model": "m", "messages": [{"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
      "max_completion_tokens": 7, "max_tokens": 99, "temperature": 0.5, "top_p": 0.9,
      "top_k": -1, "seed": 42, "stop": ["x", "yy"], "stream": true,
      "stream_options": {"include_usage": true}, "n": 3, "logprobs": true, "top_logprobs": 2,
      "chat_template_kwargs": {"enable_thinking": false}, "user": "ignored", "tools": null})",
                &r);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.max_tokens, 7);  // max_completion_tokens wins
  EXPECT_EQ(r.temperature, 0.5);
  EXPECT_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.top_k, 0);  // -1: no limit
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "yy"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_EQ(r.enable_thinking, false);
  generate::TextRequest t = ToTextRequest(r, 128);
  EXPECT_EQ(t.max_new_tokens, 7);
  EXPECT_EQ(t.max_context, 128);
  EXPECT_EQ(t.messages.size(), 2u);

  ApiRequest c;
  ASSERT_FALSE(ParseApiRequest(Endpoint::kCompletions, R"({"prompt": ["hi"], "logprobs": 2,
      "stop": "z"})",
                               &c));
  EXPECT_EQ(c.prompt, "hi");
  EXPECT_EQ(c.top_logprobs, 2);
  EXPECT_EQ(c.stop, std::vector<std::string>{"z"});
}

TEST(OpenAiApi, StreamChunksCarryDeltasAndTheFinish) {
  ApiRequest r;
  ASSERT_FALSE(Chat(R"({"messages": [{"role": "user", "content": "hi"}]})", &r));
  StreamEvent e;
  e.content = "Hel";
  auto first = StreamChunk(r, "id1", 5, "m", e, true);
  ASSERT_TRUE(first);
  EXPECT_EQ((*first)["object"], "chat.completion.chunk");
  EXPECT_EQ((*first)["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ((*first)["choices"][0]["delta"]["content"], "Hel");
  EXPECT_TRUE((*first)["choices"][0]["finish_reason"].is_null());
  StreamEvent empty;
  EXPECT_FALSE(StreamChunk(r, "id1", 5, "m", empty, false));  // nothing to send
  json fin = FinishChunk(r, "id1", 5, "m", "length");
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(fin["choices"][0]["delta"].empty());

  ApiRequest c;
  ASSERT_FALSE(ParseApiRequest(Endpoint::kCompletions, R"({"prompt": "x"})", &c));
  auto chunk = StreamChunk(c, "id2", 5, "m", e, true);
  ASSERT_TRUE(chunk);
  EXPECT_EQ((*chunk)["object"], "text_completion");
  EXPECT_EQ((*chunk)["choices"][0]["text"], "Hel");
}

TEST(OpenAiApi, InvalidUtf8IsReplacedNotThrown) {
  json j = {{"text", std::string("a\xff"
                                 "b")}};
  EXPECT_EQ(Dump(j),
            "{\"text\":\"a\xEF\xBF\xBD"
            "b\"}");
}

}  // namespace
}  // namespace tlaloc::serve

namespace tlaloc::serve {
namespace {

// The sampling controls (issue 39): OpenAI's and vLLM's names and ranges, a 400 naming the
// field outside them, and the values carried into the TextRequest.
TEST(OpenAiApi, SamplingControlsParsedAndRangeChecked) {
  const std::string msg = R"("messages": [{"role": "user", "content": "hi"}])";
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, std::string>>{{"presence_penalty", "-2.01"},
                                                        {"presence_penalty", "\"x\""},
                                                        {"frequency_penalty", "2.5"},
                                                        {"repetition_penalty", "0"},
                                                        {"repetition_penalty", "-1"},
                                                        {"min_p", "1.5"},
                                                        {"min_p", "-0.1"},
                                                        {"logit_bias", "[1]"},
                                                        {"logit_bias", R"({"x": 1})"},
                                                        {"logit_bias", R"({"-3": 1})"},
                                                        {"logit_bias", R"({"5": 101})"},
                                                        {"logit_bias", R"({"5": "up"})"}}) {
    ExpectRefused("{" + msg + ", \"" + field + "\": " + value + "}", field);
    ExpectRefused(R"({"prompt": "x", ")" + field + "\": " + value + "}", field,
                  Endpoint::kCompletions);
  }
  for (Endpoint endpoint : {Endpoint::kChatCompletions, Endpoint::kCompletions}) {
    const std::string head =
        endpoint == Endpoint::kChatCompletions ? "{" + msg : std::string(R"({"prompt": "x")");
    ApiRequest r;
    ASSERT_FALSE(ParseApiRequest(endpoint, head + R"(, "presence_penalty": -2,
        "frequency_penalty": 1.5, "repetition_penalty": 1.2, "min_p": 0.1,
        "logit_bias": {"7": -100, "151": 2.5}, "seed": 3})",
                                 &r));
    EXPECT_EQ(r.presence_penalty, -2.0);
    EXPECT_EQ(r.frequency_penalty, 1.5);
    EXPECT_EQ(r.repetition_penalty, 1.2);
    EXPECT_EQ(r.min_p, 0.1);
    EXPECT_EQ(r.logit_bias, (std::map<int32_t, float>{{7, -100.f}, {151, 2.5f}}));
    generate::TextRequest t = ToTextRequest(r, 64);
    EXPECT_EQ(t.presence_penalty, -2.0);
    EXPECT_EQ(t.frequency_penalty, 1.5);
    EXPECT_EQ(t.repetition_penalty, 1.2);
    EXPECT_EQ(t.min_p, 0.1);
    EXPECT_EQ(t.logit_bias, r.logit_bias);
    EXPECT_EQ(t.seed, 3u);
  }
}

}  // namespace
}  // namespace tlaloc::serve
