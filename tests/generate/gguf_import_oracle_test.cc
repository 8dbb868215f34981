// GGUF files in: a random Qwen3 / Qwen3-MoE checkpoint is exported (models::ExportGguf), made
// into each ggml type people download (llama.cpp's own quantizer through llama-cpp-python,
// gguf_quantize.py: Q8_0, Q4_0, Q4_K_M, Q6_K; Tlaloc's exporter: F32, F16, BF16, and Q8_0 from
// an int8 checkpoint), imported back (models::ImportGguf) and run by Tlaloc and by llama.cpp on
// the same file (llama_oracle.py). Checked: the logits at every prompt position within the
// type's tolerance (llama.cpp rounds activations for its quantized and half-precision products,
// Tlaloc computes them in f32 on the same weights), greedy ids equal until a near-tie, and the
// tokenizer the file carries against llama.cpp's tokenization.
//
// The matrices' rows are 256 or 512 wide so that llama.cpp's K-quants apply as they do to real
// models (it falls back to other types for rows that are not multiples of 256).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "generate/oracle_logits.h"
#include "testing/oracle.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/gguf_export.h"
#include "tlaloc/models/gguf_import.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/quantize.h"
#include "tlaloc/models/qwen3.h"
#include "tlaloc/tokenizer/tokenizer.h"

namespace tlaloc {
namespace {

namespace fs = std::filesystem;
using testing::MaxAbs;
using testing::MaxAbsDiff;
using testing::RunTlaloc;

const fs::path kSource = TLALOC_SOURCE_DIR;
const fs::path kTokenizer = kSource / "data/qwen3/tokenizer.json";
const fs::path kOracle = kSource / "tests/generate/llama_oracle.py";
const fs::path kQuantize = kSource / "tests/generate/gguf_quantize.py";
constexpr int kNewTokens = 24;

// "Hello, world! The quick brown fox." in the Qwen3 tokenizer, then <|im_end|> and a newline.
const std::vector<int32_t> kPrompt = {9707, 11, 1879, 0, 576, 3974, 13876, 38835, 13, 151645, 198};
// The same prompt in the small vocabulary: ids below 320.
const std::vector<int32_t> kSmallPrompt = {72, 101, 108, 108, 111, 44, 32, 119, 260, 10, 263};
constexpr int64_t kSmallVocab = 320;

const char kText[] =
    "Hello, world!  Ünïcödé 你好世界 🦙🦙 3.14159 12345\n\n\t<|im_start|>user\n"
    "I'm   here<think>ok</think><|im_end|>\n";

std::string Join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// Runs `cmd`; its last line is a JSON object.
std::optional<nlohmann::json> RunJson(const std::string& cmd) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) {
    ADD_FAILURE() << "cannot run " << cmd;
    return std::nullopt;
  }
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int rc = pclose(pipe);
  const size_t start = out.rfind("\n{");
  auto j = nlohmann::json::parse(start == std::string::npos ? out : out.substr(start + 1), nullptr,
                                 false);
  if (rc != 0 || j.is_discarded() || !j.is_object()) {
    ADD_FAILURE() << cmd << " failed (status " << rc << "):\n" << out;
    return std::nullopt;
  }
  return j;
}

struct Llama {
  std::vector<int32_t> greedy, text_ids;
  std::vector<float> logits;  // [prompt, vocab]
  int64_t vocab = 0;
};

std::optional<Llama> RunLlama(const fs::path& gguf, const std::vector<int32_t>& prompt,
                              const fs::path& work) {
  const fs::path logits = work / "llama_logits.f32", text = work / "text.txt";
  std::ofstream(text) << kText;
  auto j = RunJson(testing::OraclePython() + " " + kOracle.string() + " --model " + gguf.string() +
                   " --tokens " + Join(prompt) + " --generate " + std::to_string(kNewTokens) +
                   " --logits-out " + logits.string() + " --text-file " + text.string() +
                   " --threads 2");
  if (!j) return std::nullopt;
  Llama run;
  run.vocab = (*j)["n_vocab"].get<int64_t>();
  run.greedy = (*j)["greedy_ids"].get<std::vector<int32_t>>();
  run.text_ids = (*j)["text_ids"].get<std::vector<int32_t>>();
  run.logits.resize(prompt.size() * static_cast<size_t>(run.vocab));
  std::ifstream f(logits, std::ios::binary);
  f.read(reinterpret_cast<char*>(run.logits.data()),
         static_cast<std::streamsize>(run.logits.size() * sizeof(float)));
  if (!f) {
    ADD_FAILURE() << "short logits file " << logits;
    return std::nullopt;
  }
  return run;
}

// A byte-level vocabulary (id b is byte b in GPT-2's spelling), two merges and Qwen's added
// tokens, with Qwen2's split pattern: small enough that llama.cpp loads it in no time.
std::string SmallTokenizerJson() {
  auto byte_token = [](int b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    int code = b;
    if (!printable) {
      int n = 0;
      for (int i = 0; i < b; ++i)
        if (!((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174))) ++n;
      code = 256 + n;
    }
    std::string s;
    if (code < 0x80) {
      s += static_cast<char>(code);
    } else {
      s += static_cast<char>(0xC0 | (code >> 6));
      s += static_cast<char>(0x80 | (code & 0x3F));
    }
    return s;
  };
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_token(b)] = b;
  vocab["ll"] = 256;
  vocab["llo"] = 257;
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"l l", "ll o"}}};
  j["added_tokens"] =
      nlohmann::json::array({{{"id", 259}, {"content", "<|endoftext|>"}, {"special", true}},
                             {{"id", 260}, {"content", "<|im_start|>"}, {"special", true}},
                             {{"id", 261}, {"content", "<|im_end|>"}, {"special", true}},
                             {{"id", 262}, {"content", "<think>"}, {"special", false}},
                             {{"id", 263}, {"content", "</think>"}, {"special", false}}});
  j["decoder"] = {{"type", "ByteLevel"}};
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern",
          {{"Regex",
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
         {"behavior", "Isolated"}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  return j.dump();
}

io::ModelConfig Config(bool moe, bool qwen3_vocab) {
  auto c = models::PresetConfig(moe ? "tiny-moe" : "tiny");
  EXPECT_TRUE(c.ok());
  c->hidden_size = 256;
  c->num_hidden_layers = 2;
  models::qwen3::MutableSlidingWindow(*c).max_window_layers = 2;
  c->layer_types.assign(2, "full_attention");
  c->num_attention_heads = 4;
  c->num_key_value_heads = 2;
  c->head_dim = 64;
  c->intermediate_size = 512;
  c->tie_word_embeddings = false;
  c->max_position_embeddings = 256;
  if (moe) {
    models::qwen3::MoeConfig& moe_fields = models::qwen3::MutableMoe(*c);
    moe_fields.num_experts = 4;
    moe_fields.num_experts_per_tok = 2;
    moe_fields.moe_intermediate_size = 256;
    moe_fields.norm_topk_prob = true;
  }
  if (!qwen3_vocab) {
    c->vocab_size = kSmallVocab;
    c->bos_token_id = 259;
    c->pad_token_id = 259;
    c->eos_token_ids = {261};
  }
  // Logits of order one with little amplification of llama.cpp's activation rounding (at 0.2
  // it flips near-tied greedy choices within a few tokens; llama_oracle_test.cc).
  c->initializer_range = 0.1;
  return *c;
}

fs::path MakeCheckpoint(const io::ModelConfig& config, const fs::path& dir, bool qwen3_vocab) {
  fs::create_directories(dir);
  models::InitOptions init;
  init.seed = 11;
  if (qwen3_vocab) {
    EXPECT_TRUE(fs::exists(kTokenizer)) << "the checkout lacks " << kTokenizer;
    init.tokenizer_json = kTokenizer;
  } else {
    std::ofstream(dir.parent_path() / "small_tokenizer.json") << SmallTokenizerJson();
    init.tokenizer_json = dir.parent_path() / "small_tokenizer.json";
  }
  Status s = models::WriteRandomCheckpoint(config, dir, init);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return dir;
}

struct Case {
  const char* name;
  bool moe;
  // How the file is made from the f32 export: "F32", "F16", "BF16" (Tlaloc's exporter),
  // "int8" (Tlaloc's int8 checkpoint exported as Q8_0), else a llama.cpp ftype.
  const char* make;
  double tolerance;  // of the largest |logit|
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class GgufImportOracle : public ::testing::TestWithParam<Case> {};

// The file for `c` in `dir`, from the checkpoint in `dir`/f32.
std::optional<fs::path> MakeFile(const Case& c, const fs::path& dir) {
  const fs::path f32 = dir / "f32.gguf", out = dir / (std::string(c.name) + ".gguf");
  auto fail = [](const Status& s) -> std::optional<fs::path> {
    ADD_FAILURE() << s.ToString();
    return std::nullopt;
  };
  if (auto e = models::ExportGguf(dir / "f32", f32); !e.ok()) return fail(e.status());
  const std::string make = c.make;
  if (make == "F32") return f32;
  if (make == "F16" || make == "BF16") {
    models::GgufExportOptions o;
    o.dtype = make == "F16" ? ElementType::kF16 : ElementType::kBF16;
    auto e = models::ExportGguf(dir / "f32", out, o);
    if (!e.ok()) return fail(e.status());
    return out;
  }
  if (make == "int8") {
    auto q = models::QuantizeCheckpoint(dir / "f32", dir / "int8");
    if (!q.ok()) return fail(q.status());
    auto e = models::ExportGguf(dir / "int8", out);
    if (!e.ok()) return fail(e.status());
    return out;
  }
  auto j = RunJson(testing::OraclePython() + " " + kQuantize.string() + " " + f32.string() + " " +
                   out.string() + " " + make);
  if (!j) return std::nullopt;
  std::printf("[oracle] %s: llama.cpp wrote %s\n", c.name, (*j)["types"].dump().c_str());
  return out;
}

TEST_P(GgufImportOracle, LogitsAndGreedyIdsAgreeWithLlamaCpp) {
  const Case& c = GetParam();
  if (std::string why = testing::PythonMissing("llama_cpp gguf numpy"); !why.empty())
    TL_ORACLE_MISSING(why);
  const bool qwen3_vocab = std::string(c.name) == "f32_qwen3_vocab";
  const io::ModelConfig config = Config(c.moe, qwen3_vocab);
  const std::vector<int32_t>& prompt = qwen3_vocab ? kPrompt : kSmallPrompt;
  const fs::path dir = fs::temp_directory_path() / ("tlaloc_gguf_import_" + std::string(c.name) +
                                                    "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  MakeCheckpoint(config, dir / "f32", qwen3_vocab);
  auto file = MakeFile(c, dir);
  ASSERT_TRUE(file);

  auto imported = models::ImportGguf(*file, dir / "imported");
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(imported->architecture, c.moe ? "qwen3moe" : "qwen3");
  const std::string make = c.make;
  if (make == "int8" || make == "Q8_0") {
    EXPECT_TRUE(imported->int8) << "every matrix is Q8_0: an int8 checkpoint, not dequantised";
    EXPECT_EQ(imported->dequantised, 0);
  }
  if (make.rfind("Q4", 0) == 0 || make == "Q6_K") {
    EXPECT_GT(imported->packed, 0) << "Q4_0 / Q4_K / Q6_K matrices stay packed";
    // Only the MoE experts are dequantised (the rows are multiples of 256: no fallback types).
    if (!c.moe) {
      EXPECT_EQ(imported->dequantised, 0);
    }
  }
  auto reread = io::LoadModelConfig(dir / "imported");
  ASSERT_TRUE(reread.ok()) << reread.status().ToString();
  EXPECT_EQ(reread->hidden_size, config.hidden_size);
  EXPECT_EQ(reread->num_key_value_heads, config.num_key_value_heads);
  EXPECT_EQ(reread->is_moe(), c.moe);

  auto g = generate::Generator::Load(dir / "imported", ElementType::kF32);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  testing::TlalocLogits ours = RunTlaloc(**g, prompt);
  ASSERT_EQ(ours.full.size(), prompt.size());
  auto llama = RunLlama(*file, prompt, dir);
  ASSERT_TRUE(llama);
  ASSERT_EQ(llama->vocab, config.vocab_size);
  const double scale = MaxAbs(llama->logits);
  EXPECT_GT(scale, 0.5) << "logits this small would make the tolerance meaningless";
  const double bound = make == "F32" ? 1e-4 : c.tolerance * scale;
  double worst = 0, worst_cache = 0;
  for (size_t p = 0; p < prompt.size(); ++p) {
    std::span<const float> theirs(llama->logits.data() + p * llama->vocab,
                                  static_cast<size_t>(llama->vocab));
    worst = std::max(worst, MaxAbsDiff(ours.full[p], theirs));
    worst_cache = std::max(worst_cache, MaxAbsDiff(ours.cached[p], ours.full[p]));
  }
  EXPECT_LT(worst, bound) << c.name << ": logits differ from llama.cpp's";
  EXPECT_LT(worst_cache, 1e-4) << c.name << ": KV-cached decoding vs full recomputation";

  // Greedy ids: equal until llama.cpp's choice and Tlaloc's are within the bound of each other
  // in Tlaloc's own logits at the step where they part (a near-tie that activation rounding
  // may decide either way).
  generate::GenerateOptions opts;
  opts.max_new_tokens = kNewTokens;
  auto res = (*g)->Generate({prompt}, opts);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  const std::vector<int32_t>& greedy = (*res)[0].generated_ids;
  size_t same = 0;
  while (same < greedy.size() && same < llama->greedy.size() && greedy[same] == llama->greedy[same])
    ++same;
  if (same < static_cast<size_t>(kNewTokens)) {
    ASSERT_LT(same, greedy.size());
    ASSERT_LT(same, llama->greedy.size());
    std::vector<int32_t> prefix = prompt;
    prefix.insert(prefix.end(), greedy.begin(), greedy.begin() + static_cast<std::ptrdiff_t>(same));
    auto step =
        (*g)->Prefill({prefix}, (*g)->CacheBucket(static_cast<int64_t>(prefix.size()) + 1), {}, 0);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    auto row = step->logits.span<float>();
    const double gap =
        row[static_cast<size_t>(greedy[same])] - row[static_cast<size_t>(llama->greedy[same])];
    EXPECT_LT(gap, bound) << c.name << ": greedy ids part at new token " << same
                          << " without a near-tie";
    std::printf("[oracle] %s: greedy parts at token %zu, logit gap %.3g (bound %.3g)\n", c.name,
                same, gap, bound);
  }
  std::printf(
      "[oracle] %s: max |logit - llama.cpp| = %.3g (logits up to %.3g, bound %.3g); greedy ids "
      "equal for %zu of %d\n",
      c.name, worst, scale, bound, same, kNewTokens);

  // Dequantised or packed files: llama.cpp on the same weights in f32 (the file imported with
  // every tensor dequantised, exported again) has no activation rounding left, so it must agree
  // as f32 files do. With the bit-exact dequantisation (tests/io/gguf_dequant_test.cc, and
  // tests/models/gguf_packed_test.cc for the packed forms' StableHLO), this pins the import and
  // the packed program form.
  if (imported->dequantised > 0 || imported->packed > 0) {
    models::GgufImportOptions all_f32;
    all_f32.keep_packed = false;
    auto f32_import = models::ImportGguf(*file, dir / "imported_f32", all_f32);
    ASSERT_TRUE(f32_import.ok()) << f32_import.status().ToString();
    auto e = models::ExportGguf(dir / "imported_f32", dir / "dequantised.gguf");
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    auto exact = RunLlama(dir / "dequantised.gguf", prompt, dir);
    ASSERT_TRUE(exact);
    double worst_exact = 0;
    for (size_t p = 0; p < prompt.size(); ++p)
      worst_exact = std::max(
          worst_exact,
          MaxAbsDiff(ours.full[p], std::span<const float>(exact->logits.data() + p * exact->vocab,
                                                          static_cast<size_t>(exact->vocab))));
    EXPECT_LT(worst_exact, 1e-4) << c.name << ": vs llama.cpp on the dequantised weights in f32";
    EXPECT_EQ(exact->greedy, greedy) << c.name;
    std::printf("[oracle] %s: vs llama.cpp on the same weights dequantised to f32: %.3g\n", c.name,
                worst_exact);
  }

  auto tok = Tokenizer::FromFile((dir / "imported" / "tokenizer.json").string());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->Encode(kText), llama->text_ids) << c.name;
  fs::remove_all(dir);
}

// Tolerances: f32 is 1e-4 absolute. llama.cpp rounds the activations of a product to the
// weights' half type (f16: 11 significant bits; bf16: 8) or to 8-bit blocks (Q8_0, one scale
// per 32 activations, for Q8_0 and Q4_0; Q8_K, one scale per 256, for K-quants, hence their
// wider bound); Tlaloc keeps them f32 on the same weights, so the logits differ by what that
// rounding gives. Measured (of the largest |logit|): f16 0.08%, bf16 0.6%, Q8_0 2.1%, Q4_0
// 2.3%, Q6_K 2.9%, Q4_K_M 4.2%, Qwen3-MoE Q4_K_M 3.5%.
INSTANTIATE_TEST_SUITE_P(
    Types, GgufImportOracle,
    ::testing::Values(Case{"f32_qwen3_vocab", false, "F32", 0}, Case{"f16", false, "F16", 0.01},
                      Case{"bf16", false, "BF16", 0.08}, Case{"q8_0_tlaloc", false, "int8", 0.03},
                      Case{"q8_0", false, "Q8_0", 0.03}, Case{"q4_0", false, "Q4_0", 0.03},
                      Case{"q4_k_m", false, "Q4_K_M", 0.06}, Case{"q6_k", false, "Q6_K", 0.06},
                      Case{"moe_f32", true, "F32", 0}, Case{"moe_q4_k_m", true, "Q4_K_M", 0.06}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tlaloc
