// (Not llama_oracle_test.cc, which runs llama.cpp as the oracle for Qwen3.)
// Llama, the second model family, against transformers' LlamaForCausalLM as the oracle: a tiny
// random checkpoint written by transformers itself (tests/generate/llama_checkpoint.py:
// save_pretrained, safetensors, GQA) is loaded by Tlaloc from transformers' own config.json and
// evaluated by transformers (hf_oracle.py, float32, eager attention): f32 logits at every
// prompt position within 1e-4, by full recomputation and by KV-cached decoding, and the same
// greedy continuation. Cases: tied head with Llama 3's "llama3" rope scaling; untied head with
// the plain rotary embedding. Then the GGUF export as llama.cpp's `llama` architecture, run by
// llama.cpp (llama-cpp-python, llama_oracle.py) on the same prompt, with the plain rotary
// embedding and with "llama3" scaling (exported as llama.cpp's rope_freqs.weight).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "generate/oracle_logits.h"
#include "testing/oracle.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/io/gguf.h"
#include "tlaloc/models/gguf_export.h"

namespace tlaloc {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = fs::path(TLALOC_SOURCE_DIR) / "tests/generate";
constexpr int kNewTokens = 24;
constexpr int64_t kVocab = 512;
constexpr double kTolerance = 1e-4;

struct LlamaCase {
  const char* name;
  bool tied;
  const char* rope;
};
void PrintTo(const LlamaCase& c, std::ostream* os) { *os << c.name; }

std::string ReadText(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Writes the checkpoint with llama_checkpoint.py; false (with a test failure) when it cannot.
bool MakeCheckpoint(const fs::path& dir, bool tied, const std::string& rope) {
  fs::remove_all(dir);
  const std::string make = testing::OraclePython() + " '" +
                           (kSource / "llama_checkpoint.py").string() + "' --out '" + dir.string() +
                           "' --vocab " + std::to_string(kVocab) + " --rope " + rope +
                           (tied ? " --tied" : "") + " > '" + dir.string() + ".log' 2>&1";
  const int rc = std::system(make.c_str());
  EXPECT_EQ(rc, 0) << make << "\n" << ReadText(dir.string() + ".log");
  return rc == 0;
}

std::vector<std::byte> ReadBytes(const fs::path& p) {
  const std::string s = ReadText(p);
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::vector<int32_t> Prompt() {
  std::mt19937 rng(11);
  std::vector<int32_t> prompt(12);
  for (auto& id : prompt) id = static_cast<int32_t>(rng() % kVocab);
  return prompt;
}

class LlamaFamilyOracle : public ::testing::TestWithParam<LlamaCase> {};

TEST_P(LlamaFamilyOracle, F32LogitsAndGreedyIdsMatchTransformers) {
  static const std::string missing = testing::PythonMissing("torch transformers numpy");
  if (!missing.empty()) TL_ORACLE_MISSING(missing);
  const LlamaCase& c = GetParam();
  const fs::path dir = fs::temp_directory_path() /
                       ("tlaloc_llama_" + std::string(c.name) + "_" + std::to_string(::getpid()));
  ASSERT_TRUE(MakeCheckpoint(dir, c.tied, c.rope));
  const std::vector<int32_t> prompt = Prompt();

  auto g = generate::Generator::Load(dir, ElementType::kF32);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const io::ModelConfig& config = (*g)->config();
  EXPECT_EQ(config.architecture.model_type, "llama");
  EXPECT_EQ(config.tie_word_embeddings, c.tied);
  EXPECT_EQ(config.head_dim, 16);  // hidden / heads: LlamaConfig has no head_dim default
  ASSERT_EQ(config.rope_scaling.has_value(), std::string(c.rope) == "llama3");
  testing::TlalocLogits ours = testing::RunTlaloc(**g, prompt);
  ASSERT_EQ(ours.full.size(), prompt.size());
  ASSERT_EQ(ours.cached.size(), prompt.size());
  generate::GenerateOptions opts;
  opts.max_new_tokens = kNewTokens;  // no end tokens: hf_oracle.py does not stop either
  auto generated = (*g)->Generate({prompt}, opts);
  ASSERT_TRUE(generated.ok()) << generated.status().ToString();
  const std::vector<int32_t> greedy = (*generated)[0].generated_ids;

  std::string tokens;
  for (int32_t id : prompt) tokens += (tokens.empty() ? "" : ",") + std::to_string(id);
  const fs::path logits_file = dir / "hf_logits.f32", out = dir / "hf.json";
  const std::string run = testing::OraclePython() + " '" + (kSource / "hf_oracle.py").string() +
                          "' --model '" + dir.string() + "' --tokens " + tokens + " --generate " +
                          std::to_string(kNewTokens) + " --logits-out '" + logits_file.string() +
                          "' --threads 2 > '" + out.string() + "' 2> '" + dir.string() + ".log'";
  ASSERT_EQ(std::system(run.c_str()), 0) << run << "\n" << ReadText(dir.string() + ".log");
  auto hf = nlohmann::json::parse(ReadText(out));
  EXPECT_EQ(hf["architecture"], "LlamaForCausalLM");
  EXPECT_EQ(hf["model"]["rope_type"], c.rope);
  EXPECT_EQ(hf["model"]["lm_head_is_embedding"].get<bool>(), c.tied);
  ASSERT_EQ(hf["n_vocab"].get<int64_t>(), kVocab);
  std::vector<float> theirs(prompt.size() * kVocab);
  std::ifstream f(logits_file, std::ios::binary);
  f.read(reinterpret_cast<char*>(theirs.data()),
         static_cast<std::streamsize>(theirs.size() * sizeof(float)));
  ASSERT_TRUE(f) << "short logits file " << logits_file;

  double worst_full = 0, worst_cached = 0, scale = 0;
  for (size_t p = 0; p < prompt.size(); ++p) {
    std::span<const float> row(theirs.data() + p * kVocab, kVocab);
    const double full = testing::MaxAbsDiff(ours.full[p], row);
    const double cached = testing::MaxAbsDiff(ours.cached[p], row);
    EXPECT_LT(full, kTolerance) << c.name << ": position " << p;
    EXPECT_LT(cached, kTolerance) << c.name << ": KV-cached position " << p;
    worst_full = std::max(worst_full, full);
    worst_cached = std::max(worst_cached, cached);
    scale = std::max(scale, testing::MaxAbs(row));
  }
  EXPECT_GT(scale, 0.5) << "logits this small would make the tolerance meaningless";
  EXPECT_EQ(greedy, hf["greedy_ids"].get<std::vector<int32_t>>()) << c.name;
  std::printf(
      "[llama] %s: max |logit - transformers| = %.3g full, %.3g KV-cached over %zu "
      "positions (logits up to %.3g); %d greedy ids\n",
      c.name, worst_full, worst_cached, prompt.size(), scale, kNewTokens);
  if (!HasFailure()) {
    fs::remove_all(dir);
    fs::remove(dir.string() + ".log");
  }
}

// llama.cpp's run of a GGUF file on `prompt` (llama_oracle.py): its logits [prompt, kVocab] and
// greedy ids; false (with a test failure) when it cannot run.
bool RunLlamaCpp(const fs::path& gguf, const std::vector<int32_t>& prompt, const fs::path& work,
                 std::vector<float>* logits, std::vector<int32_t>* greedy) {
  std::string tokens;
  for (int32_t id : prompt) tokens += (tokens.empty() ? "" : ",") + std::to_string(id);
  const fs::path logits_file = work / "llama_logits.f32", out = work / "llama.json";
  const std::string run = testing::OraclePython() + " '" + (kSource / "llama_oracle.py").string() +
                          "' --model '" + gguf.string() + "' --tokens " + tokens + " --generate " +
                          std::to_string(kNewTokens) + " --logits-out '" + logits_file.string() +
                          "' --threads 2 > '" + out.string() + "' 2> '" + work.string() + ".log'";
  const int rc = std::system(run.c_str());
  EXPECT_EQ(rc, 0) << run << "\n" << ReadText(work.string() + ".log");
  if (rc != 0) return false;
  const std::string text = ReadText(out);
  const size_t start = text.rfind("\n{");  // llama.cpp may log above the JSON line
  auto j = nlohmann::json::parse(start == std::string::npos ? text : text.substr(start + 1));
  EXPECT_EQ(j["n_vocab"].get<int64_t>(), kVocab);
  if (j["n_vocab"].get<int64_t>() != kVocab) return false;
  *greedy = j["greedy_ids"].get<std::vector<int32_t>>();
  logits->assign(prompt.size() * kVocab, 0.0f);
  std::ifstream f(logits_file, std::ios::binary);
  f.read(reinterpret_cast<char*>(logits->data()),
         static_cast<std::streamsize>(logits->size() * sizeof(float)));
  EXPECT_TRUE(f) << "short logits file " << logits_file;
  return static_cast<bool>(f);
}

// Exports `dir` (a llama_checkpoint.py folder), runs it in llama.cpp and compares with Tlaloc:
// logits within kTolerance at every prompt position, greedy ids equal.
void ExpectLlamaCppAgrees(const fs::path& dir, const char* what) {
  const fs::path gguf = dir / "model.gguf";
  auto summary = models::ExportGguf(dir, gguf, {});
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_TRUE(summary->chat_template);
  const std::vector<int32_t> prompt = Prompt();
  auto g = generate::Generator::Load(dir, ElementType::kF32);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  testing::TlalocLogits ours = testing::RunTlaloc(**g, prompt);
  ASSERT_EQ(ours.full.size(), prompt.size());
  generate::GenerateOptions opts;
  opts.max_new_tokens = kNewTokens;
  auto generated = (*g)->Generate({prompt}, opts);
  ASSERT_TRUE(generated.ok()) << generated.status().ToString();

  std::vector<float> theirs;
  std::vector<int32_t> greedy;
  ASSERT_TRUE(RunLlamaCpp(gguf, prompt, dir, &theirs, &greedy));
  double worst = 0;
  for (size_t p = 0; p < prompt.size(); ++p)
    worst = std::max(worst, testing::MaxAbsDiff(
                                ours.full[p], std::span<const float>(theirs.data() + p * kVocab,
                                                                     static_cast<size_t>(kVocab))));
  EXPECT_LT(worst, kTolerance) << what << ": llama.cpp's logits differ from Tlaloc's";
  EXPECT_EQ((*generated)[0].generated_ids, greedy) << what;
  std::printf("[llama gguf] %s: max |logit - llama.cpp| = %.3g over %zu positions\n", what, worst,
              prompt.size());
}

// `tlaloc export gguf`'s exporter writes llama.cpp's `llama` architecture, and llama.cpp's
// logits for the prompt are Tlaloc's within 1e-4 (f32 file), greedy ids equal.
TEST(LlamaFamilyGguf, ExportRunsInLlamaCpp) {
  static const std::string missing = testing::PythonMissing("torch transformers llama_cpp numpy");
  if (!missing.empty()) TL_ORACLE_MISSING(missing);
  const fs::path dir =
      fs::temp_directory_path() / ("tlaloc_llama_gguf_" + std::to_string(::getpid()));
  ASSERT_TRUE(MakeCheckpoint(dir, false, "default"));
  ExpectLlamaCppAgrees(dir, "default rope");
  auto contents = io::ParseGguf(ReadBytes(dir / "model.gguf"));
  ASSERT_TRUE(contents.ok()) << contents.status().ToString();
  EXPECT_EQ(contents->FindTensor("rope_freqs.weight"), nullptr) << "no scaling, no rope_freqs";
  if (!HasFailure()) {
    fs::remove_all(dir);
    fs::remove(dir.string() + ".log");
  }
}

// Llama 3.1's "llama3" rope scaling goes to llama.cpp as rope_freqs.weight, the per-frequency
// divisors of its plain frequencies: the checkpoint's original context (64) puts the tiny
// model's 8 frequencies in all three bands (kept, divided by the factor 8, blended), and the
// prompt's positions are far enough for a wrong divisor to move the logits well past 1e-4.
TEST(LlamaFamilyGguf, Llama3RopeScalingExportsRopeFreqs) {
  static const std::string missing = testing::PythonMissing("torch transformers llama_cpp numpy");
  if (!missing.empty()) TL_ORACLE_MISSING(missing);
  const fs::path dir =
      fs::temp_directory_path() / ("tlaloc_llama_gguf_scaled_" + std::to_string(::getpid()));
  ASSERT_TRUE(MakeCheckpoint(dir, true, "llama3"));
  ExpectLlamaCppAgrees(dir, "llama3 rope scaling");
  const std::vector<std::byte> bytes = ReadBytes(dir / "model.gguf");
  auto contents = io::ParseGguf(bytes);
  ASSERT_TRUE(contents.ok()) << contents.status().ToString();
  const io::GgufTensorInfo* freqs = contents->FindTensor("rope_freqs.weight");
  ASSERT_NE(freqs, nullptr);
  auto divisors = io::ReadGgufTensor(bytes, *contents, *freqs);
  ASSERT_TRUE(divisors.ok()) << divisors.status().ToString();
  ASSERT_EQ(divisors->dims(), (std::vector<int64_t>{8}));  // head_dim 16 / 2
  int kept = 0, scaled = 0, blended = 0;
  for (float d : divisors->span<float>()) {
    kept += d == 1.0f;
    scaled += d == 8.0f;
    blended += d > 1.0f && d < 8.0f;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(scaled, 0);
  EXPECT_GT(blended, 0);
  if (!HasFailure()) {
    fs::remove_all(dir);
    fs::remove(dir.string() + ".log");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, LlamaFamilyOracle,
                         ::testing::Values(LlamaCase{"tied_llama3_rope", true, "llama3"},
                                           LlamaCase{"untied_default_rope", false, "default"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tlaloc
