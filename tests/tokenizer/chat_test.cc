// Chat templates from checkpoint folders (ChatTemplate): Qwen3's own template, read from
// data/qwen3/tokenizer_config.json, checked against strings written out by hand (the bytes the
// hand-written Qwen3 renderer produced before templates were rendered by the Jinja engine);
// parity_test.cc compares many more conversations with what transformers renders, and
// jinja_test.cc the engine itself with jinja2. Also where a template is found in a folder.
#include "tlaloc/tokenizer/chat.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "test_util.h"

namespace tlaloc {
namespace {

namespace fs = std::filesystem;

const ChatTemplate& Qwen3() {
  static const ChatTemplate t = [] {
    auto r = ChatTemplate::FromCheckpoint(fs::path(TLALOC_SOURCE_DIR) / "data/qwen3");
    if (!r.ok()) {
      ADD_FAILURE() << r.status().ToString();
      return *ChatTemplate::FromSource("");
    }
    return *r;
  }();
  return t;
}

std::string Render(const std::vector<ChatMessage>& m, ChatOptions o = {}) {
  auto r = Qwen3().Render(m, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : "";
}

TEST(ChatTest, SystemAndUserWithGenerationPrompt) {
  std::vector<ChatMessage> m = {{"system", "Be brief.", {}}, {"user", "Hi!", {}}};
  EXPECT_EQ(Render(m),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\n");
  ChatOptions no_think;
  no_think.enable_thinking = false;
  EXPECT_EQ(Render(m, no_think),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  ChatOptions think;
  think.enable_thinking = true;
  EXPECT_EQ(Render(m, think), Render(m));
  ChatOptions none;
  none.add_generation_prompt = false;
  EXPECT_EQ(Render({{"user", "x", {}}}, none), "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTest, EarlierAssistantTurnsDropTheirThinking) {
  std::vector<ChatMessage> m = {{"user", "q1", {}},
                                {"assistant", "<think>\nplan\n</think>\n\nanswer one", {}},
                                {"user", "q2", {}}};
  EXPECT_EQ(Render(m),
            "<|im_start|>user\nq1<|im_end|>\n"
            "<|im_start|>assistant\nanswer one<|im_end|>\n"
            "<|im_start|>user\nq2<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTest, FinalAssistantTurnKeepsAThinkBlock) {
  ChatOptions none;
  none.add_generation_prompt = false;
  std::vector<ChatMessage> m = {{"user", "q", {}}, {"assistant", "plain answer", {}}};
  EXPECT_EQ(Render(m, none),
            "<|im_start|>user\nq<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nplain answer<|im_end|>\n");
  m[1].reasoning_content = "\nsteps\n";
  EXPECT_EQ(Render(m, none),
            "<|im_start|>user\nq<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nsteps\n</think>\n\nplain answer<|im_end|>\n");
}

TEST(ChatTest, LaterSystemMessagesAndToolResults) {
  ChatOptions none;
  none.add_generation_prompt = false;
  std::vector<ChatMessage> m = {
      {"user", "u", {}}, {"system", "s2", {}}, {"tool", "r1", {}}, {"tool", "r2", {}}};
  EXPECT_EQ(Render(m, none),
            "<|im_start|>user\nu<|im_end|>\n"
            "<|im_start|>system\ns2<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nr1\n</tool_response>"
            "\n<tool_response>\nr2\n</tool_response><|im_end|>\n");
}

TEST(ChatTest, ToolsAndToolCallsRenderAsTheTemplateSays) {
  ChatOptions o;
  o.add_generation_prompt = false;
  o.tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
  ChatMessage call{"assistant", "", {}};
  call.tool_calls.push_back({"c1", "f", nlohmann::ordered_json::parse(R"({"x": "é"})")});
  ChatMessage result{"tool", "42", {}};
  result.tool_call_id = "c1";
  EXPECT_EQ(
      Render({{"user", "go", {}}, call, result}, o),
      "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the "
      "user query.\n\nYou are provided with function signatures within <tools></tools> XML "
      "tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\", "
      "\"parameters\": {\"type\": \"object\"}}}\n</tools>\n\nFor each function call, return a "
      "json object with function name and arguments within <tool_call></tool_call> XML "
      "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\ngo<|im_end|>\n"
      "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", "
      "\"arguments\": {\"x\": \"é\"}}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n");
}

// A scratch checkpoint folder, removed when it goes out of scope.
struct Folder {
  fs::path path;
  explicit Folder(const std::string& name)
      : path(fs::temp_directory_path() /
             ("tlaloc_chat_" + name + "_" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~Folder() { fs::remove_all(path); }
  void Write(const std::string& file, const std::string& text) const {
    std::ofstream(path / file) << text;
  }
};

TEST(ChatTest, TemplateIsFoundInTheCheckpointFolder) {
  Folder named("named");
  named.Write("tokenizer_config.json",
              R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>", "chat_template": [
                   {"name": "tool_use", "template": "tools"},
                   {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"}]})");
  auto t = ChatTemplate::FromCheckpoint(named.path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t->Render(std::vector<ChatMessage>{{"user", "hi", {}}}), "<s>hi</s>");

  Folder file("file");
  file.Write("tokenizer_config.json", R"({"eos_token": "<e>"})");
  file.Write("chat_template.jinja",
             "{% for m in messages %}{{ m.role }}:{{ m.content }}{{ eos_token }}{% endfor %}\n");
  t = ChatTemplate::FromCheckpoint(file.path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t->Render(std::vector<ChatMessage>{{"user", "a", {}}, {"assistant", "b", {}}}),
            "user:a<e>assistant:b<e>");

  Folder none("none");
  none.Write("tokenizer_config.json", R"({"eos_token": "<e>"})");
  auto missing = ChatTemplate::FromCheckpoint(none.path);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(none.path.string() + " has no chat template"),
            std::string::npos)
      << missing.status().message();
}

TEST(ChatTest, TemplateErrorsNameTheTemplateAndLine) {
  auto t = ChatTemplate::FromSource(
      "{% for m in messages %}\n{% if m.role == 'narrator' %}\n"
      "{{ raise_exception('unknown role ' + m.role) }}{% endif %}{% endfor %}",
      {}, "my template");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto r = t->Render(std::vector<ChatMessage>{{"user", "u", {}}, {"narrator", "n", {}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("my template: template line 3"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("unknown role narrator"), std::string::npos);
  auto bad = ChatTemplate::FromSource("{% if x %}", {}, "broken");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("broken: template line 1"), std::string::npos)
      << bad.status().message();
}

TEST(ChatTest, RenderedPromptEncodesWithControlTokens) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  auto text = Qwen3().Render(std::vector<ChatMessage>{{"user", "Hello", {}}});
  ASSERT_TRUE(text.ok());
  std::vector<int32_t> ids = tok->Encode(*text);
  const int32_t im_start = *tok->TokenToId("<|im_start|>"), im_end = *tok->TokenToId("<|im_end|>");
  ASSERT_GE(ids.size(), 6u);
  EXPECT_EQ(ids.front(), im_start);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), im_start), 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), im_end), 1);
  EXPECT_EQ(*tok->Decode(ids), *text);
}

}  // namespace
}  // namespace tlaloc
