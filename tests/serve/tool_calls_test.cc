// The tool-call parser (tlaloc/serve/tool_calls.h), whole and streamed: the streamed form must
// give the same text and calls as the whole form for any split of the reply into deltas.
#include "tlaloc/serve/tool_calls.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tlaloc::serve {
namespace {

using nlohmann::json;

constexpr char kWeather[] =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
    "2}}\n</tool_call>";
constexpr char kTime[] =
    "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>";

void ExpectCall(const ParsedToolCall& c, const std::string& name, const json& args) {
  EXPECT_EQ(c.name, name);
  EXPECT_EQ(json::parse(c.arguments), args) << c.arguments;
  EXPECT_EQ(c.id.rfind("call_", 0), 0u) << c.id;
  EXPECT_EQ(c.id.size(), 29u) << c.id;
}

// The streamed result of `text` cut into pieces of `step` bytes: the text sent, and the calls.
ToolCallParse Stream(const std::string& text, size_t step) {
  ToolCallStreamer s;
  ToolCallParse out;
  auto take = [&](const std::vector<ToolCallStreamer::Item>& items) {
    for (const auto& item : items) {
      if (item.is_call)
        out.calls.push_back(item.call);
      else
        out.content += item.text;
    }
  };
  for (size_t i = 0; i < text.size(); i += step) take(s.Feed(text.substr(i, step)));
  take(s.Finish());
  EXPECT_EQ(s.calls_sent(), out.calls.size());
  return out;
}

TEST(ToolCalls, OneCallIsNoContent) {
  ToolCallParse p = ParseToolCalls(kWeather);
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  ExpectCall(p.calls[0], "get_weather", {{"city", "Paris"}, {"days", 2}});
}

TEST(ToolCalls, SeveralCallsAndTextAround) {
  const std::string text =
      std::string("Let me check.\n\n") + kWeather + "\n" + kTime + "\nDone, one moment.";
  ToolCallParse p = ParseToolCalls(text);
  EXPECT_EQ(p.content, "Let me check.Done, one moment.");
  ASSERT_EQ(p.calls.size(), 2u);
  ExpectCall(p.calls[0], "get_weather", {{"city", "Paris"}, {"days", 2}});
  ExpectCall(p.calls[1], "get_time", {{"zone", "CET"}});
  EXPECT_NE(p.calls[0].id, p.calls[1].id);
}

TEST(ToolCalls, PlainTextIsUntouched) {
  for (std::string text : {"Hello there.", "a < b and <tool_ is not a marker", "", "  \n"}) {
    ToolCallParse p = ParseToolCalls(text);
    EXPECT_EQ(p.content, text);
    EXPECT_TRUE(p.calls.empty());
  }
}

TEST(ToolCalls, MalformedJsonLeavesTheText) {
  for (std::string text :
       {std::string("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call>"),
        std::string("<tool_call>\n{\"arguments\": {}}\n</tool_call>"),  // no name
        std::string("<tool_call>\n[\"f\"]\n</tool_call>"),              // not an object
        std::string(kWeather) + "\n<tool_call>{oops}</tool_call>"}) {   // one bad of two
    ToolCallParse p = ParseToolCalls(text);
    EXPECT_EQ(p.content, text);
    EXPECT_TRUE(p.calls.empty()) << text;
  }
}

TEST(ToolCalls, ArgumentsMissingOrAsString) {
  ToolCallParse p = ParseToolCalls("<tool_call>{\"name\": \"now\"}</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{}");
  p = ParseToolCalls("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{\"a\": 1}");
}

TEST(ToolCalls, UnclosedLastBlockIsACallWhenItParses) {
  ToolCallParse p = ParseToolCalls("Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n");
  EXPECT_EQ(p.content, "Sure.");
  ASSERT_EQ(p.calls.size(), 1u);
  p = ParseToolCalls("<tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "<tool_call>\n{\"name\": \"f\", \"argu");
}

// Every split of the reply into deltas gives what the whole-text parse gives (markers cut across
// deltas included).
TEST(ToolCallStreamer, AnySplitMatchesTheWholeParse) {
  const std::vector<std::string> texts = {
      kWeather,
      std::string("Let me check.\n\n") + kWeather + "\n" + kTime + "\nDone, one moment.",
      "No tools here, but a < sign and <tool and </tool_call> alone.",
      "Trailing partial marker <tool_c",
      std::string("  ") + kTime + "  ",
      "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n",
  };
  for (const std::string& text : texts) {
    const ToolCallParse whole = ParseToolCalls(text);
    for (size_t step = 1; step <= text.size(); ++step) {
      const ToolCallParse s = Stream(text, step);
      EXPECT_EQ(s.content, whole.content) << "step " << step << " of: " << text;
      ASSERT_EQ(s.calls.size(), whole.calls.size()) << "step " << step << " of: " << text;
      for (size_t i = 0; i < s.calls.size(); ++i) {
        EXPECT_EQ(s.calls[i].name, whole.calls[i].name);
        EXPECT_EQ(s.calls[i].arguments, whole.calls[i].arguments);
      }
    }
  }
}

// Text before a marker goes out before the marker is complete; only a possible marker start
// (and the whitespace before it) is held back.
TEST(ToolCallStreamer, HoldsBackOnlyAPossibleMarker) {
  ToolCallStreamer s;
  auto items = s.Feed("Checking <tool");
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].text, "Checking");
  items = s.Feed("_call>\n{\"name\": \"f\", \"arguments\": {\"q\": 1}}\n</tool_");
  EXPECT_TRUE(items.empty());
  items = s.Feed("call> after");
  ASSERT_EQ(items.size(), 2u);
  ASSERT_TRUE(items[0].is_call);
  EXPECT_EQ(items[0].call.name, "f");
  EXPECT_EQ(json::parse(items[0].call.arguments), json({{"q", 1}}));
  EXPECT_EQ(items[1].text, "after");
  EXPECT_TRUE(s.Finish().empty());
  // "<" that turns out not to be a marker is sent as soon as that is known.
  ToolCallStreamer t;
  EXPECT_TRUE(t.Feed("a <").size() == 1);
  items = t.Feed("b");
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].text, " <b");
}

// Streamed, a malformed block goes out as text (earlier calls stay calls).
TEST(ToolCallStreamer, MalformedBlockGoesOutAsText) {
  const std::string bad = "<tool_call>{oops}</tool_call>";
  const ToolCallParse s = Stream(std::string(kWeather) + "\n" + bad + " end", 3);
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(s.content, bad + " end");
}

}  // namespace
}  // namespace tlaloc::serve
