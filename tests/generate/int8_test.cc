// int8 checkpoints end to end on the interpreter: a quantized folder runs like any checkpoint,
// and its f32 forward equals, bit for bit, the f32 forward of a float checkpoint holding the
// dequantised weights (the int8 program computes exactly x . (q * scale)), with the fused int8
// kernel and without it, for prefill (many rows) and decode (one row).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cpu/reduction_matmul_q8_packed.h"
#include "testing/int8_form.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/quantize.h"
#include "tlaloc/runtime/backend.h"

namespace tlaloc {
namespace {

namespace fs = std::filesystem;

struct Dirs {
  fs::path root, f32, int8, dequantised;
};

// A small random Qwen3 (hidden 64, 2 layers, untied head), its int8 form, and a float folder of
// the int8 form's dequantised weights.
Dirs MakeFolders(bool tied) {
  Dirs d;
  d.root = fs::temp_directory_path() /
           ("tlaloc_int8_" + std::to_string(::getpid()) + (tied ? "_tied" : "_untied"));
  fs::remove_all(d.root);
  d.f32 = d.root / "f32";
  d.int8 = d.root / "int8";
  d.dequantised = d.root / "dequantised";
  auto c = models::PresetConfig("tiny");
  EXPECT_TRUE(c.ok());
  c->vocab_size = 96;
  c->tie_word_embeddings = tied;
  c->initializer_range = 0.2;  // logits of order one
  c->dtype = ElementType::kF32;
  auto weights = models::RandomWeights(*c, 11, ElementType::kF32);
  EXPECT_TRUE(models::WriteModelFolder(*c, d.f32, weights, {}, {}).ok());
  auto q = models::QuantizeCheckpoint(d.f32, d.int8);
  EXPECT_TRUE(q.ok()) << q.status().ToString();

  auto qc = io::LoadModelConfig(d.int8);
  auto ckpt = io::Checkpoint::Open(d.int8);
  EXPECT_TRUE(qc.ok() && ckpt.ok());
  std::vector<io::NamedTensor> deq;
  for (const auto& e : models::ExpectedTensors(*qc)) {
    if (e.fixed_type == ElementType::kF16 || e.optional) continue;
    auto v = ckpt->Get(e.name);
    EXPECT_TRUE(v.ok()) << e.name;
    if (e.fixed_type == ElementType::kS8) {
      auto s = ckpt->Get(models::Int8ScaleName(e.name));
      deq.push_back({e.name, models::DequantizeInt8Matrix(*v, *s)});
    } else {
      deq.push_back({e.name, v->Clone()});
    }
  }
  EXPECT_TRUE(models::WriteModelFolder(*c, d.dequantised, deq, {}, {}).ok());
  return d;
}

// Logits of a 7-token prompt prefilled as 7 prefixes (7 rows: the prefill path), then of 5
// decode steps (one row each).
std::vector<std::vector<float>> RunSteps(generate::Generator& g) {
  const std::vector<int32_t> prompt = {5, 17, 3, 88, 41, 2, 60};
  std::vector<std::vector<int32_t>> prefixes;
  for (size_t n = 1; n <= prompt.size(); ++n)
    prefixes.emplace_back(prompt.begin(), prompt.begin() + n);
  std::vector<std::vector<float>> out;
  auto full = g.Prefill(prefixes, 64, {}, 0);
  EXPECT_TRUE(full.ok()) << full.status().ToString();
  if (!full.ok()) return out;
  auto all = full->logits.span<float>();
  out.emplace_back(all.begin(), all.end());
  auto first = g.Prefill({prompt}, 64, {}, 0);
  EXPECT_TRUE(first.ok());
  if (!first.ok()) return out;
  // Fixed tokens, so that a run's own choices do not change what the next step computes.
  const int32_t feed[5] = {9, 70, 33, 1, 50};
  for (int32_t p = 0; p < 5; ++p) {
    const int32_t next = feed[p];
    auto step = g.DecodeStep({next}, {static_cast<int32_t>(prompt.size()) + p}, {}, 0,
                             static_cast<uint32_t>(p + 1));
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (!step.ok()) return out;
    auto s = step->logits.span<float>();
    out.emplace_back(s.begin(), s.end());
  }
  return out;
}

double MaxDiff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
               double* scale = nullptr) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_EQ(a[i].size(), b[i].size());
    double step = 0;
    for (size_t j = 0; j < a[i].size() && j < b[i].size(); ++j) {
      step = std::max(step, std::fabs(double(a[i][j]) - b[i][j]));
      m = std::max(m, step);
      if (scale) *scale = std::max(*scale, std::fabs(double(b[i][j])));
    }
    if (step > 0) std::printf("  step %zu (0: prefill of 7 rows): max diff %.3g\n", i, step);
  }
  return m;
}

std::unique_ptr<generate::Generator> Load(const fs::path& dir, ElementType et, bool fuse) {
  InterpreterOptions options;
  options.fuse = fuse;
  auto g = generate::Generator::Load(dir, et, MakeInterpreterBackend(options));
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(*g) : nullptr;
}

TEST(Int8Generate, F32ForwardEqualsTheDequantisedCheckpointBitForBit) {
  // The exact form (dequantised weights, f32 products) is the one that equals them.
  const tlaloc::testing::ScopedInt8Form exact(nn::Int8Form::kExact);
  for (bool tied : {false, true}) {
    const Dirs d = MakeFolders(tied);
    auto deq = Load(d.dequantised, ElementType::kF32, true);
    auto fused = Load(d.int8, ElementType::kF32, true);
    auto plain = Load(d.int8, ElementType::kF32, false);
    ASSERT_TRUE(deq && fused && plain);
    const auto want = RunSteps(*deq);
    ASSERT_EQ(want.size(), 6u);
    double scale = 0;
    EXPECT_EQ(MaxDiff(RunSteps(*fused), want, &scale), 0.0) << "fused int8 vs dequantised f32";
    EXPECT_EQ(MaxDiff(RunSteps(*plain), want), 0.0) << "unfused int8 vs dequantised f32";
    EXPECT_GT(scale, 0.5);

    // Against the float weights it was made from: the quantisation error only (weights within
    // half a step, 1/254 of their block's largest; measured about 5.5% of the logit range after
    // two layers of these random weights).
    auto f32 = Load(d.f32, ElementType::kF32, true);
    ASSERT_TRUE(f32);
    const double vs_float = MaxDiff(want, RunSteps(*f32));
    EXPECT_LT(vs_float, 0.1 * scale);
    // bf16 activations (the int8 checkpoint run at bf16): rounding of the hidden states.
    auto bf16 = Load(d.int8, ElementType::kBF16, true);
    ASSERT_TRUE(bf16);
    EXPECT_EQ(bf16->dtype(), ElementType::kBF16);
    const double vs_bf16 = MaxDiff(RunSteps(*bf16), want);
    EXPECT_LT(vs_bf16, 0.08 * scale);
    std::printf(
        "[int8] %s head: int8 f32 forward vs dequantised f32: 0 (bit-identical, fused and "
        "unfused); vs the float source %.3g; int8 at bf16 vs f32 %.3g (logits up to %.3g)\n",
        tied ? "tied" : "untied", vs_float, vs_bf16, scale);
    fs::remove_all(d.root);
  }
}

// The default int8 form, q8_0 (the composite tlaloc.int8_linear, nn/int8_linear.h), rounds
// activations to int8 per block as llama.cpp's Q8_0 products do, so the logits move off the
// exact form's by about what that rounding gives (tests/generate/llama_oracle_test.cc compares
// with llama.cpp), the kernel and the decomposition op by op give the same bits, and the exact
// form, selected, is bit for bit the exact run again.
TEST(Int8Generate, Q8_0FormIsTheDefaultCloseAndExactIsSelectable) {
  const Dirs d = MakeFolders(false);
  std::vector<std::vector<float>> want;
  {
    const tlaloc::testing::ScopedInt8Form exact(nn::Int8Form::kExact);
    auto g = Load(d.int8, ElementType::kF32, true);
    ASSERT_TRUE(g);
    want = RunSteps(*g);
  }
  ASSERT_EQ(want.size(), 6u);
  auto q8 = Load(d.int8, ElementType::kF32, true);
  auto q8_plain = Load(d.int8, ElementType::kF32, false);
  ASSERT_TRUE(q8 && q8_plain);
  double scale = 0;
  const auto got = RunSteps(*q8);
  const double diff = MaxDiff(got, want, &scale);
  EXPECT_GT(diff, 0.0) << "q8_0 activations should round";
  EXPECT_LT(diff, 0.05 * scale);
  EXPECT_EQ(MaxDiff(RunSteps(*q8_plain), got), 0.0)
      << "the composite's kernel vs its decomposition op by op";
  {
    const tlaloc::testing::ScopedInt8Form exact(nn::Int8Form::kExact);
    auto again = Load(d.int8, ElementType::kF32, true);
    ASSERT_TRUE(again);
    EXPECT_EQ(MaxDiff(RunSteps(*again), want), 0.0) << "the exact form, selected, is exact again";
  }
  std::printf("[int8] q8_0 form vs exact: %.3g (logits up to %.3g)\n", diff, scale);
  fs::remove_all(d.root);
}

// In the q8_0 form the interpreter lays every int8 matrix out for this CPU's kernel when the
// checkpoint loads (Engine::PrepareInt8Weights), so a first request packs nothing more; the
// exact form, which dequantises, packs nothing at load.
TEST(Int8Generate, Q8_0MatricesArePackedAtLoadNotInTheFirstRequest) {
  if (!cpu::Q8PackingAvailable())
    GTEST_SKIP() << "no packed q8_0 layout on this CPU (neither AVX512-VNNI nor AVX2)";
  const Dirs d = MakeFolders(false);
  cpu::ClearQ8Cache();
  auto packs = [] { return cpu::GetQ8CacheStats().packs; };
  {
    const tlaloc::testing::ScopedInt8Form exact(nn::Int8Form::kExact);
    const int64_t before = packs();
    auto g = Load(d.int8, ElementType::kF32, true);
    ASSERT_TRUE(g);
    EXPECT_EQ(packs(), before) << "the exact form should pack nothing at load";
  }
  const int64_t before = packs();
  auto g = Load(d.int8, ElementType::kF32, true);
  ASSERT_TRUE(g);
  int64_t matrices = 0;
  for (const auto& spec : g->engine().family().weight_specs(g->config()))
    matrices += spec.fixed_type == ElementType::kS8 && !spec.read_by_rows;
  EXPECT_GT(matrices, 0);
  EXPECT_EQ(packs() - before, matrices) << "each int8 matrix should be packed at load";
  RunSteps(*g);
  EXPECT_EQ(packs() - before, matrices) << "the first request should find them packed";
  cpu::ClearQ8Cache();
  fs::remove_all(d.root);
}

TEST(Int8Generate, DefaultDtypeIsTheCheckpointsFloatType) {
  const Dirs d = MakeFolders(false);
  auto g = generate::Generator::Load(d.int8);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)->dtype(), ElementType::kF32);
  fs::remove_all(d.root);
}

}  // namespace
}  // namespace tlaloc
