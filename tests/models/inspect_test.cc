#include "tlaloc/models/inspect.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/family.h"

namespace tlaloc::models {
namespace {

using io::CheckpointWriteOptions;
using io::ModelConfig;
using io::NamedTensor;
using io::ParseModelConfig;
using io::testing::TempDir;

ModelConfig TinyConfig(bool moe) {
  auto c = ParseModelConfig(moe ? R"({"model_type": "qwen3_moe", "vocab_size": 16,
      "hidden_size": 8, "intermediate_size": 12, "moe_intermediate_size": 4,
      "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
      "head_dim": 4, "num_experts": 4, "num_experts_per_tok": 2, "torch_dtype": "bfloat16"})"
                                : R"({"model_type": "qwen3", "vocab_size": 16,
      "hidden_size": 8, "intermediate_size": 12, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
      "tie_word_embeddings": true, "eos_token_id": 3, "torch_dtype": "bfloat16"})");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

// Every expected tensor (optional ones too), bf16 except the norms in f32.
std::vector<NamedTensor> TensorsFor(const ModelConfig& c) {
  std::vector<NamedTensor> out;
  for (const auto& e : ExpectedTensors(c)) {
    bool norm = e.name.find("norm") != std::string::npos;
    out.push_back(
        {e.name, Literal(TensorType(norm ? ElementType::kF32 : ElementType::kBF16, e.shape))});
  }
  return out;
}

TEST(Inspect, MatchingCheckpointIsSummarised) {
  TempDir dir;
  ModelConfig c = TinyConfig(false);
  auto tensors = TensorsFor(c);
  ASSERT_TRUE(WriteCheckpoint(dir.path(), tensors).ok());
  ASSERT_TRUE(WriteModelConfig(dir.path(), c).ok());
  io::testing::WriteText(dir / "generation_config.json", R"({"eos_token_id": [3, 4], "top_k": 7})");

  auto r = InspectCheckpoint(dir.path());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->matches());
  EXPECT_TRUE(r->tied_head_stored);
  EXPECT_EQ(r->num_tensors, static_cast<int64_t>(tensors.size()));
  EXPECT_EQ(r->parameter_count, ParameterCount(c));
  int64_t norm_count = 0, norm_elements = 0, elements = 0;
  for (const auto& t : tensors) {
    elements += t.value.num_elements();
    if (t.value.element_type() == ElementType::kF32) {
      ++norm_count;
      norm_elements += t.value.num_elements();
    }
  }
  EXPECT_EQ(r->stored_elements, elements);
  EXPECT_EQ(r->stored_elements, *r->parameter_count + 16 * 8) << "stored tied head counted once";
  ASSERT_EQ(r->by_dtype.size(), 2u);
  EXPECT_EQ(r->by_dtype.at(ElementType::kF32).tensors, norm_count);
  EXPECT_EQ(r->by_dtype.at(ElementType::kF32).bytes, static_cast<uint64_t>(norm_elements * 4));
  EXPECT_EQ(r->by_dtype.at(ElementType::kBF16).elements, elements - norm_elements);
  ASSERT_TRUE(r->generation.has_value());
  EXPECT_EQ(r->generation->top_k, 7);

  std::string text = FormatInspectText(*r);
  for (const char* frag : {"Qwen3ForCausalLM", "hidden 8", "layers 2", "tied head", "BF16", "F32",
                           "check:        OK", "top_k 7"})
    EXPECT_NE(text.find(frag), std::string::npos) << frag << "\n" << text;

  auto j = nlohmann::json::parse(FormatInspectJson(*r));
  EXPECT_EQ(j["architecture"], "Qwen3ForCausalLM");
  EXPECT_EQ(j["parameter_count"].get<int64_t>(), ParameterCount(c));
  EXPECT_EQ(j["num_tensors"].get<int64_t>(), r->num_tensors);
  EXPECT_EQ(j["by_dtype"]["F32"]["tensors"].get<int64_t>(), norm_count);
  EXPECT_TRUE(j["matches"].get<bool>());
  EXPECT_TRUE(j["missing"].empty());
  EXPECT_EQ(j["config"]["hidden_size"], 8);
}

TEST(Inspect, DifferencesFromTheArchitectureAreListed) {
  TempDir dir;
  ModelConfig c = TinyConfig(true);
  auto tensors = TensorsFor(c);
  // Drop an expert weight, reshape the router, add a stray tensor. The head is untied, so
  // dropping it makes it missing too.
  std::vector<NamedTensor> edited;
  for (auto& t : tensors) {
    if (t.name == "model.layers.1.mlp.experts.3.down_proj.weight" || t.name == "lm_head.weight")
      continue;
    if (t.name == "model.layers.0.mlp.gate.weight")
      t.value = Literal(TensorType(ElementType::kBF16, {8, 4}));
    edited.push_back(t);
  }
  edited.push_back({"model.layers.0.mlp.shared_expert.weight", Literal::Scalar<float>(0)});
  CheckpointWriteOptions options;
  options.max_shard_bytes = 256;
  ASSERT_TRUE(WriteCheckpoint(dir.path(), edited, options).ok());
  ASSERT_TRUE(WriteModelConfig(dir.path(), c).ok());

  auto r = InspectCheckpoint(dir.path());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->matches());
  EXPECT_TRUE(r->index_file.has_value());
  EXPECT_GT(r->shard_files.size(), 1u);
  EXPECT_EQ(r->missing, (std::vector<std::string>{"model.layers.1.mlp.experts.3.down_proj.weight",
                                                  "lm_head.weight"}));
  ASSERT_EQ(r->wrong_shape.size(), 1u);
  EXPECT_EQ(r->wrong_shape[0].name, "model.layers.0.mlp.gate.weight");
  EXPECT_EQ(r->wrong_shape[0].expected, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(r->wrong_shape[0].actual, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(r->unexpected, std::vector<std::string>{"model.layers.0.mlp.shared_expert.weight"});

  std::string text = FormatInspectText(*r, 1);
  for (const char* frag :
       {"Qwen3MoeForCausalLM", "4 experts, 2 per token", "missing (2):", "... and 1 more",
        "expected [4, 8], found [8, 4]", "unexpected (1):", "MISMATCH",
        "shards via model.safetensors.index.json"})
    EXPECT_NE(text.find(frag), std::string::npos) << frag << "\n" << text;
  auto j = nlohmann::json::parse(FormatInspectJson(*r));
  EXPECT_FALSE(j["matches"].get<bool>());
  EXPECT_EQ(j["missing"].size(), 2u);
  EXPECT_EQ(j["wrong_shape"][0]["actual"], nlohmann::json({8, 4}));
}

TEST(Inspect, WithoutConfigOnlyTensorsAreSummarised) {
  TempDir dir;
  ASSERT_TRUE(
      WriteCheckpoint(dir.path(), std::vector<NamedTensor>{{"w", Literal::Scalar<double>(1)}})
          .ok());
  auto r = InspectCheckpoint(dir.path());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->config.has_value());
  EXPECT_TRUE(r->matches());
  EXPECT_NE(FormatInspectText(*r).find("unknown (no config.json)"), std::string::npos);
  EXPECT_TRUE(nlohmann::json::parse(FormatInspectJson(*r))["architecture"].is_null());
}

TEST(Inspect, BadFoldersAndFilesAreErrors) {
  TempDir dir;
  EXPECT_ERROR_CONTAINS(InspectCheckpoint(dir / "nowhere"), "nowhere", "no such file or folder");
  EXPECT_ERROR_CONTAINS(InspectCheckpoint(dir.path()), "no model.safetensors");
  ASSERT_TRUE(
      WriteCheckpoint(dir.path(), std::vector<NamedTensor>{{"w", Literal::Scalar<float>(1)}}).ok());
  io::testing::WriteText(dir / "config.json", R"({"architectures": ["GPT2LMHeadModel"]})");
  EXPECT_ERROR_CONTAINS(InspectCheckpoint(dir.path()), "config.json",
                        "architecture \"GPT2LMHeadModel\" is not a model family Tlaloc runs");
  io::testing::WriteText(dir / "config.json", R"({"model_type": "qwen3"})");
  io::testing::WriteText(dir / "generation_config.json", R"({"top_p": 2})");
  EXPECT_ERROR_CONTAINS(InspectCheckpoint(dir.path()), "generation_config.json", "top_p");
  io::testing::WriteBytes(dir / "model.safetensors", io::testing::BuildSafetensors("{\"a\":"));
  EXPECT_ERROR_CONTAINS(InspectCheckpoint(dir.path()), "model.safetensors", "not valid JSON");
}

}  // namespace
}  // namespace tlaloc::models
