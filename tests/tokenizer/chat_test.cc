// The Qwen3 chat format, checked against strings written out by hand from the chat template in
// the model's tokenizer_config.json; parity_test.cc compares many more conversations with what
// transformers renders from that template.
#include "tlaloc/tokenizer/chat.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "test_util.h"

namespace tlaloc {
namespace {

std::string Render(const std::vector<ChatMessage>& m, ChatOptions o = {}) {
  auto r = RenderQwen3Chat(m, o);
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

TEST(ChatTest, UnknownRoleIsAnError) {
  std::vector<ChatMessage> m = {{"user", "u", {}}, {"narrator", "n", {}}};
  auto r = RenderQwen3Chat(m);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("chat message 1: role 'narrator'"), std::string::npos);
}

TEST(ChatTest, RenderedPromptEncodesWithControlTokens) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  auto text = RenderQwen3Chat(std::vector<ChatMessage>{{"user", "Hello", {}}});
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
