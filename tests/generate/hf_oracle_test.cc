// Hugging Face transformers as the oracle: random Qwen3 and Qwen3-MoE checkpoints in Hugging Face
// form (models::WriteModelFolder, as `tlaloc init-model` writes them) are loaded by
// transformers' AutoModelForCausalLM from the same folder (tests/generate/hf_oracle.py: float32,
// eager attention, the eager loop over experts, torch on the CPU) and compared with Tlaloc: f32
// logits at every prompt position within 1e-4 of transformers', for Tlaloc's full recomputation
// and for its KV-cached decoding, and the same greedy continuation. What transformers made of
// config.json (rope base, epsilon, tied head, sparse layers, routing) is compared too, so a field
// read differently shows by name instead of as a logit difference.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "generate/oracle_logits.h"
#include "testing/oracle.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc {
namespace {

namespace fs = std::filesystem;

const fs::path kScript = fs::path(TLALOC_SOURCE_DIR) / "tests/generate/hf_oracle.py";
constexpr int kNewTokens = 32;
// Scaled-up weights give logits of order one, so 1e-4 is a real test of agreement.
constexpr double kInitRange = 0.2;
constexpr double kTolerance = 1e-4;

// "Hello, world! The quick brown fox." in the Qwen3 tokenizer, then <|im_end|> and a newline.
const std::vector<int32_t> kQwen3Prompt = {9707,  11,    1879, 0,      576, 3974,
                                           13876, 38835, 13,   151645, 198};

struct HfCase {
  const char* name = "";
  bool moe = false;
  // The tiny / tiny-moe preset's shapes (Qwen3's 151,936-row vocabulary) where hidden is 0.
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0;
  int64_t vocab = 0;
  bool tied = false;
  double rope_theta = 1e6, eps = 1e-6;
  int64_t experts = 0, top_k = 0, moe_width = 0;
  bool norm_topk = true;
  int64_t sparse_step = 1;
  std::vector<int64_t> mlp_only_layers = {};
};

// Names the case in gtest's and ctest's listings.
void PrintTo(const HfCase& c, std::ostream* os) { *os << c.name; }

io::ModelConfig ConfigOf(const HfCase& s) {
  auto preset = models::PresetConfig(s.moe ? "tiny-moe" : "tiny");
  EXPECT_TRUE(preset.ok()) << preset.status().ToString();
  io::ModelConfig c = *preset;
  c.tie_word_embeddings = s.tied;
  c.rope_theta = s.rope_theta;
  c.rms_norm_eps = s.eps;
  c.initializer_range = kInitRange;
  if (s.hidden > 0) {
    c.hidden_size = s.hidden;
    c.num_hidden_layers = s.layers;
    models::qwen3::MutableSlidingWindow(c).max_window_layers = s.layers;
    c.layer_types.assign(static_cast<size_t>(s.layers), "full_attention");
    c.num_attention_heads = s.heads;
    c.num_key_value_heads = s.kv_heads;
    c.head_dim = s.head_dim;
    c.intermediate_size = s.intermediate;
    c.max_position_embeddings = 256;
  }
  if (s.vocab > 0) {
    c.vocab_size = s.vocab;
    c.bos_token_id = s.vocab - 2;
    c.pad_token_id = s.vocab - 2;
    c.eos_token_ids = {s.vocab - 1};
  }
  if (s.moe) {
    models::qwen3::MoeConfig& moe_fields = models::qwen3::MutableMoe(c);
    if (s.experts > 0) {
      moe_fields.num_experts = s.experts;
      moe_fields.num_experts_per_tok = s.top_k;
      moe_fields.moe_intermediate_size = s.moe_width;
    }
    moe_fields.norm_topk_prob = s.norm_topk;
    moe_fields.decoder_sparse_step = s.sparse_step;
    moe_fields.mlp_only_layers = s.mlp_only_layers;
  }
  EXPECT_TRUE(io::ValidateModelConfig(c).ok()) << s.name;
  return c;
}

// A fixed prompt: the real tokenizer's ids, or ids spread over a small vocabulary.
std::vector<int32_t> PromptOf(const io::ModelConfig& c) {
  if (c.vocab_size > 151643) return kQwen3Prompt;
  std::mt19937 rng(5);
  std::vector<int32_t> ids(12);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.vocab_size));
  return ids;
}

// A random checkpoint whose norm weights differ from one (so a swapped or missing norm shows).
void WriteCheckpoint(const io::ModelConfig& config, const fs::path& dir, uint64_t seed) {
  auto weights = models::RandomWeights(config, seed, ElementType::kF32);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> jitter(0.5f, 1.5f);
  for (auto& w : weights)
    if (w.name.find("norm") != std::string::npos)
      for (float& x : w.value.span<float>()) x = jitter(rng);
  io::GenerationConfig gen;
  gen.eos_token_ids = config.eos_token_ids;
  ASSERT_TRUE(models::WriteModelFolder(config, dir, weights, gen, {}).ok());
}

struct OracleRun {
  nlohmann::json info;
  std::vector<int32_t> greedy;
  std::vector<float> logits;  // [prompt, vocab]
  int64_t vocab = 0;
};

std::string Join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

std::string ReadText(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs hf_oracle.py on `dir`; fails the test (and returns nullopt) when it cannot.
std::optional<OracleRun> RunOracle(const fs::path& dir, const std::vector<int32_t>& prompt) {
  const fs::path logits_file = dir / "hf_logits.f32", out = dir / "hf.json", log = dir / "hf.log";
  const std::string cmd = testing::OraclePython() + " '" + kScript.string() + "' --model '" +
                          dir.string() + "' --tokens " + Join(prompt) + " --generate " +
                          std::to_string(kNewTokens) + " --logits-out '" + logits_file.string() +
                          "' --threads 2 > '" + out.string() + "' 2> '" + log.string() + "'";
  const int rc = std::system(cmd.c_str());
  auto j = nlohmann::json::parse(ReadText(out), nullptr, false);
  if (rc != 0 || j.is_discarded() || !j.is_object()) {
    ADD_FAILURE() << "hf_oracle.py failed (status " << rc << "): " << cmd << "\n" << ReadText(log);
    return std::nullopt;
  }
  OracleRun run;
  run.info = j;
  run.vocab = j["n_vocab"].get<int64_t>();
  run.greedy = j["greedy_ids"].get<std::vector<int32_t>>();
  std::ifstream f(logits_file, std::ios::binary);
  run.logits.resize(prompt.size() * static_cast<size_t>(run.vocab));
  f.read(reinterpret_cast<char*>(run.logits.data()),
         static_cast<std::streamsize>(run.logits.size() * sizeof(float)));
  if (!f) {
    ADD_FAILURE() << "short logits file " << logits_file;
    return std::nullopt;
  }
  return run;
}

using testing::MaxAbs;
using testing::MaxAbsDiff;
using testing::RunTlaloc;
using testing::TlalocLogits;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// What transformers built from config.json is what Tlaloc reads from it.
void ExpectSameModel(const io::ModelConfig& c, const nlohmann::json& hf) {
  EXPECT_EQ(hf["rope_type"], "default");
  EXPECT_DOUBLE_EQ(hf["rope_theta"].get<double>(), c.rope_theta);
  EXPECT_DOUBLE_EQ(hf["rms_norm_eps"].get<double>(), c.rms_norm_eps);
  EXPECT_EQ(hf["head_dim"].get<int64_t>(), c.head_dim);
  EXPECT_EQ(hf["lm_head_is_embedding"].get<bool>(), c.tie_word_embeddings);
  EXPECT_EQ(hf["attn_implementation"], "eager");
  std::vector<int64_t> sparse;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.IsMoeLayer(l)) sparse.push_back(l);
  EXPECT_EQ(hf["sparse_layers"].get<std::vector<int64_t>>(), sparse);
  if (c.is_moe()) {
    EXPECT_EQ(hf["norm_topk_prob"].get<bool>(), models::qwen3::Moe(c).norm_topk_prob);
    EXPECT_EQ(hf["num_experts_per_tok"].get<int64_t>(), models::qwen3::Moe(c).num_experts_per_tok);
    EXPECT_EQ(hf["experts_implementation"], "eager");
  }
}

class HfOracle : public ::testing::TestWithParam<HfCase> {};

TEST_P(HfOracle, F32LogitsGreedyIdsAndKvCacheAgree) {
  // Asked once: importing torch and transformers takes seconds.
  static const std::string missing = testing::PythonMissing("torch transformers numpy");
  if (!missing.empty()) TL_ORACLE_MISSING(missing);
  const auto start = std::chrono::steady_clock::now();
  const HfCase& shape = GetParam();
  const io::ModelConfig config = ConfigOf(shape);
  const std::vector<int32_t> prompt = PromptOf(config);
  const fs::path dir = fs::temp_directory_path() /
                       ("tlaloc_hf_" + std::string(shape.name) + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  uint64_t seed = 3000;
  for (const char* ch = shape.name; *ch; ++ch) seed = seed * 31 + static_cast<uint8_t>(*ch);
  WriteCheckpoint(config, dir, seed);

  auto g = generate::Generator::Load(dir, ElementType::kF32);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const auto tlaloc_start = std::chrono::steady_clock::now();
  TlalocLogits ours = RunTlaloc(**g, prompt);
  ASSERT_EQ(ours.full.size(), prompt.size());
  ASSERT_EQ(ours.cached.size(), prompt.size());
  generate::GenerateOptions opts;
  opts.max_new_tokens = kNewTokens;  // no end tokens: hf_oracle.py does not stop either
  auto generated = (*g)->Generate({prompt}, opts);
  ASSERT_TRUE(generated.ok()) << generated.status().ToString();
  const std::vector<int32_t> greedy = (*generated)[0].generated_ids;
  const double tlaloc_seconds = Seconds(tlaloc_start);

  const auto hf_start = std::chrono::steady_clock::now();
  auto hf = RunOracle(dir, prompt);
  ASSERT_TRUE(hf);
  const double hf_seconds = Seconds(hf_start);
  ASSERT_EQ(hf->vocab, config.vocab_size);
  EXPECT_EQ(hf->info["architecture"], std::string(io::ArchitectureClassName(config.architecture)));
  ExpectSameModel(config, hf->info["model"]);
  // transformers' own KV cache against its full pass: the oracle is consistent with itself.
  EXPECT_LT(hf->info["cached_vs_full"].get<double>(), kTolerance);

  double worst_full = 0, worst_cached = 0, scale = 0;
  for (size_t p = 0; p < prompt.size(); ++p) {
    std::span<const float> theirs(hf->logits.data() + p * hf->vocab,
                                  static_cast<size_t>(hf->vocab));
    const double full = MaxAbsDiff(ours.full[p], theirs);
    const double cached = MaxAbsDiff(ours.cached[p], theirs);
    EXPECT_LT(full, kTolerance) << shape.name << ": position " << p << " differs from transformers";
    EXPECT_LT(cached, kTolerance) << shape.name << ": KV-cached position " << p
                                  << " differs from transformers";
    worst_full = std::max(worst_full, full);
    worst_cached = std::max(worst_cached, cached);
    scale = std::max(scale, MaxAbs(theirs));
  }
  EXPECT_GT(scale, 0.5) << "logits this small would make the tolerance meaningless";

  EXPECT_EQ(greedy, hf->greedy) << shape.name << ": greedy continuation differs";
  size_t same = 0;
  while (same < greedy.size() && same < hf->greedy.size() && greedy[same] == hf->greedy[same])
    ++same;
  std::set<int32_t> distinct(greedy.begin(), greedy.end());
  std::printf(
      "[hf] %s: max |logit - transformers| = %.3g full, %.3g KV-cached, over %zu positions "
      "(logits up to %.3g); greedy ids identical for %zu of %d (%zu distinct); Tlaloc %.2f s, "
      "transformers %.2f s (torch %s, transformers %s), case %.2f s\n",
      shape.name, worst_full, worst_cached, prompt.size(), scale, same, kNewTokens, distinct.size(),
      tlaloc_seconds, hf_seconds, hf->info["torch"].get<std::string>().c_str(),
      hf->info["transformers"].get<std::string>().c_str(), Seconds(start));
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HfOracle,
    ::testing::Values(
        // Dense, tied head: GQA 2, head_dim 32, a small vocabulary.
        HfCase{.name = "dense_tied",
               .hidden = 64,
               .layers = 2,
               .heads = 4,
               .kv_heads = 2,
               .head_dim = 32,
               .intermediate = 128,
               .vocab = 256,
               .tied = true},
        // Dense, untied head: three layers, GQA 3, head_dim 64 wider than hidden / heads,
        // another rope base and epsilon.
        HfCase{.name = "dense_untied_gqa3",
               .hidden = 96,
               .layers = 3,
               .heads = 6,
               .kv_heads = 2,
               .head_dim = 64,
               .intermediate = 160,
               .vocab = 384,
               .rope_theta = 1e4,
               .eps = 1e-5},
        // The tiny preset as init-model writes it: Qwen3's 151,936-row vocabulary, untied.
        HfCase{.name = "preset_tiny_qwen3_vocab"},
        // MoE: 8 experts, top 2, renormalised (Qwen3-MoE's released configs).
        HfCase{.name = "moe_e8_top2_norm",
               .moe = true,
               .hidden = 64,
               .layers = 2,
               .heads = 4,
               .kv_heads = 2,
               .head_dim = 32,
               .intermediate = 128,
               .vocab = 256,
               .experts = 8,
               .top_k = 2,
               .moe_width = 32,
               .norm_topk = true},
        // MoE without renormalisation: the top-k softmax weights as they are; top 4 of 16, tied.
        HfCase{.name = "moe_e16_top4_nonorm_tied",
               .moe = true,
               .hidden = 96,
               .layers = 2,
               .heads = 3,
               .kv_heads = 1,
               .head_dim = 64,
               .intermediate = 160,
               .vocab = 320,
               .tied = true,
               .rope_theta = 1e4,
               .eps = 1e-5,
               .experts = 16,
               .top_k = 4,
               .moe_width = 48,
               .norm_topk = false},
        // Dense and sparse layers mixed: decoder_sparse_step 2 makes layers 1 and 3 sparse,
        // mlp_only_layers takes layer 3 back; top 3 of 6, not renormalised.
        HfCase{.name = "moe_mixed_layers_top3",
               .moe = true,
               .hidden = 64,
               .layers = 4,
               .heads = 4,
               .kv_heads = 2,
               .head_dim = 16,
               .intermediate = 96,
               .vocab = 256,
               .experts = 6,
               .top_k = 3,
               .moe_width = 24,
               .norm_topk = false,
               .sparse_step = 2,
               .mlp_only_layers = {3}},
        // The tiny-moe preset: 4 experts, top 2, renormalised, Qwen3's vocabulary.
        HfCase{.name = "preset_tiny_moe_qwen3_vocab", .moe = true}),
    [](const ::testing::TestParamInfo<HfCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tlaloc
