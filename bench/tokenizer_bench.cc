// Encoding throughput of the Qwen3 byte-level BPE tokenizer (single thread) on generated English
// prose and C++/Python code, with the pre-token cache on (the normal case) and off (every
// pre-token runs BPE).
//
// The tokenizer.json is $TLALOC_QWEN3_TOKENIZER, or the one this source tree carries in
// data/qwen3/.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tlaloc/tokenizer/tokenizer.h"

namespace {

std::string TokenizerPath() {
  if (const char* env = std::getenv("TLALOC_QWEN3_TOKENIZER")) return env;
  return (std::filesystem::path(__FILE__).parent_path().parent_path() / "data/qwen3/tokenizer.json")
      .string();
}

tlaloc::Tokenizer* Qwen(std::string* error) {
  static std::string load_error;
  static tlaloc::Tokenizer* tok = []() -> tlaloc::Tokenizer* {
    auto t = tlaloc::Tokenizer::FromFile(TokenizerPath());
    if (!t.ok()) {
      load_error = t.status().ToString();
      return nullptr;
    }
    return new tlaloc::Tokenizer(std::move(*t));
  }();
  *error = load_error;
  return tok;
}

struct Rng {
  uint64_t state;
  size_t Below(size_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>((state >> 33) % n);
  }
};

// About 1 MiB of sentences assembled from a few hundred common words.
std::string EnglishProse() {
  static const char* const words[] = {"the",
                                      "of",
                                      "and",
                                      "to",
                                      "in",
                                      "is",
                                      "that",
                                      "for",
                                      "it",
                                      "as",
                                      "was",
                                      "with",
                                      "be",
                                      "by",
                                      "on",
                                      "not",
                                      "he",
                                      "this",
                                      "are",
                                      "or",
                                      "his",
                                      "from",
                                      "at",
                                      "which",
                                      "but",
                                      "have",
                                      "an",
                                      "had",
                                      "they",
                                      "you",
                                      "were",
                                      "their",
                                      "one",
                                      "all",
                                      "we",
                                      "can",
                                      "her",
                                      "has",
                                      "there",
                                      "been",
                                      "if",
                                      "more",
                                      "when",
                                      "will",
                                      "would",
                                      "who",
                                      "so",
                                      "no",
                                      "time",
                                      "people",
                                      "year",
                                      "way",
                                      "day",
                                      "man",
                                      "thing",
                                      "woman",
                                      "life",
                                      "child",
                                      "world",
                                      "school",
                                      "state",
                                      "family",
                                      "student",
                                      "group",
                                      "country",
                                      "problem",
                                      "hand",
                                      "part",
                                      "place",
                                      "case",
                                      "week",
                                      "company",
                                      "system",
                                      "program",
                                      "question",
                                      "work",
                                      "government",
                                      "number",
                                      "night",
                                      "point",
                                      "home",
                                      "water",
                                      "room",
                                      "mother",
                                      "area",
                                      "money",
                                      "story",
                                      "fact",
                                      "month",
                                      "lot",
                                      "right",
                                      "study",
                                      "book",
                                      "eye",
                                      "job",
                                      "word",
                                      "business",
                                      "issue",
                                      "side",
                                      "kind",
                                      "head",
                                      "house",
                                      "service",
                                      "friend",
                                      "father",
                                      "power",
                                      "hour",
                                      "game",
                                      "line",
                                      "end",
                                      "member",
                                      "law",
                                      "car",
                                      "city",
                                      "community",
                                      "name",
                                      "president",
                                      "team",
                                      "minute",
                                      "idea",
                                      "kid",
                                      "body",
                                      "information",
                                      "back",
                                      "parent",
                                      "face",
                                      "others",
                                      "level",
                                      "office",
                                      "door",
                                      "health",
                                      "person",
                                      "art",
                                      "war",
                                      "history",
                                      "party",
                                      "result",
                                      "change",
                                      "morning",
                                      "reason",
                                      "research",
                                      "girl",
                                      "guy",
                                      "moment",
                                      "air",
                                      "teacher",
                                      "force",
                                      "education",
                                      "remarkable",
                                      "considerably",
                                      "nevertheless",
                                      "understanding",
                                      "extraordinary",
                                      "tokenization",
                                      "interpretation",
                                      "development"};
  const size_t n = sizeof(words) / sizeof(words[0]);
  Rng rng{42};
  std::string text;
  while (text.size() < (1u << 20)) {
    const size_t len = 6 + rng.Below(18);
    for (size_t i = 0; i < len; ++i) {
      std::string w = words[rng.Below(n)];
      if (i == 0) w[0] = static_cast<char>(w[0] - 'a' + 'A');
      text += w;
      if (i + 1 < len) text += rng.Below(9) == 0 ? ", " : " ";
    }
    text += rng.Below(12) == 0 ? "?" : ".";
    text += rng.Below(6) == 0 ? "\n\n" : " ";
  }
  return text;
}

// About 1 MiB of C++ and Python functions with varied identifiers and literals.
std::string SourceCode() {
  static const char* const names[] = {"value",  "count",  "index",  "buffer", "result", "tensor",
                                      "shape",  "offset", "stride", "token",  "cache",  "node",
                                      "weight", "input",  "output", "scale",  "bias",   "state"};
  const size_t n = sizeof(names) / sizeof(names[0]);
  Rng rng{7};
  std::string text;
  for (int f = 0; text.size() < (1u << 20); ++f) {
    const std::string a = names[rng.Below(n)], b = names[rng.Below(n)], c = names[rng.Below(n)];
    const std::string k = std::to_string(rng.Below(100000));
    if (f % 2 == 0) {
      text += "// Computes the " + a + " of each " + b + ".\n";
      text += "std::vector<float> Compute" + std::to_string(f) + "(const std::vector<float>& " + a +
              ", int64_t " + b + ") {\n";
      text += "  std::vector<float> " + c + "(" + a + ".size());\n";
      text += "  for (size_t i = 0; i < " + a + ".size(); ++i) {\n";
      text += "    " + c + "[i] = " + a + "[i] * static_cast<float>(" + b + ") + " + k + ".5f;\n";
      text += "    if (" + c + "[i] > 1e-3f && i % 4 == 0) { continue; }\n  }\n";
      text += "  return " + c + ";  // " + std::to_string(f) + "\n}\n\n";
    } else {
      text += "def compute_" + std::to_string(f) + "(" + a + ", " + b + "=None):\n";
      text += "    \"\"\"Return the " + c + " for " + a + ".\"\"\"\n";
      text += "    " + c + " = [x * " + k + " for x in " + a + " if x is not None]\n";
      text += "    if " + b + " is None:\n        " + b + " = {\"" + a + "\": len(" + c + ")}\n";
      text += "    return " + c + ", " + b + "\n\n";
    }
  }
  return text;
}

void Encode(benchmark::State& state, const std::string& text, bool cache) {
  std::string error;
  tlaloc::Tokenizer* tok = Qwen(&error);
  if (tok == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  tok->SetCacheCapacity(cache ? 65536 : 0);
  size_t tokens = 0;
  for (auto _ : state) {
    std::vector<int32_t> ids = tok->Encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes_per_token"] =
      static_cast<double>(text.size()) / static_cast<double>(tokens);
}

void BM_EncodeEnglish(benchmark::State& state) {
  static const std::string text = EnglishProse();
  Encode(state, text, state.range(0) != 0);
}
void BM_EncodeCode(benchmark::State& state) {
  static const std::string text = SourceCode();
  Encode(state, text, state.range(0) != 0);
}

BENCHMARK(BM_EncodeEnglish)->ArgName("cache")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeCode)->ArgName("cache")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
