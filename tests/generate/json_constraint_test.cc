// Structured output: the JSON automaton accepts and refuses texts as the grammar says, schemas
// outside the subset are refused by keyword, every token sequence the masks allow (random walks
// over a small vocabulary and over Qwen3's) is a value of the grammar that ends within its
// budget, and in the engine a constrained row's draws parse while a plain row beside it keeps its
// tokens.
#include "tlaloc/generate/json_constraint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>

#include "generate/engine_fixture.h"
#include "models/qwen3_reference.h"
#include "tlaloc/generate/engine.h"
#include "tlaloc/tokenizer/tokenizer.h"

namespace tlaloc {
namespace {

using generate::JsonConstraint;
using generate::JsonGrammar;
using generate::JsonMatcher;
using generate::TokenTrie;
using nlohmann::json;

std::shared_ptr<const JsonGrammar> Schema(const char* text) {
  auto g = JsonGrammar::FromSchema(json::parse(text));
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

TEST(JsonGrammar, AnyObjectAcceptsObjectsOnly) {
  JsonMatcher m(JsonGrammar::AnyObject());
  for (const char* ok :
       {"{}", R"({"a":1})", R"({"a": [1, 2.5e-3, "x\n\u00e9", {"b":null}], "c":true})",
        R"({"":-0.5})", "{\"k\":\"\xc3\xa9\"}"})
    EXPECT_TRUE(m.Matches(ok)) << ok;
  for (const char* bad :
       {"", "[]", "1", R"("a")", "{", R"({"a":})", R"({"a":1,})", R"({"a" :1})", R"({ "a":1})",
        R"({"a":  1})", R"({"a":01})", R"({"a":1.})", "{}\n", R"({"a":"\x"})", "{\"a\":\"\x01\"}",
        "{\"a\":\"\xc3\"}", R"({"a":"\ud800"})", R"({"a":tru})", R"({"a":1e123})"})
    EXPECT_FALSE(m.Matches(bad)) << bad;
}

TEST(JsonGrammar, SchemaPropertiesRequiredAndTypes) {
  auto g = Schema(R"({"type":"object","properties":{
      "name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"enum":["x","yz"]}},
      "ok":{"type":"boolean"},"score":{"type":["number","null"]}},
      "required":["name","age"],"additionalProperties":false})");
  ASSERT_TRUE(g);
  JsonMatcher m(g);
  for (const char* ok : {R"({"name":"a","age":3})", R"({"age":-3, "name":""})",
                         R"({"name":"a","age":0,"tags":["x","yz"],"ok":false,"score":null})",
                         R"({"name":"a","age":0,"score":1.5})"})
    EXPECT_TRUE(m.Matches(ok)) << ok;
  for (const char* bad :
       {R"({"name":"a"})", R"({"name":"a","age":1.5})", R"({"name":"a","age":1,"other":1})",
        R"({"name":"a","age":1,"age":2})", R"({"name":1,"age":1})",
        R"({"name":"a","age":1,"tags":["y"]})", R"({"name":"a","age":1,"ok":null})",
        R"({"name":"a","age":1,"score":"1"})"})
    EXPECT_FALSE(m.Matches(bad)) << bad;
}

TEST(JsonGrammar, ConstAnyOfRefsAndAdditionalSchemas) {
  auto g = Schema(R"({"$defs":{"P":{"type":"object","properties":{"x":{"type":"integer"}},
      "required":["x"],"additionalProperties":false}},
      "anyOf":[{"$ref":"#/$defs/P"},{"type":"array","items":{"$ref":"#/$defs/P"}},{"const":{"k":[1,2]}}]})");
  ASSERT_TRUE(g);
  JsonMatcher m(g);
  for (const char* ok : {R"({"x":1})", R"([{"x":1}, {"x":2}])", "[]", R"({"k":[1,2]})"})
    EXPECT_TRUE(m.Matches(ok)) << ok;
  for (const char* bad : {R"({"x":1,"k":[1,2]})", R"({"k":[1]})", R"([1])", R"({})"})
    EXPECT_FALSE(m.Matches(bad)) << bad;
  JsonMatcher extra(
      Schema(R"({"properties":{"a":{"type":"null"}},"additionalProperties":{"type":"integer"}})"));
  EXPECT_TRUE(extra.Matches(R"({"ab":1,"a":null,"b":2})"));
  EXPECT_FALSE(extra.Matches(R"({"ab":"s"})"));
  EXPECT_FALSE(extra.Matches(R"({"a":1})"));
  EXPECT_FALSE(extra.Matches(R"({"a\u0062":1})"));  // other keys take no escapes
}

// BytesToClose is the length of the shortest completion: inside a key of an object whose other
// keys are allowed it counts closing that key now (the json_schema_fuzz regression: one byte too
// many there, so no byte after a comma brought the close nearer).
TEST(JsonGrammar, BytesToCloseCountsTheShortestCompletionInsideKeys) {
  JsonMatcher m(Schema(R"({"properties":{"next":{"type":"object"}}})"));
  auto close_after = [&](const std::string& text) {
    generate::JsonState s = m.Start(), next;
    for (char c : text) {
      m.Advance(s, static_cast<uint8_t>(c), next);
      EXPECT_FALSE(next.dead()) << text;
      std::swap(s, next);
    }
    return m.BytesToClose(s);
  };
  EXPECT_EQ(close_after(R"({"a":1,)"), 5);           // "":0}
  EXPECT_EQ(close_after(R"({"a":1,")"), 4);          // ":0}
  EXPECT_EQ(close_after(R"({"a":1,"ne)"), 4);        // a prefix of "next" closes as another key
  EXPECT_EQ(close_after(R"({"a":1,"next)"), 5);      // ":{}} as "next", or x":0} as another
  EXPECT_EQ(close_after(R"({"a":1,"nz)"), 4);        // a free key
  EXPECT_EQ(close_after(R"({"next":{},"next)"), 5);  // "next" is taken: one byte more
}

TEST(JsonGrammar, UnsupportedKeywordsAreRefusedByName) {
  for (auto [schema, word] : std::vector<std::pair<const char*, const char*>>{
           {R"({"type":"string","pattern":"a+"})", "'pattern'"},
           {R"({"properties":{"a":{"oneOf":[{"type":"string"}]}}})", "'oneOf'"},
           {R"({"type":"object","required":["b"]})", "'b'"},
           {R"({"$ref":"http://x"})", "$ref"},
           {R"({"type":"date"})", "'date'"},
           {R"({"enum":[]})", "enum"},
           {"false", "false"}}) {
    auto g = JsonGrammar::FromSchema(json::parse(schema));
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_NE(g.status().message().find(word), std::string::npos) << g.status().message();
  }
  auto fmt = generate::GrammarOfResponseFormat(json::parse(R"({"type":"xml"})"));
  ASSERT_FALSE(fmt.ok());
  EXPECT_NE(fmt.status().message().find("xml"), std::string::npos);
  auto text = generate::GrammarOfResponseFormat(json::parse(R"({"type":"text"})"));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, nullptr);
}

// A random walk: draws uniformly among the allowed ids until an end token; returns the text.
std::string Walk(JsonConstraint& c, const TokenTrie& trie, std::mt19937& rng, int64_t vocab,
                 int64_t limit, bool* ended, double* seconds = nullptr) {
  std::vector<uint8_t> mask(vocab);
  std::string text;
  *ended = false;
  for (int64_t step = 0; step < limit; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    c.AllowedMask(mask);
    if (seconds)
      *seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<int32_t> allowed;
    for (int64_t i = 0; i < vocab; ++i)
      if (mask[i]) allowed.push_back(static_cast<int32_t>(i));
    EXPECT_FALSE(allowed.empty()) << "no token allowed after: " << text;
    if (allowed.empty()) return text;
    const int32_t id = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    Status s = c.Accept(id);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (id == trie.eos_ids()[0]) {
      *ended = true;
      return text;
    }
    text += trie.bytes(id);
  }
  return text;
}

// Multi-byte tokens first, then every printable ASCII byte not among them (a byte-level vocabulary
// can spell any text; the masks' guarantee that a value can always be finished relies on it).
std::vector<std::string> SmallVocab() {
  std::vector<std::string> v = {
      "",     "{",    "}",     "\"",    "{\"",  "\":", ":",  ",",    ", ",   " ",
      "a",    "ab",   "\"a\"", "1",     "12",   "-",   ".",  "e",    "E+",   "0",
      "true", "fa",   "lse",   "null",  "[",    "]",   "[]", "\\",   "n",    "u",
      "00e9", "\xc3", "\xa9",  "x\"}",  "\"}",  "]}",  "{}", "name", "age",  "\",\"",
      "\\\"", "yz",   "x",     "\":\"", "\":1", "}}",  "\n", "\x01", "tags", "score"};
  for (char c = 0x20; c < 0x7f; ++c)
    if (std::find(v.begin(), v.end(), std::string(1, c)) == v.end()) v.push_back(std::string(1, c));
  return v;
}

TEST(JsonConstraint, EveryAllowedSequenceOnASmallVocabularyParsesWithinItsBudget) {
  const std::vector<std::string> vocab = SmallVocab();  // id 0 (empty) is the end token
  auto trie = std::make_shared<const TokenTrie>(vocab, std::vector<int32_t>{0});
  const std::vector<std::shared_ptr<const JsonGrammar>> grammars = {
      JsonGrammar::AnyObject(),
      Schema(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
          "tags":{"type":"array","items":{"enum":["x","yz"]}},"score":{"type":["number","null"]}},
          "required":["name","age"],"additionalProperties":false})"),
      Schema(R"({"anyOf":[{"type":"array","items":{"type":"boolean"}},{"type":"string"}]})")};
  std::mt19937 rng(7);
  for (size_t g = 0; g < grammars.size(); ++g) {
    ASSERT_TRUE(grammars[g]);
    JsonMatcher matcher(grammars[g]);
    // 20: the shortest value of grammar 1 ({"name":"","age":0}) and its end token, exactly.
    for (int64_t budget : {0, 20, 40}) {
      for (int trial = 0; trial < 60; ++trial) {
        JsonConstraint c(grammars[g], trie, budget);
        bool ended = false;
        const std::string text = Walk(c, *trie, rng, vocab.size(), budget ? budget : 400, &ended);
        if (budget > 0) {
          EXPECT_TRUE(ended) << "grammar " << g << " budget " << budget << ": " << text;
        }
        if (!ended) continue;
        EXPECT_TRUE(matcher.Matches(text)) << text;
        EXPECT_FALSE(json::parse(text, nullptr, false).is_discarded()) << text;
        if (g == 0) {
          EXPECT_TRUE(json::parse(text).is_object()) << text;
        }
        if (g == 1) {
          const json v = json::parse(text);
          EXPECT_TRUE(v.contains("name") && v["name"].is_string()) << text;
          EXPECT_TRUE(v.contains("age") && v["age"].is_number_integer()) << text;
        }
      }
    }
  }
}

TEST(JsonConstraint, MaskMatchesTheAutomatonTokenByToken) {
  const std::vector<std::string> vocab = SmallVocab();
  auto trie = std::make_shared<const TokenTrie>(vocab, std::vector<int32_t>{0});
  auto g = JsonGrammar::AnyObject();
  JsonConstraint c(g, trie);
  JsonMatcher m(g);
  ASSERT_TRUE(c.Accept(4).ok());   // {"
  ASSERT_TRUE(c.Accept(10).ok());  // a
  std::vector<uint8_t> mask(vocab.size());
  c.AllowedMask(mask);
  const std::string prefix = "{\"a";
  for (size_t id = 1; id < vocab.size(); ++id) {
    // Allowed exactly when some continuation of prefix + token completes a value: the automaton
    // stays alive (its states all have a completion).
    generate::JsonState s = m.Start(), next;
    bool alive = true;
    for (char ch : prefix + vocab[id]) {
      m.Advance(s, static_cast<uint8_t>(ch), next);
      alive = !next.dead();
      if (!alive) break;
      std::swap(s, next);
    }
    EXPECT_EQ(mask[id] != 0, alive) << "token " << id << " '" << vocab[id] << "'";
  }
  EXPECT_EQ(mask[0], 0);            // not complete: no end token
  EXPECT_FALSE(c.Accept(47).ok());  // a raw control character inside a key is refused
}

// Qwen3's vocabulary (151,669 byte strings): random walks parse, and the per-step mask cost.
TEST(JsonConstraint, Qwen3VocabularyWalksParseAndMaskCost) {
  const auto path = std::filesystem::path(TLALOC_SOURCE_DIR) / "data/qwen3/tokenizer.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing (scripts/setup.sh)";
  auto tok = Tokenizer::FromFile(path.string());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const auto t0 = std::chrono::steady_clock::now();
  const int32_t eos = *tok->TokenToId("<|im_end|>");
  auto trie = TokenTrie::FromTokenizer(*tok, {eos});
  const double build = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto schema = Schema(R"({"type":"object","properties":{"city":{"type":"string"},
      "days":{"type":"array","items":{"type":"object","properties":{"t":{"type":"number"},
      "sky":{"enum":["sun","rain"]}},"required":["t","sky"],"additionalProperties":false}}},
      "required":["city","days"],"additionalProperties":false})");
  std::mt19937 rng(3);
  double seconds = 0;
  int64_t steps = 0, computed = 0;
  for (auto g : {JsonGrammar::AnyObject(), schema}) {
    JsonMatcher matcher(g);
    for (int trial = 0; trial < 3; ++trial) {
      JsonConstraint c(g, trie, 48);
      bool ended = false;
      const std::string text = Walk(c, *trie, rng, 151936, 48, &ended, &seconds);
      EXPECT_TRUE(ended) << text;
      EXPECT_TRUE(matcher.Matches(text)) << text;
      EXPECT_FALSE(json::parse(text, nullptr, false).is_discarded()) << text;
      steps += c.accepted();
      computed += c.masks_computed();
    }
  }
  // The costliest state: inside a string almost every token is allowed, so the walk visits
  // nearly the whole trie; the second ask of the same state comes from the cache.
  JsonConstraint in_string(JsonGrammar::AnyObject(), trie);
  for (const char* piece : {"{\"", "a", "\":\""}) {
    const std::vector<int32_t> ids = tok->Encode(piece);
    for (int32_t id : ids) ASSERT_TRUE(in_string.Accept(id).ok()) << piece;
  }
  std::vector<uint8_t> mask(151936);
  double walk_ms[2];
  for (double& ms : walk_ms) {
    const auto w0 = std::chrono::steady_clock::now();
    in_string.AllowedMask(mask);
    ms = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count() * 1e3;
  }
  int64_t allowed = 0;
  for (uint8_t a : mask) allowed += a;
  EXPECT_GT(allowed, 100000);  // most of the vocabulary may come inside a string
  EXPECT_EQ(in_string.masks_cached(), 1);
  std::printf(
      "Qwen3 vocabulary, inside a string: %lld ids allowed, mask walked in %.1f ms, "
      "cached %.2f ms\n",
      static_cast<long long>(allowed), walk_ms[0], walk_ms[1]);
  std::printf(
      "Qwen3 vocabulary: trie built in %.0f ms (%zu nodes); %lld steps, %.2f ms per step "
      "on average, %lld masks walked, the rest from the state cache\n",
      build * 1e3, trie->nodes().size(), static_cast<long long>(steps),
      seconds * 1e3 / static_cast<double>(steps), static_cast<long long>(computed));
}

// In the engine: a constrained row (temperature 1, ids 1..95 = ASCII 0x20..0x7e, 0 = end) ends
// within its budget with a value of the grammar, and a plain greedy row batched with it draws
// what it draws alone.
TEST(JsonConstraint, EngineRowParsesAndLeavesOtherRowsAlone) {
  testing::RefModel m = testing::RandomModel(testing::TinyConfig(false, 4, 2, 8), 11);
  std::vector<std::string> vocab(96);
  for (int i = 1; i < 96; ++i) vocab[i] = std::string(1, static_cast<char>(0x20 + i - 1));
  auto trie = std::make_shared<const TokenTrie>(vocab, std::vector<int32_t>{0});
  auto grammar = Schema(R"({"type":"object","properties":{"a":{"type":"string"},
      "b":{"type":"array","items":{"type":"integer"}}},"required":["a","b"]})");
  constexpr int kSteps = 40;
  auto run = [&](bool with_constrained, std::string* text, bool* ended) {
    auto engine = testing::MakeTestEngine(m, 2, 64);
    std::vector<int32_t> plain, json_ids;
    generate::RowSampling free_row{{}, 0};
    nn::SamplingParams p;
    p.temperature = 1.0;
    p.constraint = std::make_shared<JsonConstraint>(grammar, trie, kSteps);
    generate::RowSampling json_row{p, 9};
    std::vector<generate::PrefillRow> prefill = {{0, {5, 6, 7}, free_row}};
    if (with_constrained) prefill.push_back({1, {8, 9}, json_row});
    auto first = engine->Prefill(prefill);
    EXPECT_TRUE(first.ok()) << first.status().ToString();
    plain.push_back(first->tokens[0]);
    if (with_constrained) json_ids.push_back(first->tokens[1]);
    for (int i = 1; i < kSteps; ++i) {
      std::vector<generate::DecodeRow> rows = {{0, plain.back(),
                                                static_cast<int32_t>(3 + plain.size() - 1),
                                                free_row, static_cast<uint32_t>(i)}};
      const bool json_live = with_constrained && json_ids.back() != 0;
      if (json_live)
        rows.push_back({1, json_ids.back(), static_cast<int32_t>(2 + json_ids.size() - 1), json_row,
                        static_cast<uint32_t>(i)});
      auto step = engine->Decode(rows);
      EXPECT_TRUE(step.ok()) << step.status().ToString();
      if (!step.ok()) break;
      plain.push_back(step->tokens[0]);
      if (json_live) json_ids.push_back(step->tokens[1]);
    }
    *ended = !json_ids.empty() && json_ids.back() == 0;
    for (int32_t id : json_ids)
      if (id != 0) *text += vocab.at(id);
    return plain;
  };
  std::string text, unused;
  bool ended = false, unused_ended = false;
  const std::vector<int32_t> batched = run(true, &text, &ended);
  const std::vector<int32_t> alone = run(false, &unused, &unused_ended);
  EXPECT_EQ(batched, alone);
  EXPECT_TRUE(ended) << text;
  EXPECT_TRUE(JsonMatcher(grammar).Matches(text)) << text;
  const json v = json::parse(text, nullptr, false);
  ASSERT_TRUE(v.is_object()) << text;
  EXPECT_TRUE(v["a"].is_string() && v["b"].is_array()) << text;
}

}  // namespace
}  // namespace tlaloc
