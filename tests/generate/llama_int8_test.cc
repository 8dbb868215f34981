// Llama int8 checkpoints (`tlaloc quantize`, models::QuantizeCheckpoint) on the interpreter: a
// random tiny-llama checkpoint (llama3 rope scaling, tied head) quantized to int8 loads and
// generates; its f32 forward in the exact int8 form equals, bit for bit, the forward of a float
// checkpoint holding the dequantised weights; and it stays within the bound the Qwen3 int8 test
// (int8_test.cc) allows of the float weights it was made from (10% of the logit range), by full
// recomputation at every prompt position and by KV-cached decoding, in the exact form and in the
// default q8_0 form (which also rounds activations).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "generate/oracle_logits.h"
#include "testing/int8_form.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/quantize.h"

namespace tlaloc {
namespace {

namespace fs = std::filesystem;

// The bound int8_test.cc holds Qwen3's int8 forward to against its float source.
constexpr double kInt8VsFloat = 0.1;

struct Folders {
  fs::path root, f32, int8, dequantised;
};

Folders MakeFolders() {
  Folders d;
  d.root = fs::temp_directory_path() / ("tlaloc_llama_int8_" + std::to_string(::getpid()));
  fs::remove_all(d.root);
  d.f32 = d.root / "f32";
  d.int8 = d.root / "int8";
  d.dequantised = d.root / "dequantised";
  auto c = models::PresetConfig("tiny-llama");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  c->initializer_range = 0.2;  // logits of order one
  models::InitOptions init;
  init.seed = 5;
  EXPECT_TRUE(models::WriteRandomCheckpoint(*c, d.f32, init).ok());
  auto q = models::QuantizeCheckpoint(d.f32, d.int8);
  EXPECT_TRUE(q.ok()) << q.status().ToString();

  auto qc = models::LoadConfig(d.int8);
  auto ckpt = io::Checkpoint::Open(d.int8);
  EXPECT_TRUE(qc.ok() && ckpt.ok());
  if (!qc.ok() || !ckpt.ok()) return d;
  EXPECT_TRUE(qc->quantization.has_value());
  std::vector<io::NamedTensor> deq;
  int matrices = 0;
  for (const auto& e : models::ExpectedTensors(*qc)) {
    if (e.fixed_type == ElementType::kF16 || e.optional) continue;
    auto v = ckpt->Get(e.name);
    EXPECT_TRUE(v.ok()) << e.name;
    if (!v.ok()) continue;
    if (e.fixed_type == ElementType::kS8) {
      ++matrices;
      auto s = ckpt->Get(models::Int8ScaleName(e.name));
      EXPECT_TRUE(s.ok()) << e.name;
      deq.push_back({e.name, models::DequantizeInt8Matrix(*v, *s)});
    } else {
      deq.push_back({e.name, v->Clone()});
    }
  }
  // The embedding (the tied head) and 7 projections in each of the 2 layers.
  EXPECT_EQ(matrices, 1 + 2 * 7);
  EXPECT_TRUE(models::WriteModelFolder(*c, d.dequantised, deq, {}, {}).ok());
  return d;
}

std::unique_ptr<generate::Generator> Load(const fs::path& dir) {
  auto g = generate::Generator::Load(dir, ElementType::kF32);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(*g) : nullptr;
}

const std::vector<int32_t> kPrompt = {256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};

// Max |a - b| over every position of both runs (full and KV-cached); `scale` the largest |b|.
double MaxDiff(const testing::TlalocLogits& a, const testing::TlalocLogits& b, double* scale) {
  double worst = 0;
  for (const auto& runs : {std::pair{&a.full, &b.full}, std::pair{&a.cached, &b.cached}}) {
    EXPECT_EQ(runs.first->size(), runs.second->size());
    for (size_t p = 0; p < runs.first->size() && p < runs.second->size(); ++p) {
      worst = std::max(worst, testing::MaxAbsDiff((*runs.first)[p], (*runs.second)[p]));
      *scale = std::max(*scale, testing::MaxAbs((*runs.second)[p]));
    }
  }
  return worst;
}

TEST(LlamaInt8, QuantizedLlamaRunsWithinTheInt8BoundOfItsFloatSource) {
  const Folders d = MakeFolders();
  ASSERT_FALSE(::testing::Test::HasFailure());
  auto f32 = Load(d.f32);
  ASSERT_TRUE(f32);
  const testing::TlalocLogits want = testing::RunTlaloc(*f32, kPrompt);
  ASSERT_EQ(want.full.size(), kPrompt.size());
  double scale = 0, unused = 0;
  {
    const testing::ScopedInt8Form exact(nn::Int8Form::kExact);
    auto int8 = Load(d.int8);
    auto deq = Load(d.dequantised);
    ASSERT_TRUE(int8 && deq);
    const testing::TlalocLogits got = testing::RunTlaloc(*int8, kPrompt);
    EXPECT_EQ(MaxDiff(got, testing::RunTlaloc(*deq, kPrompt), &unused), 0.0)
        << "exact int8 vs the dequantised float checkpoint";
    const double vs_float = MaxDiff(got, want, &scale);
    EXPECT_GT(scale, 0.5) << "logits this small would make the bound meaningless";
    EXPECT_GT(vs_float, 0.0) << "quantisation should change something";
    EXPECT_LT(vs_float, kInt8VsFloat * scale);
    std::printf("[llama int8] exact form vs f32 source: max |diff| %.3g (logits up to %.3g)\n",
                vs_float, scale);
  }
  auto q8 = Load(d.int8);
  ASSERT_TRUE(q8);
  const double q8_vs_float = MaxDiff(testing::RunTlaloc(*q8, kPrompt), want, &unused);
  EXPECT_LT(q8_vs_float, kInt8VsFloat * scale);
  std::printf("[llama int8] q8_0 form vs f32 source: max |diff| %.3g\n", q8_vs_float);

  // And it generates (greedy, from the quantized folder's own tokenizer files).
  generate::GenerateOptions opts;
  opts.max_new_tokens = 8;
  auto out = q8->Generate({kPrompt}, opts);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FALSE((*out)[0].generated_ids.empty());
  if (!HasFailure()) fs::remove_all(d.root);
}

// What Llama's int8 support does not cover is refused by name: a GGUF export of the int8 folder
// (llama.cpp's interleaved q/k rows are not made for int8 matrices yet).
TEST(LlamaInt8, GgufExportOfAnInt8LlamaIsRefused) {
  const Folders d = MakeFolders();
  auto exported = models::ExportGguf(d.int8, d.root / "m.gguf");
  ASSERT_FALSE(exported.ok());
  EXPECT_NE(exported.status().message().find("int8 Llama checkpoints are not exported"),
            std::string::npos)
      << exported.status().ToString();
  fs::remove_all(d.root);
}

}  // namespace
}  // namespace tlaloc
