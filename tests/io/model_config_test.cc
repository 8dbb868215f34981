#include "tlaloc/io/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "io_test_util.h"
#include "tlaloc/ir/type.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::io {
namespace {

using testing::TempDir;

// Qwen3-0.6B's config.json as released (docs/FACTS-QWEN3.md lists its values).
constexpr const char* kQwen3_0_6B = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// The shape of a released Qwen3-MoE config (Qwen3-30B-A3B-like, fewer layers).
constexpr const char* kQwen3Moe = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
  "hidden_size": 2048, "head_dim": 128, "intermediate_size": 6144, "moe_intermediate_size": 768,
  "num_hidden_layers": 4, "num_attention_heads": 32, "num_key_value_heads": 4,
  "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": true,
  "decoder_sparse_step": 1, "mlp_only_layers": [], "rope_theta": 1000000.0,
  "max_position_embeddings": 40960, "vocab_size": 151936, "tie_word_embeddings": false,
  "eos_token_id": [151645, 151643], "bos_token_id": 151643, "torch_dtype": "bfloat16",
  "router_aux_loss_coef": 0.001, "output_router_logits": false
})";

TEST(ModelConfig, ParsesQwen3_0_6B) {
  auto c = ParseModelConfig(kQwen3_0_6B);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->architecture, models::qwen3::kQwen3);
  EXPECT_EQ(c->hidden_size, 1024);
  EXPECT_EQ(c->num_hidden_layers, 28);
  EXPECT_EQ(c->num_attention_heads, 16);
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->num_key_value_groups(), 2);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->intermediate_size, 3072);
  EXPECT_EQ(c->max_position_embeddings, 40960);
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FALSE(c->rope_scaling.has_value());
  EXPECT_EQ(c->dtype, ElementType::kBF16);
  EXPECT_EQ(c->bos_token_id, 151643);
  EXPECT_EQ(c->eos_token_ids, std::vector<int64_t>{151645});
  EXPECT_FALSE(c->SlidingWindow().has_value());
  EXPECT_EQ(c->layer_types.size(), 28u);
  EXPECT_FALSE(c->IsSlidingLayer(27));
  EXPECT_EQ(nlohmann::json::parse(c->extra_json)["transformers_version"], "4.51.0");
  // FACTS: 596,049,920 parameters with the head tied.
}

TEST(ModelConfig, AbsentFieldsTakeTransformersDefaults) {
  auto c = ParseModelConfig(R"({"model_type": "qwen3"})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  // Qwen3Config's class defaults.
  EXPECT_EQ(c->vocab_size, 151936);
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->intermediate_size, 22016);
  EXPECT_EQ(c->num_hidden_layers, 32);
  EXPECT_EQ(c->num_attention_heads, 32);
  EXPECT_EQ(c->num_key_value_heads, 32);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->hidden_act, "silu");
  EXPECT_EQ(c->max_position_embeddings, 32768);
  EXPECT_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->rope_theta, 10000.0);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(models::qwen3::SlidingWindow(*c).use_sliding_window);
  EXPECT_FALSE(models::qwen3::SlidingWindow(*c).sliding_window.has_value());
  EXPECT_EQ(models::qwen3::SlidingWindow(*c).max_window_layers, 28);
  EXPECT_EQ(c->attention_dropout, 0.0);
  EXPECT_FALSE(c->dtype.has_value());
  EXPECT_TRUE(c->eos_token_ids.empty());
  EXPECT_FALSE(c->bos_token_id.has_value());

  // Qwen3MoeConfig's defaults differ, and it has no head_dim (hidden / heads).
  auto m = ParseModelConfig(R"({"architectures": ["Qwen3MoeForCausalLM"]})");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->hidden_size, 2048);
  EXPECT_EQ(m->intermediate_size, 6144);
  EXPECT_EQ(m->num_hidden_layers, 24);
  EXPECT_EQ(m->num_attention_heads, 32);
  EXPECT_EQ(m->num_key_value_heads, 4);
  EXPECT_EQ(m->head_dim, 2048 / 32);
  EXPECT_EQ(models::qwen3::Moe(*m).decoder_sparse_step, 1);
  EXPECT_EQ(models::qwen3::Moe(*m).moe_intermediate_size, 768);
  EXPECT_EQ(models::qwen3::Moe(*m).num_experts_per_tok, 8);
  EXPECT_EQ(models::qwen3::Moe(*m).num_experts, 128);
  EXPECT_FALSE(models::qwen3::Moe(*m).norm_topk_prob);
  EXPECT_FALSE(models::qwen3::Moe(*m).output_router_logits);
  EXPECT_EQ(models::qwen3::Moe(*m).router_aux_loss_coef, 0.001);
  EXPECT_TRUE(models::qwen3::Moe(*m).mlp_only_layers.empty());
  auto m2 = ParseModelConfig(R"({"model_type": "qwen3_moe", "hidden_size": 1024,
                                 "num_attention_heads": 8})");
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ(m2->head_dim, 128);
}

TEST(ModelConfig, NullsAndAlternateSpellings) {
  auto c = ParseModelConfig(R"({"model_type": "qwen3", "num_attention_heads": 8,
      "num_key_value_heads": null, "head_dim": null, "hidden_size": 512, "dtype": "float32",
      "eos_token_id": [1, 2], "bos_token_id": null, "pad_token_id": 0,
      "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->dtype, ElementType::kF32);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(c->bos_token_id.has_value());
  EXPECT_EQ(c->pad_token_id, 0);
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_FALSE(c->rope_scaling.has_value());

  auto yarn = ParseModelConfig(R"({"model_type": "qwen3", "rope_scaling":
      {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})");
  ASSERT_TRUE(yarn.ok()) << yarn.status().message();
  ASSERT_TRUE(yarn->rope_scaling.has_value());
  EXPECT_EQ(yarn->rope_scaling->rope_type, "yarn");
  EXPECT_EQ(yarn->rope_scaling->factor, 4.0);
  EXPECT_EQ(yarn->rope_scaling->original_max_position_embeddings, 32768);

  auto local = ParseModelConfig(R"({"model_type": "qwen3_moe", "num_local_experts": 16})");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(models::qwen3::Moe(*local).num_experts, 16);
}

TEST(ModelConfig, SlidingWindowLayersFollowTransformersRule) {
  auto c = ParseModelConfig(R"({"model_type": "qwen3", "num_hidden_layers": 4,
      "use_sliding_window": true, "sliding_window": 128, "max_window_layers": 2})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->SlidingWindow(), 128);
  EXPECT_EQ(models::qwen3::SlidingWindow(*c).max_window_layers, 2);
  EXPECT_EQ(c->layer_types, (std::vector<std::string>{"full_attention", "full_attention",
                                                      "sliding_attention", "sliding_attention"}));
  EXPECT_FALSE(c->IsSlidingLayer(1));
  EXPECT_TRUE(c->IsSlidingLayer(2));
  // Without use_sliding_window the window is dropped, as transformers does.
  auto off = ParseModelConfig(R"({"model_type": "qwen3", "sliding_window": 128})");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->SlidingWindow().has_value());
  EXPECT_FALSE(models::qwen3::SlidingWindow(*off).sliding_window.has_value());
}

TEST(ModelConfig, MoeLayerRule) {
  auto c = ParseModelConfig(R"({"model_type": "qwen3_moe", "num_hidden_layers": 6,
      "decoder_sparse_step": 2, "mlp_only_layers": [3]})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::vector<bool> moe;
  for (int i = 0; i < 6; ++i) moe.push_back(c->IsMoeLayer(i));
  // (layer + 1) % 2 == 0 -> layers 1, 3, 5; layer 3 is forced dense.
  EXPECT_EQ(moe, (std::vector<bool>{false, true, false, false, false, true}));
  auto none = ParseModelConfig(R"({"model_type": "qwen3_moe", "num_experts": 0})");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->IsMoeLayer(0));
}

TEST(ModelConfig, InconsistentOrMistypedConfigsAreRefused) {
  struct Case {
    std::string json;
    std::vector<const char*> fragments;
  };
  std::vector<Case> cases = {
      {"{", {"my.json", "not valid JSON"}},
      {"[1]", {"must be a JSON object"}},
      {"{}", {"neither \"architectures\" nor \"model_type\""}},
      {R"({"architectures": ["GPT2LMHeadModel"]})",
       {"architecture \"GPT2LMHeadModel\"", "not a model family Tlaloc runs",
        "known: llama, qwen3, qwen3_moe"}},
      {R"({"model_type": "gpt2"})", {"model_type \"gpt2\" is not a model family"}},
      {R"({"architectures": ["LlamaForCausalLM"], "model_type": "qwen3"})", {"does not match"}},
      {R"({"model_type": "llama", "rope_parameters": {"rope_type": "llama3", "factor": 8,
          "low_freq_factor": 0}})",
       {"rope_parameters.low_freq_factor must be a positive number"}},
      {R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3_moe"})", {"does not match"}},
      {R"({"model_type": "qwen3", "num_attention_heads": 16, "num_key_value_heads": 3})",
       {"num_attention_heads (16)", "multiple of num_key_value_heads (3)"}},
      {R"({"model_type": "qwen3", "hidden_size": 0})", {"hidden_size must be positive, got 0"}},
      {R"({"model_type": "qwen3", "vocab_size": -5})", {"vocab_size must be positive"}},
      {R"({"model_type": "qwen3", "hidden_size": "big"})",
       {"hidden_size must be an integer", "string \"big\""}},
      {R"({"model_type": "qwen3", "num_hidden_layers": 2.5})",
       {"num_hidden_layers must be an integer", "2.5"}},
      {R"({"model_type": "qwen3", "tie_word_embeddings": 1})",
       {"tie_word_embeddings must be true or false"}},
      {R"({"model_type": "qwen3", "rms_norm_eps": "small"})", {"rms_norm_eps must be a number"}},
      {R"({"model_type": "qwen3", "head_dim": 127})", {"head_dim must be even"}},
      {R"({"model_type": "qwen3", "hidden_act": "gelu"})", {"hidden_act \"gelu\""}},
      {R"({"model_type": "qwen3", "torch_dtype": "float8_e4m3fn"})",
       {"torch_dtype \"float8_e4m3fn\" is not supported"}},
      {R"({"model_type": "qwen3", "eos_token_id": [1, "x"]})", {"eos_token_id[1]"}},
      {R"({"model_type": "qwen3", "eos_token_id": -1})", {"eos_token_id -1 is negative"}},
      {R"({"model_type": "qwen3", "quantization_config": {}})", {"quantization_config"}},
      {R"({"model_type": "qwen3", "num_hidden_layers": 2, "layer_types": ["full_attention"]})",
       {"layer_types has 1 entries for 2 layers"}},
      {R"({"model_type": "qwen3", "num_hidden_layers": 1, "layer_types": ["local"]})",
       {"layer_types[0] \"local\""}},
      {R"({"model_type": "qwen3", "use_sliding_window": true, "sliding_window": null})",
       {"sliding_window is not positive"}},
      {R"({"model_type": "qwen3", "rope_scaling": {"rope_type": "yarn", "factor": -1}})",
       {"rope_scaling.factor must be a positive number"}},
      {R"({"model_type": "qwen3", "rope_theta": 10, "rope_parameters": {"rope_theta": 20}})",
       {"disagree"}},
      {R"({"model_type": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 8})",
       {"num_experts_per_tok (8) exceeds num_experts (4)"}},
      {R"({"model_type": "qwen3_moe", "moe_intermediate_size": 0})",
       {"moe_intermediate_size must be positive"}},
      {R"({"model_type": "qwen3_moe", "num_hidden_layers": 2, "mlp_only_layers": [2]})",
       {"mlp_only_layers entry 2"}},
      {R"({"model_type": "qwen3_moe", "hidden_size": 100, "num_attention_heads": 3})",
       {"head_dim is absent", "hidden_size (100)"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.json);
    auto r = ParseModelConfig(c.json, "my.json");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message().rfind("my.json: ", 0), 0u) << r.status().message();
    for (const char* frag : c.fragments)
      EXPECT_NE(r.status().message().find(frag), std::string::npos)
          << "\"" << r.status().message() << "\" lacks \"" << frag << "\"";
  }
}

TEST(ModelConfig, WriterRoundTripsAndKeepsUnknownFields) {
  for (const char* text : {kQwen3_0_6B, kQwen3Moe}) {
    auto c = ParseModelConfig(text);
    ASSERT_TRUE(c.ok()) << c.status().message();
    std::string written = ModelConfigToJson(*c);
    auto j = nlohmann::json::parse(written);
    EXPECT_EQ(j["architectures"][0], std::string(ArchitectureClassName(c->architecture)));
    EXPECT_EQ(j["torch_dtype"], "bfloat16");
    auto back = ParseModelConfig(written);
    ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << written;
    EXPECT_EQ(ModelConfigToJson(*back), written);
    EXPECT_EQ(back->head_dim, c->head_dim);
    EXPECT_EQ(back->eos_token_ids, c->eos_token_ids);
    EXPECT_EQ(models::qwen3::Moe(*back).num_experts, models::qwen3::Moe(*c).num_experts);
    EXPECT_EQ(models::qwen3::Moe(*back).norm_topk_prob, models::qwen3::Moe(*c).norm_topk_prob);
    EXPECT_EQ(back->extra_json, c->extra_json);
  }
  // layer_types is written only when it differs from the rule the other fields imply.
  auto derived = ParseModelConfig(kQwen3_0_6B);
  ASSERT_TRUE(derived.ok());
  EXPECT_FALSE(nlohmann::json::parse(ModelConfigToJson(*derived)).contains("layer_types"));
  auto custom = ParseModelConfig(R"({"model_type": "qwen3", "num_hidden_layers": 2,
      "use_sliding_window": true, "layer_types": ["sliding_attention", "full_attention"]})");
  ASSERT_TRUE(custom.ok()) << custom.status().message();
  auto custom_back = ParseModelConfig(ModelConfigToJson(*custom));
  ASSERT_TRUE(custom_back.ok());
  EXPECT_EQ(custom_back->layer_types, custom->layer_types);

  TempDir dir;
  auto c = ParseModelConfig(kQwen3Moe);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(WriteModelConfig(dir.path(), *c).ok());
  auto loaded = LoadModelConfig(dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(ModelConfigToJson(*loaded), ModelConfigToJson(*c));

  ModelConfig bad = *c;
  models::qwen3::MutableMoe(bad).num_experts_per_tok = 500;
  EXPECT_ERROR_CONTAINS(WriteModelConfig(dir / "bad.json", bad), "num_experts_per_tok");
  EXPECT_ERROR_CONTAINS(LoadModelConfig(dir / "missing"), "missing", "cannot open");
}

TEST(GenerationConfig, ParsesQwen3SettingsAndDefaults) {
  auto g = ParseGenerationConfig(R"({"bos_token_id": 151643, "do_sample": true,
      "eos_token_id": [151645, 151643], "pad_token_id": 151643, "temperature": 0.6,
      "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->bos_token_id, 151643);
  EXPECT_EQ(g->eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(g->pad_token_id, 151643);
  EXPECT_TRUE(g->do_sample);
  EXPECT_EQ(g->temperature, 0.6);
  EXPECT_EQ(g->top_k, 20);
  EXPECT_EQ(g->top_p, 0.95);
  EXPECT_EQ(g->repetition_penalty, 1.0);
  EXPECT_FALSE(g->max_new_tokens.has_value());

  auto d = ParseGenerationConfig("{}");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->do_sample);
  EXPECT_EQ(d->temperature, 1.0);
  EXPECT_EQ(d->top_k, 50);
  EXPECT_EQ(d->top_p, 1.0);
  EXPECT_EQ(d->max_length, 20);
  EXPECT_TRUE(d->eos_token_ids.empty());

  auto r = ParseGenerationConfig(R"({"eos_token_id": 7, "max_new_tokens": 32,
                                     "repetition_penalty": 1.1, "min_p": 0.05})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->eos_token_ids, std::vector<int64_t>{7});
  EXPECT_EQ(r->max_new_tokens, 32);
  EXPECT_EQ(r->repetition_penalty, 1.1);
  EXPECT_EQ(r->min_p, 0.05);
  auto back = ParseGenerationConfig(GenerationConfigToJson(*r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(GenerationConfigToJson(*back), GenerationConfigToJson(*r));
}

TEST(GenerationConfig, BadValuesAreRefused) {
  EXPECT_ERROR_CONTAINS(ParseGenerationConfig(R"({"top_p": 0})", "g.json"), "g.json", "top_p");
  EXPECT_ERROR_CONTAINS(ParseGenerationConfig(R"({"temperature": -1})"), "temperature");
  EXPECT_ERROR_CONTAINS(ParseGenerationConfig(R"({"top_k": -2})"), "top_k");
  EXPECT_ERROR_CONTAINS(ParseGenerationConfig(R"({"do_sample": "yes"})"),
                        "do_sample must be true or false");
  EXPECT_ERROR_CONTAINS(ParseGenerationConfig(R"({"max_new_tokens": 0})"), "max_new_tokens");
  EXPECT_ERROR_CONTAINS(ParseGenerationConfig(R"({"repetition_penalty": 0})"),
                        "repetition_penalty");
  EXPECT_ERROR_CONTAINS(ParseGenerationConfig("nope"), "not valid JSON");
}

TEST(GenerationConfig, FallsBackToTheModelsTokenIds) {
  TempDir dir;
  auto model = ParseModelConfig(kQwen3Moe);
  ASSERT_TRUE(model.ok());
  auto g = LoadGenerationConfigOrDefault(dir.path(), *model);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->eos_token_ids, model->eos_token_ids);
  EXPECT_EQ(g->bos_token_id, model->bos_token_id);
  testing::WriteText(dir / "generation_config.json", R"({"eos_token_id": 5, "top_k": 3})");
  auto from_file = LoadGenerationConfigOrDefault(dir.path(), *model);
  ASSERT_TRUE(from_file.ok());
  EXPECT_EQ(from_file->eos_token_ids, std::vector<int64_t>{5});
  EXPECT_EQ(from_file->top_k, 3);
}

}  // namespace
}  // namespace tlaloc::io

namespace tlaloc::io {
namespace {

// Llama's share of config.json comes from its family (models/llama/): LlamaConfig's defaults
// (head_dim hidden / heads, no sliding window fields), mlp_bias, and Llama 3's rope scaling as
// transformers 5 writes it (rope_parameters), kept through a round trip.
TEST(ModelConfig, LlamaConfigThroughItsFamily) {
  auto c = ParseModelConfig(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "mlp_bias": false,
      "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture.model_type, "llama");
  EXPECT_EQ(c->architecture.class_name, "LlamaForCausalLM");
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->vocab_size, 32000);  // LlamaConfig's, not Qwen3Config's 151936
  EXPECT_EQ(c->intermediate_size, 11008);
  EXPECT_EQ(c->rope_theta, 500000.0);
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->rope_type, "llama3");
  EXPECT_EQ(c->rope_scaling->low_freq_factor, 1.0);
  EXPECT_EQ(c->rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c->rope_scaling->original_max_position_embeddings, 8192);
  const auto j = nlohmann::json::parse(ModelConfigToJson(*c));
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["mlp_bias"], false);
  EXPECT_FALSE(j.contains("use_sliding_window")) << "a Qwen3 field in a Llama config";
  EXPECT_FALSE(c->SlidingWindow().has_value());
  auto again = ParseModelConfig(j.dump());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(again->head_dim, 16);
}

// The sliding window is a Qwen3 field (models/qwen3.h), so a Llama config has none: a sliding
// layer is refused, and Qwen3's window fields in a Llama config are not its own (kept as
// unknown fields, not read).
TEST(ModelConfig, LlamaHasNoSlidingWindow) {
  EXPECT_ERROR_CONTAINS(ParseModelConfig(R"({"model_type": "llama", "num_hidden_layers": 2,
      "layer_types": ["full_attention", "sliding_attention"]})"),
                        "layer_types[1] is sliding_attention but no sliding_window is set");
  auto c = ParseModelConfig(R"({"model_type": "llama", "num_hidden_layers": 2,
      "use_sliding_window": true, "sliding_window": 16, "max_window_layers": 0})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->SlidingWindow().has_value());
  EXPECT_FALSE(c->IsSlidingLayer(1));
  EXPECT_EQ(nlohmann::json::parse(c->extra_json)["sliding_window"], 16);
}

}  // namespace
}  // namespace tlaloc::io
