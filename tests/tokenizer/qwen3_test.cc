// Checks against the real Qwen3 tokenizer.json (skipped, by name, when it is not installed).
#include <gtest/gtest.h>

#include "test_util.h"

namespace tlaloc {
namespace {

TEST(Qwen3TokenizerTest, LoadsTheRealVocabulary) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  EXPECT_EQ(tok->vocab_size(), 151669);  // 151,643 BPE tokens + 26 added
  EXPECT_EQ(tok->num_merges(), 151387u);
  EXPECT_EQ(tok->added_tokens().size(), 26u);
  EXPECT_EQ(*tok->TokenToId("<|endoftext|>"), 151643);
  EXPECT_EQ(*tok->TokenToId("<|im_start|>"), 151644);
  EXPECT_EQ(*tok->TokenToId("<|im_end|>"), 151645);
  EXPECT_EQ(*tok->TokenToId("</think>"), 151668);
  EXPECT_TRUE(tok->IsSpecial(151645));
  EXPECT_FALSE(tok->IsSpecial(151667));  // <think> is an added token but not special
}

TEST(Qwen3TokenizerTest, EncodesTheReferenceSentence) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  std::vector<int32_t> ids = tok->Encode("Hello, world! The quick brown fox.");
  EXPECT_EQ(ids, (std::vector<int32_t>{9707, 11, 1879, 0, 576, 3974, 13876, 38835, 13}));
  EXPECT_EQ(*tok->Decode(ids), "Hello, world! The quick brown fox.");
  EXPECT_EQ(*tok->IdToToken(576), "\xC4\xA0The");  // "ĠThe"
  EXPECT_EQ(*tok->IdToBytes(576), " The");
}

TEST(Qwen3TokenizerTest, DigitsSplitOneAtATimeAndSpecialTokensMatchInline) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  std::vector<int32_t> digits = tok->Encode("12345");
  EXPECT_EQ(digits.size(), 5u);
  std::vector<int32_t> ids = tok->Encode("a<|im_end|>b");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], 151645);
  EncodeOptions plain;
  plain.allow_special = false;
  std::vector<int32_t> as_text = tok->Encode("<|im_end|>", plain);
  EXPECT_GT(as_text.size(), 1u);
  EXPECT_EQ(std::count(as_text.begin(), as_text.end(), 151645), 0);
  EXPECT_EQ(*tok->Decode(as_text), "<|im_end|>");
}

TEST(Qwen3TokenizerTest, StreamingDecodeMatchesDecodeOnMultiByteText) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  const std::string text =
      "Emoji 👩🏽‍💻 and 🇯🇵, Thai ภาษาไทย, Hindi हिन्दी, "
      "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 "
      "and "
      "汉字.";
  std::vector<int32_t> ids = tok->Encode(text);
  StreamDecoder stream(*tok);
  std::string streamed;
  bool held_some = false;
  for (int32_t id : ids) {
    auto piece = stream.Push(id);
    ASSERT_TRUE(piece.ok());
    EXPECT_TRUE(utf8::IsValid(*piece));
    held_some |= stream.pending_bytes() > 0;
    streamed += *piece;
  }
  streamed += stream.Finish();
  EXPECT_EQ(streamed, text);
  // Some token of this text ends inside a character (rare characters are split into bytes).
  EXPECT_TRUE(held_some);
}

}  // namespace
}  // namespace tlaloc

namespace tlaloc {
namespace {

// U+FEFF is not White_Space, so it is not part of a whitespace run for \s; the JavaScript oracle
// disagrees here (ECMAScript counts U+FEFF as \s), which is why the parity corpus leaves it out.
TEST(Qwen3TokenizerTest, ByteOrderMarkIsNotWhitespace) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  std::vector<int32_t> ids = tok->Encode("x  \xEF\xBB\xBF\xEF\xBB\xBF y");
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(*tok->IdToBytes(id));
  // "x", then one space (\s+(?!\S) stops before the non-space U+FEFF), then the space with the
  // two U+FEFF as one punctuation-like piece, then " y".
  ASSERT_GE(pieces.size(), 3u);
  EXPECT_EQ(pieces[0], "x");
  EXPECT_EQ(pieces[1], " ");
  EXPECT_EQ(pieces.back(), " y");
  std::string middle;
  for (size_t i = 2; i + 1 < pieces.size(); ++i) middle += pieces[i];
  EXPECT_EQ(middle, " \xEF\xBB\xBF\xEF\xBB\xBF");
}

}  // namespace
}  // namespace tlaloc
