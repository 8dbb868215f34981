// Unit tests of the byte-level BPE tokenizer on small tokenizer.json files built in code, so the
// expected ids follow from the merges listed here.
#include "tlaloc/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test_util.h"

namespace tlaloc {
namespace {

using testing::ByteSymbol;
using testing::SmallTokenizerJson;

Tokenizer Load(const nlohmann::json& j) {
  auto t = Tokenizer::FromJson(j.dump());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(*t);
}

std::vector<int32_t> Bytes(std::string_view s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

TEST(TokenizerTest, WithoutMergesEachByteIsItsOwnToken) {
  Tokenizer t = Load(SmallTokenizerJson({}));
  EXPECT_EQ(t.vocab_size(), 256);
  EXPECT_EQ(t.Encode("hi there"), Bytes("hi there"));
  std::string all;
  for (int b = 1; b < 128; ++b) all += static_cast<char>(b);
  EXPECT_EQ(t.Encode(all), Bytes(all));
}

TEST(TokenizerTest, LowerRankMergesApplyFirst) {
  // "abc" with (b c) ranked before (a b): b+c merge, and "a"+"bc" has no merge.
  Tokenizer bc_first = Load(SmallTokenizerJson({{"b", "c"}, {"a", "b"}}));
  auto bc = bc_first.TokenToId("bc"), ab = bc_first.TokenToId("ab");
  ASSERT_TRUE(bc && ab);
  EXPECT_EQ(bc_first.Encode("abc"), (std::vector<int32_t>{'a', *bc}));
  // The same merges in the other order give the other split.
  Tokenizer ab_first = Load(SmallTokenizerJson({{"a", "b"}, {"b", "c"}}));
  EXPECT_EQ(ab_first.Encode("abc"), (std::vector<int32_t>{*ab_first.TokenToId("ab"), 'c'}));
}

TEST(TokenizerTest, EqualRanksMergeLeftmostFirstAndMergesChain) {
  Tokenizer t = Load(SmallTokenizerJson({{"a", "a"}, {"aa", "aa"}, {"aaaa", "a"}}));
  int32_t aa = *t.TokenToId("aa"), aaaa = *t.TokenToId("aaaa"), a5 = *t.TokenToId("aaaaa");
  EXPECT_EQ(t.Encode("aaa"), (std::vector<int32_t>{aa, 'a'}));
  EXPECT_EQ(t.Encode("aaaa"), (std::vector<int32_t>{aaaa}));
  EXPECT_EQ(t.Encode("aaaaa"), (std::vector<int32_t>{a5}));
  // Leftmost first: aa aa aa a -> aaaa aa a, and "aaaa" + "aa" is not a merge.
  EXPECT_EQ(t.Encode("aaaaaaa"), (std::vector<int32_t>{aaaa, aa, 'a'}));
}

TEST(TokenizerTest, MergesUseTheByteAlphabetAndPreTokensDoNotMergeAcrossSpaces) {
  const std::string g = ByteSymbol(' ');  // "Ġ"
  Tokenizer t = Load(SmallTokenizerJson({{g, "t"}, {"h", "e"}, {g + "t", "he"}}));
  int32_t the = *t.TokenToId(g + "the"), he = *t.TokenToId("he");
  EXPECT_EQ(t.Encode(" the"), (std::vector<int32_t>{the}));
  // "the" at the start has no leading space; the space before "x" belongs to "x"'s pre-token.
  EXPECT_EQ(t.Encode("the the x"), (std::vector<int32_t>{'t', he, the, ' ', 'x'}));
}

TEST(TokenizerTest, ARepeatedMergeTakesItsLaterRank) {
  // (a b) is listed at ranks 0 and 2; like the `tokenizers` library and transformers.js, the
  // later rank counts, so (b c) at rank 1 wins on "abc".
  Tokenizer t = Load(SmallTokenizerJson({{"a", "b"}, {"b", "c"}, {"a", "b"}}));
  EXPECT_EQ(t.num_merges(), 3u);
  EXPECT_EQ(t.Encode("abc"), (std::vector<int32_t>{'a', *t.TokenToId("bc")}));
}

TEST(TokenizerTest, ConcurrentEncodesAgreeWithSerialOnes) {
  Tokenizer t = Load(SmallTokenizerJson({{"t", "h"}, {"th", "e"}, {ByteSymbol(' '), "the"}}));
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i)
    texts.push_back("the " + std::to_string(i * 7919) + " then the other " +
                    std::string(i % 5, 'e'));
  std::vector<std::vector<int32_t>> serial;
  t.SetCacheCapacity(0);
  for (const auto& s : texts) serial.push_back(t.Encode(s));
  t.SetCacheCapacity(16);  // small, so threads also race on clearing it
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 50; ++rep) {
        for (size_t i = (k + rep) % texts.size(), n = 0; n < texts.size();
             ++n, i = (i + 1) % texts.size()) {
          if (t.Encode(texts[i]) != serial[i]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(TokenizerTest, MergesAsPairsAndAsStringsAreEquivalent) {
  nlohmann::json j = SmallTokenizerJson({{"a", "b"}, {"ab", "c"}});
  nlohmann::json pairs = j;
  pairs["model"]["merges"] = nlohmann::json::array(
      {nlohmann::json::array({"a", "b"}), nlohmann::json::array({"ab", "c"})});
  Tokenizer a = Load(j), b = Load(pairs);
  EXPECT_EQ(a.num_merges(), 2u);
  EXPECT_EQ(a.Encode("abcab"), b.Encode("abcab"));
  EXPECT_EQ(a.Encode("abc").size(), 1u);
}

nlohmann::json Added(int id, const std::string& content, bool special, bool lstrip = false,
                     bool rstrip = false) {
  return {{"id", id},         {"content", content},  {"special", special},  {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", false}, {"single_word", false}};
}

TEST(TokenizerTest, AddedTokensSplitFirstWithLongestMatch) {
  nlohmann::json added = nlohmann::json::array(
      {Added(300, "<|a|>", true), Added(301, "<|a|>>", true), Added(302, "<x>", false)});
  Tokenizer t = Load(SmallTokenizerJson({}, added));
  EXPECT_EQ(t.vocab_size(), 303);
  EXPECT_EQ(t.Encode("q<|a|>r"), (std::vector<int32_t>{'q', 300, 'r'}));
  EXPECT_EQ(t.Encode("<|a|>>"), (std::vector<int32_t>{301}));
  EXPECT_EQ(t.Encode("<x><|a|><x>"), (std::vector<int32_t>{302, 300, 302}));
  EXPECT_EQ(t.Encode("<|a|"), Bytes("<|a|"));
  EXPECT_TRUE(t.IsSpecial(300));
  EXPECT_FALSE(t.IsSpecial(302));
  // With special tokens disallowed, <|a|> is text but the non-special <x> still matches.
  EncodeOptions plain;
  plain.allow_special = false;
  std::vector<int32_t> expect = Bytes("<|a|>");
  expect.push_back(302);
  EXPECT_EQ(t.Encode("<|a|><x>", plain), expect);
  // Decoding gives the content back; skip_special_tokens drops only special ones.
  std::vector<int32_t> ids = {'q', 300, 302};
  EXPECT_EQ(*t.Decode(ids), "q<|a|><x>");
  DecodeOptions skip;
  skip.skip_special_tokens = true;
  EXPECT_EQ(*t.Decode(ids, skip), "q<x>");
}

TEST(TokenizerTest, AddedTokenStripAbsorbsNeighbouringWhitespace) {
  nlohmann::json added = nlohmann::json::array(
      {Added(300, "<L>", true, /*lstrip=*/true), Added(301, "<R>", true, false, /*rstrip=*/true)});
  Tokenizer t = Load(SmallTokenizerJson({}, added));
  EXPECT_EQ(t.Encode("a \t<L> b"), (std::vector<int32_t>{'a', 300, ' ', 'b'}));
  EXPECT_EQ(t.Encode("a <R> \n b"), (std::vector<int32_t>{'a', ' ', 301, 'b'}));
}

TEST(TokenizerTest, DecodeInvertsEncodeOnBytes) {
  Tokenizer t = Load(SmallTokenizerJson({{"h", "e"}, {"l", "l"}, {"he", "ll"}}));
  for (std::string s : {"hello world", "héllo\tworld\r\n", "日本語 テキスト", "🙂👍🏽", ""}) {
    auto ids = t.Encode(s);
    auto back = t.Decode(ids);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, s);
  }
}

TEST(TokenizerTest, InvalidUtf8BecomesReplacementCharacters) {
  Tokenizer t = Load(SmallTokenizerJson({}));
  // Each maximal invalid subpart is one U+FFFD: E4 B8 (truncated) is one, ED A0 80 (a
  // surrogate) is three, FF is one.
  EXPECT_EQ(t.Encode("a\xE4\xB8z"), Bytes("a\xEF\xBF\xBDz"));
  EXPECT_EQ(t.Encode("\xED\xA0\x80"), Bytes("\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"));
  EXPECT_EQ(t.Encode("\xFF"), Bytes("\xEF\xBF\xBD"));
}

TEST(TokenizerTest, NormalizesToNfcBeforeSplitting) {
  Tokenizer t = Load(SmallTokenizerJson({}));
  // "e" + COMBINING ACUTE encodes as the precomposed U+00E9.
  EXPECT_EQ(t.Encode("e\xCC\x81"), Bytes("\xC3\xA9"));
}

TEST(TokenizerTest, UnknownIdsAreErrors) {
  Tokenizer t = Load(SmallTokenizerJson({}));
  std::vector<int32_t> ids = {'a', 999};
  auto r = t.Decode(ids);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("id 999 at position 1"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(t.IdToToken(-1).ok());
  EXPECT_EQ(*t.IdToToken('a'), "a");
  EXPECT_EQ(*t.IdToBytes(0xE0), std::string(1, '\xE0'));
}

TEST(StreamDecoderTest, HoldsASplitMultiByteCharacterUntilComplete) {
  Tokenizer t = Load(SmallTokenizerJson({}));
  // Without merges "é€😀" is one token per byte: 2 + 3 + 4 tokens.
  std::string text = "x\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80y";
  std::vector<int32_t> ids = t.Encode(text);
  ASSERT_EQ(ids.size(), text.size());
  StreamDecoder stream(t);
  std::vector<std::string> outs;
  std::vector<size_t> held;
  for (int32_t id : ids) {
    auto piece = stream.Push(id);
    ASSERT_TRUE(piece.ok());
    outs.push_back(*piece);
    held.push_back(stream.pending_bytes());
  }
  EXPECT_EQ(outs[0], "x");
  EXPECT_EQ(outs[1], "");  // first byte of é
  EXPECT_EQ(outs[2], "\xC3\xA9");
  EXPECT_EQ(outs[3], "");
  EXPECT_EQ(outs[4], "");
  EXPECT_EQ(outs[5], "\xE2\x82\xAC");
  EXPECT_EQ(outs[8], "");
  EXPECT_EQ(held[8], 3u);
  EXPECT_EQ(held[9], 0u);
  EXPECT_EQ(outs[9], "\xF0\x9F\x98\x80");
  EXPECT_EQ(outs[10], "y");
  EXPECT_EQ(stream.Finish(), "");
}

TEST(StreamDecoderTest, IncompleteTailIsReplacedAtFinishAndMatchesDecode) {
  Tokenizer t = Load(SmallTokenizerJson({}));
  std::vector<int32_t> ids = {'a', 0xE2, 0x82};  // "a" and two bytes of a 3-byte character
  StreamDecoder stream(t);
  std::string streamed;
  for (int32_t id : ids) streamed += *stream.Push(id);
  EXPECT_EQ(streamed, "a");
  streamed += stream.Finish();
  EXPECT_EQ(streamed, *t.Decode(ids));
  EXPECT_EQ(streamed, "a\xEF\xBF\xBD");
  // An invalid byte is replaced at once, not held.
  StreamDecoder s2(t);
  EXPECT_EQ(*s2.Push(0xFF), "\xEF\xBF\xBD");
  EXPECT_FALSE(s2.Push(100000).ok());
}

// ---- Rejected or malformed tokenizer.json -----------------------------------------------------

std::string LoadError(const nlohmann::json& j) {
  auto t = Tokenizer::FromJson(j.dump(), "tok.json");
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : t.status().message();
}

TEST(TokenizerJsonTest, BadFilesAreClearErrors) {
  auto bad_json = Tokenizer::FromJson("{\"model\": [1, 2", "tok.json");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_NE(bad_json.status().message().find("tok.json: not valid JSON"), std::string::npos);

  auto missing = Tokenizer::FromFile("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/tokenizer.json"), std::string::npos);

  EXPECT_NE(LoadError(nlohmann::json::object()).find("lacks 'model'"), std::string::npos);
}

TEST(TokenizerJsonTest, UnsupportedComponentsAreNamed) {
  nlohmann::json j = SmallTokenizerJson({});
  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json copy = j;
    copy[key] = std::move(value);
    return LoadError(copy);
  };
  std::string e = with("normalizer", {{"type", "Lowercase"}});
  EXPECT_NE(e.find("normalizer: normalizer type 'Lowercase' is not supported"), std::string::npos)
      << e;
  nlohmann::json nfc = {{"type", "NFC"}}, nfkd = {{"type", "NFKD"}};
  e = with("normalizer",
           {{"type", "Sequence"}, {"normalizers", nlohmann::json::array({nfc, nfkd})}});
  EXPECT_NE(e.find("normalizer.normalizers[1]"), std::string::npos) << e;
  e = with("pre_tokenizer", {{"type", "Whitespace"}});
  EXPECT_NE(e.find("pre_tokenizer: pre-tokenizer type 'Whitespace'"), std::string::npos) << e;
  nlohmann::json removed = {
      {"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Removed"}, {"invert", false}};
  e = with("pre_tokenizer",
           {{"type", "Sequence"}, {"pretokenizers", nlohmann::json::array({removed})}});
  EXPECT_NE(e.find("pre_tokenizer.pretokenizers[0]: Split behavior 'Removed'"), std::string::npos)
      << e;
  e = with("pre_tokenizer",
           {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}});
  EXPECT_NE(e.find("does not compile"), std::string::npos) << e;
  e = with("pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", true}});
  EXPECT_NE(e.find("add_prefix_space"), std::string::npos) << e;
  e = with("decoder", {{"type", "WordPiece"}});
  EXPECT_NE(e.find("decoder: type 'WordPiece'"), std::string::npos) << e;
  e = with("post_processor", {{"type", "BertProcessing"}});
  EXPECT_NE(e.find("post_processor"), std::string::npos) << e;

  nlohmann::json m = j;
  m["model"]["type"] = "WordPiece";
  EXPECT_NE(LoadError(m).find("model: type 'WordPiece'"), std::string::npos);
}

TEST(TokenizerJsonTest, BadVocabAndMergesAreNamedByPosition) {
  nlohmann::json j = SmallTokenizerJson({{"a", "b"}});
  nlohmann::json m = j;
  m["model"]["merges"].push_back("a q z");
  std::string e = LoadError(m);
  EXPECT_NE(e.find("model.merges[1]"), std::string::npos) << e;
  m = j;
  m["model"]["merges"].push_back("ab zz");
  e = LoadError(m);
  EXPECT_NE(e.find("model.merges[1]: token 'zz' is not in the vocab"), std::string::npos) << e;
  m = j;
  m["model"]["merges"].push_back(nlohmann::json::array({"b", "a"}));
  e = LoadError(m);
  EXPECT_NE(e.find("merged token 'ba'"), std::string::npos) << e;
  m = j;
  m["model"]["vocab"].erase("a");
  e = LoadError(m);
  EXPECT_NE(e.find("byte 0x61"), std::string::npos) << e;
  m = j;
  m["model"]["vocab"]["zz"] = "seven";
  e = LoadError(m);
  EXPECT_NE(e.find("model.vocab: token 'zz'"), std::string::npos) << e;
  m = j;
  m["added_tokens"] = nlohmann::json::array({nlohmann::json{{"content", "<x>"}}});
  e = LoadError(m);
  EXPECT_NE(e.find("added_tokens[0]"), std::string::npos) << e;
  m = j;
  m["model"]["vocab"] = 3;
  e = LoadError(m);
  EXPECT_NE(e.find("model.vocab"), std::string::npos) << e;
}

}  // namespace
}  // namespace tlaloc
