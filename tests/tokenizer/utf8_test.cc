#include "tlaloc/tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace tlaloc::utf8 {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8Test, ValidityFollowsUnicodeTable37) {
  EXPECT_TRUE(IsValid("plain ascii"));
  EXPECT_TRUE(IsValid("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF"));
  EXPECT_TRUE(IsValid(std::string("a\0b", 3)));
  EXPECT_FALSE(IsValid("\xC0\xAF"));          // overlong
  EXPECT_FALSE(IsValid("\xE0\x80\xAF"));      // overlong
  EXPECT_FALSE(IsValid("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValid("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValid("\xE2\x82"));          // truncated
  EXPECT_FALSE(IsValid("\x80"));              // lone continuation
}

TEST(Utf8Test, RepairReplacesMaximalSubparts) {
  EXPECT_EQ(Repair("ok"), "ok");
  EXPECT_EQ(Repair("a\xE2\x82z"), "a" + kFffd + "z");        // one subpart
  EXPECT_EQ(Repair("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // not a subpart
  EXPECT_EQ(Repair("\xF0\x9F\x98\xFF"), kFffd + kFffd);      // 3-byte subpart + FF
  EXPECT_EQ(Repair("\xC0\xAF"), kFffd + kFffd);
  EXPECT_EQ(Repair("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);
  EXPECT_EQ(Repair("\xE2\x82\xAC\x80"), "\xE2\x82\xAC" + kFffd);
  EXPECT_TRUE(IsValid(Repair("\xFE\xFF\xC3\x28\xA0\xA1")));
}

TEST(Utf8Test, NotFinalLeavesAnIncompleteTail) {
  std::string out;
  EXPECT_EQ(AppendRepaired("ab\xF0\x9F\x98", &out, /*final=*/false), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  // An invalid byte is replaced even when not final; only a valid prefix is held.
  EXPECT_EQ(AppendRepaired("a\xFF\xE2", &out, false), 2u);
  EXPECT_EQ(out, "a" + kFffd);
}

TEST(Utf8Test, NfcComposesAndKeepsNul) {
  EXPECT_EQ(Nfc("e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(Nfc("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");  // Hangul jamo -> syllable
  EXPECT_EQ(Nfc("\xE2\x84\xAB"), "\xC3\x85");                  // ANGSTROM SIGN -> Å
  EXPECT_EQ(Nfc(std::string("a\0e\xCC\x81", 5)), std::string("a\0\xC3\xA9", 4));
  EXPECT_EQ(Nfc("already nfc \xC3\xA9"), "already nfc \xC3\xA9");
}

TEST(Utf8Test, NextDecodesCodePoints) {
  std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  size_t pos = 0;
  EXPECT_EQ(Next(s, &pos), U'a');
  EXPECT_EQ(Next(s, &pos), U'\u00E9');
  EXPECT_EQ(Next(s, &pos), U'\u20AC');
  EXPECT_EQ(Next(s, &pos), U'\U0001F600');
  EXPECT_EQ(pos, s.size());
  EXPECT_TRUE(IsWhiteSpace(U'\u3000'));
  EXPECT_FALSE(IsWhiteSpace(U'\uFEFF'));
}

}  // namespace
}  // namespace tlaloc::utf8
