// LoadWeights puts a float checkpoint's weights read whole on 2 MiB pages
// (Checkpoint::CopyOntoHugePages) with their bits, leaves weights read by rows (an untied
// embedding) as views of the file, and leaves an int8 checkpoint's matrices as views (the q8_0
// kernels repack them and give back the originals' file pages, which a copy would not allow).
#include "tlaloc/models/load_weights.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "io/io_test_util.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/quantize.h"
#include "tlaloc/support/huge_pages.h"

namespace tlaloc::models {
namespace {

using io::testing::TempDir;

TEST(LoadWeights, FloatWeightsReadWholeGoOntoHugePagesInt8MatricesStayViews) {
  if (!HugePagesOffered()) GTEST_SKIP() << "this kernel offers no transparent huge pages";
  // A 16 MiB f32 LM head (4 MiB in int8), untied from the embedding.
  auto c = io::ParseModelConfig(R"({"model_type": "qwen3", "vocab_size": 32768,
      "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 1,
      "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
      "max_position_embeddings": 64, "eos_token_id": 3, "torch_dtype": "float32",
      "tie_word_embeddings": false})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  TempDir tmp;
  ASSERT_TRUE(
      WriteModelFolder(*c, tmp / "f32", RandomWeights(*c, 3, ElementType::kF32), {}, {}).ok());
  ASSERT_TRUE(QuantizeCheckpoint(tmp / "f32", tmp / "int8").ok());
  unsetenv("TLALOC_HUGE_PAGES");

  auto ckpt = io::Checkpoint::Open(tmp / "f32");
  ASSERT_TRUE(ckpt.ok());
  auto weights = LoadWeights(*c, *ckpt, ElementType::kF32);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  const auto specs = WeightSpecs(*c);
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < specs.size(); ++i) at[specs[i].name] = i;
  ASSERT_TRUE(at.count("lm_head.weight") && at.count("model.embed_tokens.weight"));
  const Literal& head = weights->at(at["lm_head.weight"]);
  const Literal head_view = *ckpt->Get("lm_head.weight");
  EXPECT_NE(head.data(), head_view.data());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(head.data()) % 64, 0u);
  EXPECT_TRUE(head.BitwiseEquals(head_view));
  EXPECT_EQ(weights->at(at["model.embed_tokens.weight"]).data(),
            ckpt->Get("model.embed_tokens.weight")->data());

  auto q = io::LoadModelConfig(tmp / "int8");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto qckpt = io::Checkpoint::Open(tmp / "int8");
  ASSERT_TRUE(qckpt.ok());
  auto qweights = LoadWeights(*q, *qckpt, ElementType::kBF16);
  ASSERT_TRUE(qweights.ok()) << qweights.status().ToString();
  const auto qspecs = WeightSpecs(*q);
  for (size_t i = 0; i < qspecs.size(); ++i) {
    if (qspecs[i].name == "lm_head.weight") {
      ASSERT_TRUE(qspecs[i].fixed_type.has_value());
      EXPECT_EQ(qweights->at(i).data(), qckpt->Get("lm_head.weight")->data());
    }
  }
}

}  // namespace
}  // namespace tlaloc::models
