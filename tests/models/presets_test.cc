// Presets as data (src/models/presets/*.json): every file parses, passes the family's checks and
// builds a decode step; the four presets that were code keep the exact configs they had then.
#include <gtest/gtest.h>

#include <string>

#include "tlaloc/io/model_config.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::models {
namespace {

TEST(Presets, EveryPresetParsesChecksAndBuildsADecodeStep) {
  const auto names = PresetNames();
  ASSERT_GE(names.size(), 5u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    auto c = PresetConfig(name);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->extra_json, "{}") << "a field no family reads";
    ASSERT_TRUE(CheckSupported(*c).ok()) << CheckSupported(*c).ToString();
    EXPECT_GT(ParameterCount(*c), 0);
    StepShape shape;
    shape.kind = StepKind::kDecode;
    shape.batch = 1;
    shape.max_len = 8;
    auto step = BuildStep(*c, shape);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
  }
}

// The configs src/models/init.cc built in code before the presets became files.
io::ModelConfig AsCode(const std::string& name) {
  const bool moe = name == "tiny-moe" || name == "qwen3-30b-a3b-2l";
  io::ModelConfig c =
      io::DefaultModelConfig(moe ? models::qwen3::kQwen3Moe : models::qwen3::kQwen3);
  c.vocab_size = 151936;
  c.bos_token_id = 151643;
  c.eos_token_ids = {151645};
  c.pad_token_id = 151643;
  c.rope_theta = 1000000.0;
  if (!moe || name == "qwen3-30b-a3b-2l") {
    c.rms_norm_eps = 1e-6;
    c.initializer_range = 0.02;
  }
  const bool tiny = name == "tiny" || name == "tiny-moe";
  if (tiny) {
    c.hidden_size = 64;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 16;
    c.intermediate_size = 128;
    c.max_position_embeddings = 4096;
    models::qwen3::MutableSlidingWindow(c).max_window_layers = 2;
    c.tie_word_embeddings = false;
    c.dtype = ElementType::kF32;
    if (moe) {
      models::qwen3::MoeConfig& moe_fields = models::qwen3::MutableMoe(c);
      moe_fields.num_experts = 4;
      moe_fields.num_experts_per_tok = 2;
      moe_fields.moe_intermediate_size = 64;
      moe_fields.norm_topk_prob = true;
    }
  } else if (name == "qwen3-30b-a3b-2l") {
    c.hidden_size = 2048;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 4;
    c.head_dim = 128;
    c.intermediate_size = 6144;
    models::qwen3::MoeConfig& moe_fields = models::qwen3::MutableMoe(c);
    moe_fields.moe_intermediate_size = 768;
    moe_fields.num_experts = 128;
    moe_fields.num_experts_per_tok = 8;
    moe_fields.norm_topk_prob = true;
    c.max_position_embeddings = 40960;
    models::qwen3::MutableSlidingWindow(c).max_window_layers = 2;
    c.tie_word_embeddings = false;
    c.dtype = ElementType::kBF16;
  } else {  // qwen3-0.6b
    c.hidden_size = 1024;
    c.num_hidden_layers = 28;
    c.num_attention_heads = 16;
    c.num_key_value_heads = 8;
    c.head_dim = 128;
    c.intermediate_size = 3072;
    c.max_position_embeddings = 40960;
    models::qwen3::MutableSlidingWindow(c).max_window_layers = 28;
    c.tie_word_embeddings = true;
    c.dtype = ElementType::kBF16;
  }
  c.layer_types.assign(c.num_hidden_layers, "full_attention");
  return c;
}

TEST(Presets, TheFilesKeepTheConfigsThePresetsHadAsCode) {
  for (const std::string name : {"tiny", "tiny-moe", "qwen3-0.6b", "qwen3-30b-a3b-2l"}) {
    SCOPED_TRACE(name);
    auto c = PresetConfig(name);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(io::ModelConfigToJson(*c), io::ModelConfigToJson(AsCode(name)));
  }
}

TEST(Presets, AnUnknownNameListsTheKnownOnes) {
  auto c = PresetConfig("gpt2");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "unknown preset \"gpt2\" (expected one of: qwen3-0.6b, qwen3-30b-a3b-2l, tiny, "
            "tiny-llama, tiny-moe)");
}

}  // namespace
}  // namespace tlaloc::models
