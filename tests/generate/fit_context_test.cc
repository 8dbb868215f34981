// Dropping the oldest turns to fit a context (generate/fit_context.h), on the real Qwen3 tokenizer
// and the Qwen3 chat template: the system message stays, a user message and its replies go
// together, the last user message always stays, and nothing is dropped from what already fits.
#include "tlaloc/generate/fit_context.h"

#include <gtest/gtest.h>

#include "tlaloc/models/init.h"
#include "tokenizer/test_util.h"

namespace tlaloc::generate {
namespace {

ChatMessage Msg(std::string role, std::string content) {
  return ChatMessage{std::move(role), std::move(content), std::nullopt};
}

std::vector<std::string> Contents(const std::vector<ChatMessage>& messages) {
  std::vector<std::string> out;
  for (const ChatMessage& m : messages) out.push_back(m.content);
  return out;
}

const ChatTemplate& Qwen3() {
  static const ChatTemplate* t = [] {
    auto r = ChatTemplate::FromSource(models::Qwen3ChatTemplate(), {{"eos_token", "<|im_end|>"}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return new ChatTemplate(std::move(*r));
  }();
  return *t;
}

int64_t Tokens(const Tokenizer& tok, const std::vector<ChatMessage>& messages) {
  auto text = Qwen3().Render(messages, ChatOptions{});
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return static_cast<int64_t>(tok.Encode(*text).size());
}

TEST(FitContext, TurnsAreAUserMessageWithItsReplies) {
  // A greeting before the first user message is a turn of its own; tool results stay with the
  // user message that led to them.
  const std::vector<ChatMessage> m = {
      Msg("system", "s"),    Msg("assistant", "hello"), Msg("user", "u1"), Msg("assistant", "a1"),
      Msg("tool", "result"), Msg("assistant", "a1b"),   Msg("user", "u2")};
  EXPECT_EQ(TurnStarts(m), (std::vector<size_t>{1, 2, 6}));
  EXPECT_EQ(TurnStarts(std::vector<ChatMessage>{Msg("system", "s")}), std::vector<size_t>{});
  EXPECT_EQ(TurnStarts(std::vector<ChatMessage>{Msg("user", "u")}), std::vector<size_t>{0});
}

TEST(FitContext, DropsTheFewestOldestTurnsKeepingSystemAndPairs) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  const std::string long_text(400, 'x');
  const std::vector<ChatMessage> m = {Msg("system", "You are terse."),
                                      Msg("user", "first question " + long_text),
                                      Msg("assistant", "first answer " + long_text),
                                      Msg("user", "second question"),
                                      Msg("assistant", "second answer"),
                                      Msg("user", "third question")};
  const int64_t reserve = 10;
  const int64_t all = Tokens(*tok, m);
  const std::vector<ChatMessage> minus_one = {m[0], m[3], m[4], m[5]};
  const std::vector<ChatMessage> minimum = {m[0], m[5]};

  // What fits is left alone: one render, nothing dropped.
  auto whole = FitConversation(m, Qwen3(), ChatOptions{}, *tok, all + reserve, reserve);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_TRUE(whole->fits);
  EXPECT_EQ(whole->dropped_turns, 0);
  EXPECT_EQ(whole->messages.size(), m.size());
  EXPECT_EQ(static_cast<int64_t>(whole->prompt_ids.size()), all);

  // One token short: the first user/assistant pair goes, together.
  auto one = FitConversation(m, Qwen3(), ChatOptions{}, *tok, all + reserve - 1, reserve);
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one->fits);
  EXPECT_EQ(one->dropped_turns, 1);
  EXPECT_EQ(one->dropped_messages, 2);
  EXPECT_EQ(Contents(one->messages), Contents(minus_one));
  EXPECT_EQ(static_cast<int64_t>(one->prompt_ids.size()), Tokens(*tok, minus_one));
  EXPECT_LT(Tokens(*tok, minus_one) + reserve, all + reserve - 1);

  // Room for the system message and the last question only.
  const int64_t min_tokens = Tokens(*tok, minimum);
  auto two = FitConversation(m, Qwen3(), ChatOptions{}, *tok, min_tokens + reserve, reserve);
  ASSERT_TRUE(two.ok());
  EXPECT_TRUE(two->fits);
  EXPECT_EQ(two->dropped_turns, 2);
  EXPECT_EQ(two->dropped_messages, 4);
  EXPECT_EQ(Contents(two->messages), Contents(minimum));

  // Less than that: the minimum, marked as not fitting (the caller refuses it).
  auto none = FitConversation(m, Qwen3(), ChatOptions{}, *tok, min_tokens, reserve);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->fits);
  EXPECT_EQ(Contents(none->messages), Contents(minimum));
  EXPECT_EQ(static_cast<int64_t>(none->prompt_ids.size()), min_tokens);
}

TEST(FitContext, TheLastUserMessageWithItsToolRepliesIsNeverDropped) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  const std::vector<ChatMessage> m = {Msg("user", "only question"), Msg("assistant", "a"),
                                      Msg("tool", "r")};
  auto fit = FitConversation(m, Qwen3(), ChatOptions{}, *tok, 1, 1);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_FALSE(fit->fits);
  EXPECT_EQ(fit->dropped_turns, 0);
  EXPECT_EQ(fit->messages.size(), 3u);
}

}  // namespace
}  // namespace tlaloc::generate
