// An MoE layer's experts enter the programs stacked [E, out, in]: the weight specs name the
// checkpoint tensors they stack, loading stacks them, and writing a folder splits them back
// into transformers' per-expert tensors (one after another, so that loading views them in the
// mapped file; a reference-layout file, as transformers writes, is copied).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/load_weights.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::models {
namespace {

namespace fs = std::filesystem;

io::ModelConfig SmallMoe() {
  auto c = PresetConfig("tiny-moe");
  EXPECT_TRUE(c.ok());
  c->vocab_size = 64;
  models::qwen3::MoeConfig& moe_fields = models::qwen3::MutableMoe(*c);
  moe_fields.num_experts = 3;
  moe_fields.mlp_only_layers = {1};  // layer 1 dense
  EXPECT_TRUE(io::ValidateModelConfig(*c).ok());
  return *c;
}

TEST(MoeWeights, A3bShapedPresetHasQwen3MoeLayerShapes) {
  auto c = PresetConfig("qwen3-30b-a3b-2l");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(CheckSupported(*c).ok());
  EXPECT_EQ(models::qwen3::Moe(*c).num_experts, 128);
  EXPECT_EQ(models::qwen3::Moe(*c).num_experts_per_tok, 8);
  EXPECT_EQ(models::qwen3::Moe(*c).moe_intermediate_size, 768);
  EXPECT_EQ(c->hidden_size, 2048);
  EXPECT_TRUE(models::qwen3::Moe(*c).norm_topk_prob);
  // Per layer: attention 2048 x (4096 + 2 x 512) + 4096 x 2048, router 128 x 2048, experts
  // 128 x 3 x 768 x 2048, norms; plus the untied embedding and head.
  const int64_t layer = 2048 * (4096 + 1024) + 4096 * 2048 + 128 * 2048 +
                        int64_t{128} * 3 * 768 * 2048 + 2 * 2048 + 2 * 128;
  EXPECT_EQ(ParameterCount(*c), 2 * layer + 2 * int64_t{151936} * 2048 + 2048);
  const auto names = PresetNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "qwen3-30b-a3b-2l"), names.end());
}

// Loading prefaults the weights read whole; an untied embedding is only gathered by id.
TEST(MoeWeights, OnlyAnUntiedEmbeddingIsReadByRows) {
  for (bool tied : {false, true}) {
    auto c = PresetConfig("qwen3-30b-a3b-2l");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    c->tie_word_embeddings = tied;
    int by_rows = 0;
    for (const auto& s : WeightSpecs(*c)) {
      by_rows += s.read_by_rows;
      if (s.name == "model.embed_tokens.weight") {
        EXPECT_EQ(s.read_by_rows, !tied);
      }
    }
    EXPECT_EQ(by_rows, tied ? 0 : 1) << "tied " << tied;
  }
}

TEST(MoeWeights, SpecsStackTheExpertsOfSparseLayersOnly) {
  const io::ModelConfig c = SmallMoe();
  std::map<std::string, WeightSpec> specs;
  for (const auto& s : WeightSpecs(c)) specs[s.name] = s;
  const auto& down = specs.at("model.layers.0.mlp.experts.down_proj.weight");
  EXPECT_EQ(down.shape,
            (std::vector<int64_t>{3, c.hidden_size, models::qwen3::Moe(c).moe_intermediate_size}));
  ASSERT_EQ(down.stacked.size(), 3u);
  EXPECT_EQ(down.stacked[2], "model.layers.0.mlp.experts.2.down_proj.weight");
  EXPECT_EQ(specs.at("model.layers.0.mlp.experts.gate_proj.weight").shape,
            (std::vector<int64_t>{3, models::qwen3::Moe(c).moe_intermediate_size, c.hidden_size}));
  EXPECT_TRUE(specs.at("model.layers.0.mlp.gate.weight").stacked.empty());
  EXPECT_FALSE(specs.count("model.layers.0.mlp.experts.0.up_proj.weight"));
  EXPECT_TRUE(specs.count("model.layers.1.mlp.up_proj.weight")) << "the dense layer";
  EXPECT_FALSE(specs.count("model.layers.1.mlp.experts.up_proj.weight"));
}

TEST(MoeWeights, FolderHoldsPerExpertTensorsAndLoadingStacksThem) {
  const io::ModelConfig c = SmallMoe();
  const fs::path dir =
      fs::temp_directory_path() / ("tlaloc_moe_weights_" + std::to_string(getpid()));
  fs::remove_all(dir);
  InitOptions opts;
  opts.seed = 9;
  ASSERT_TRUE(WriteRandomCheckpoint(c, dir, opts).ok());
  auto ckpt = io::Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  for (const auto& t : ExpectedTensors(c))
    if (!t.optional) {
      EXPECT_NE(ckpt->Find(t.name), nullptr) << t.name;
    }
  EXPECT_EQ(ckpt->Find("model.layers.0.mlp.experts.up_proj.weight"), nullptr)
      << "stacked names stay inside Tlaloc";

  auto weights = LoadWeights(c, *ckpt, ElementType::kF32);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  const auto specs = WeightSpecs(c);
  ASSERT_EQ(weights->size(), specs.size());
  int checked = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].stacked.empty()) continue;
    const Literal& stacked = (*weights)[i];
    ASSERT_EQ(stacked.dims(), specs[i].shape);
    for (size_t e = 0; e < specs[i].stacked.size(); ++e) {
      auto part = ckpt->Get(specs[i].stacked[e]);
      ASSERT_TRUE(part.ok());
      EXPECT_EQ(
          std::memcmp(stacked.data() + e * part->byte_size(), part->data(), part->byte_size()), 0)
          << specs[i].name << " expert " << e;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * 3);  // one sparse layer, three projections, three experts

  // A checkpoint missing one expert is refused naming that tensor.
  std::vector<io::NamedTensor> all;
  for (const auto& name : ckpt->names())
    if (name != "model.layers.0.mlp.experts.1.up_proj.weight")
      all.push_back({name, *ckpt->Get(name)});
  const fs::path broken = dir / "broken";
  ASSERT_TRUE(io::WriteCheckpoint(broken, all).ok());
  auto bad = io::Checkpoint::Open(broken);
  ASSERT_TRUE(bad.ok());
  auto refused = LoadWeights(c, *bad, ElementType::kF32);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("model.layers.0.mlp.experts.1.up_proj.weight"),
            std::string::npos)
      << refused.status().ToString();
  fs::remove_all(dir);
}

TEST(MoeWeights, ExpertsWrittenInOrderLoadAsViewsReferenceLayoutAsCopies) {
  const io::ModelConfig c = SmallMoe();
  const fs::path dir = fs::temp_directory_path() / ("tlaloc_moe_views_" + std::to_string(getpid()));
  fs::remove_all(dir);
  InitOptions opts;
  opts.seed = 4;
  ASSERT_TRUE(WriteRandomCheckpoint(c, dir, opts).ok());
  auto ckpt = io::Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  // Views are what is checked here, so the weights are not then copied onto huge pages
  // (Checkpoint::CopyOntoHugePages, tests/io/huge_pages_test.cc).
  setenv("TLALOC_HUGE_PAGES", "0", 1);
  auto viewed = LoadWeights(c, *ckpt, ElementType::kF32);
  ASSERT_TRUE(viewed.ok()) << viewed.status().ToString();

  // The same tensors in the reference layout (by name: experts 0's down, gate, up, then 1's).
  std::vector<io::NamedTensor> all;
  for (const auto& name : ckpt->names()) all.push_back({name, *ckpt->Get(name)});
  const fs::path reference = dir / "reference";
  ASSERT_TRUE(io::WriteCheckpoint(reference, all).ok());
  auto ref = io::Checkpoint::Open(reference);
  ASSERT_TRUE(ref.ok());
  auto copied = LoadWeights(c, *ref, ElementType::kF32);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  // In bf16 the experts need converting, so they are copied from the in-order file too.
  auto converted = LoadWeights(c, *ckpt, ElementType::kBF16);
  ASSERT_TRUE(converted.ok()) << converted.status().ToString();

  const auto specs = WeightSpecs(c);
  int stacked = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].stacked.empty()) continue;
    ++stacked;
    const Literal& v = (*viewed)[i];
    const Literal& cp = (*copied)[i];
    ASSERT_EQ(v.dims(), specs[i].shape);
    ASSERT_EQ(cp.dims(), specs[i].shape);
    EXPECT_EQ(v.data(), ckpt->Get(specs[i].stacked[0])->data())
        << specs[i].name << ": not a view of the file's first expert";
    EXPECT_NE(cp.data(), ref->Get(specs[i].stacked[0])->data()) << specs[i].name;
    EXPECT_NE((*converted)[i].data(), ckpt->Get(specs[i].stacked[0])->data()) << specs[i].name;
    EXPECT_EQ(std::memcmp(v.data(), cp.data(), v.byte_size()), 0) << specs[i].name;
  }
  EXPECT_EQ(stacked, 3);
  unsetenv("TLALOC_HUGE_PAGES");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tlaloc::models
