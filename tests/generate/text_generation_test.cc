// The reply splitter on the real Qwen3 tokenizer: the think block goes to reasoning and the rest
// to content, a stop string ends the content wherever the tokens split it, and streamed pieces add
// up to the result.
#include "tlaloc/generate/text_generation.h"

#include <gtest/gtest.h>

#include "tokenizer/test_util.h"

namespace tlaloc {
namespace {

struct Split {
  generate::TextResult result;
  std::string streamed_reasoning, streamed_content;
  bool stopped = false;
};

// `with_ids`: the tokenizer's <think> ids mark the block; false: the markers are spelled as text
// pieces and the splitter has no ids for them, as with a byte-level tokenizer.
Split RunSplitter(const Tokenizer& tok, const std::string& reply,
                  const std::vector<std::string>& stops, bool with_ids = true) {
  EncodeOptions eo;
  eo.allow_special = with_ids;
  const std::vector<int32_t> ids = tok.Encode(reply, eo);
  Split s;
  generate::TextCallback on_text = [&](generate::TextPart part, std::string_view piece) {
    (part == generate::TextPart::kReasoning ? s.streamed_reasoning : s.streamed_content) += piece;
  };
  generate::ReplySplitter splitter(tok, with_ids ? tok.TokenToId("<think>") : std::nullopt,
                                   with_ids ? tok.TokenToId("</think>") : std::nullopt, stops,
                                   on_text, s.result);
  for (int32_t id : ids) {
    EXPECT_TRUE(splitter.Push(id));
    if (splitter.stopped()) break;
  }
  splitter.Finish();
  s.stopped = splitter.stopped();
  return s;
}

TEST(ReplySplitter, ThinkBlockGoesToReasoning) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  ASSERT_TRUE(tok->TokenToId("<think>").has_value());
  Split s = RunSplitter(
      *tok, "<think>\nThe user greets me.\n</think>\n\nHello! How are you?<|im_end|>", {});
  EXPECT_EQ(s.result.reasoning, "\nThe user greets me.\n");
  EXPECT_EQ(s.result.content, "Hello! How are you?");
  EXPECT_EQ(s.streamed_reasoning, s.result.reasoning);
  EXPECT_EQ(s.streamed_content, s.result.content);
  EXPECT_FALSE(s.stopped);
}

TEST(ReplySplitter, EmptyThinkBlockAndNoThinkBlock) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  Split empty = RunSplitter(*tok, "<think>\n\n</think>\n\nder<|im_end|>", {});
  EXPECT_EQ(empty.result.content, "der");
  EXPECT_EQ(empty.result.reasoning, "\n\n");
  Split none = RunSplitter(*tok, "Plain answer.\n\nSecond line.", {});
  EXPECT_EQ(none.result.content, "Plain answer.\n\nSecond line.");
  EXPECT_EQ(none.result.reasoning, "");
}

TEST(ReplySplitter, StopStringEndsTheContentWhereverTokensSplitIt) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  Split s = RunSplitter(*tok, "<think>x END y</think>\n\nalpha beta END gamma", {"END", "zzz"});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.result.content, "alpha beta ");
  EXPECT_EQ(s.streamed_content, "alpha beta ");
  EXPECT_EQ(s.result.reasoning, "x END y") << "stop strings apply to the reply, not reasoning";
  // A stop string that never completes is emitted in the end.
  Split partial = RunSplitter(*tok, "ends with EN", {"END"});
  EXPECT_FALSE(partial.stopped);
  EXPECT_EQ(partial.result.content, "ends with EN");
  // One that spans several tokens.
  Split multi = RunSplitter(*tok, "one two three four", {" three f"});
  EXPECT_TRUE(multi.stopped);
  EXPECT_EQ(multi.result.content, "one two");
}

// Byte-level tokenizers (finetune-demo's) have no <think> ids: the markers are text, and the
// block is split out by them all the same, however the pieces fall (issue 38).
TEST(ReplySplitter, ThinkBlockSplitByTextMarkersWithoutIds) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  Split empty = RunSplitter(*tok, "<think>\n\n</think>\n\nder", {}, /*with_ids=*/false);
  EXPECT_EQ(empty.result.content, "der");
  EXPECT_EQ(empty.result.reasoning, "\n\n");
  Split full = RunSplitter(*tok, "<think>\nThe user greets me.\n</think>\n\nHello!", {"zzz"},
                           /*with_ids=*/false);
  EXPECT_EQ(full.result.reasoning, "\nThe user greets me.\n");
  EXPECT_EQ(full.result.content, "Hello!");
  EXPECT_EQ(full.streamed_reasoning, full.result.reasoning);
  EXPECT_EQ(full.streamed_content, full.result.content);
  // No block, a "<think>" later in the reply, a reply that is only a prefix of the marker, and
  // an unfinished block: content stays content, reasoning stays reasoning.
  EXPECT_EQ(RunSplitter(*tok, "Plain <think> text", {}, false).result.content,
            "Plain <think> text");
  EXPECT_EQ(RunSplitter(*tok, "\n<thi", {}, false).result.content, "\n<thi");
  Split open = RunSplitter(*tok, "<think>still thinking </thi", {}, false);
  EXPECT_EQ(open.result.reasoning, "still thinking </thi");
  EXPECT_EQ(open.result.content, "");
  // Byte by byte: one token per byte, as a byte-level tokenizer generates.
  generate::TextResult bytes;
  const std::vector<std::string> stops;
  const generate::TextCallback none;
  generate::ReplySplitter splitter(*tok, std::nullopt, std::nullopt, stops, none, bytes);
  for (char c : std::string("<think>\nhm\n</think>\n\nyes")) {
    auto id = tok->Encode(std::string(1, c));
    ASSERT_EQ(id.size(), 1u);
    EXPECT_TRUE(splitter.Push(id[0]));
  }
  splitter.Finish();
  EXPECT_EQ(bytes.reasoning, "\nhm\n");
  EXPECT_EQ(bytes.content, "yes");
}

// A raw completion is not split: the markers stay in the content.
TEST(ReplySplitter, NoSplitKeepsTheMarkersInTheContent) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  generate::TextResult result;
  const std::vector<std::string> stops;
  const generate::TextCallback none;
  generate::ReplySplitter splitter(*tok, tok->TokenToId("<think>"), tok->TokenToId("</think>"),
                                   stops, none, result, /*split_reasoning=*/false);
  EncodeOptions eo;
  eo.allow_special = true;
  for (int32_t id : tok->Encode("<think>x</think>y", eo)) EXPECT_TRUE(splitter.Push(id));
  splitter.Finish();
  EXPECT_EQ(result.content, "<think>x</think>y");
  EXPECT_EQ(result.reasoning, "");
}

TEST(ReplySplitter, IdsPastTheVocabularyDecodeAsNothing) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  generate::TextResult result;
  const std::vector<std::string> stops;
  const generate::TextCallback none;
  generate::ReplySplitter splitter(*tok, std::nullopt, std::nullopt, stops, none, result);
  const std::vector<int32_t> hello = tok->Encode("Hello");
  for (int32_t id : hello) EXPECT_TRUE(splitter.Push(id));
  EXPECT_TRUE(splitter.Push(tok->vocab_size() + 100));  // an embedding row past the tokenizer
  splitter.Finish();
  EXPECT_EQ(result.content, "Hello");
  EXPECT_TRUE(result.error.ok());
}

}  // namespace
}  // namespace tlaloc
