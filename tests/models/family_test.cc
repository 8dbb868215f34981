// The model family registry: lookups by model_type, refusals naming the known families, and
// the entries' pieces agreeing with each other.
#include "tlaloc/models/family.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "models/qwen3_reference.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc {
namespace {

TEST(ModelFamily, KnownTypesAndLookups) {
  auto types = models::KnownModelTypes();
  ASSERT_EQ(types.size(), 3u);
  EXPECT_EQ(types[0], "llama");
  EXPECT_EQ(types[1], "qwen3");
  EXPECT_EQ(types[2], "qwen3_moe");
  auto dense = models::FindFamily("qwen3");
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ((*dense)->architecture, "Qwen3ForCausalLM");
  io::ModelConfig moe = io::DefaultModelConfig(models::qwen3::kQwen3Moe);
  auto family = models::FamilyOf(moe);
  ASSERT_TRUE(family.ok());
  EXPECT_EQ((*family)->model_type, "qwen3_moe");
}

TEST(ModelFamily, UnknownTypeNamesTheKnownOnes) {
  auto gpt2 = models::FindFamily("gpt2");
  ASSERT_FALSE(gpt2.ok());
  const std::string msg(gpt2.status().message());
  EXPECT_NE(msg.find("\"gpt2\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("known: llama, qwen3, qwen3_moe"), std::string::npos) << msg;
}

// Every family's weight specs say how tensor parallelism splits them (shard/plan.cc reads it):
// column-parallel q/k/v/gate/up on their rows, row-parallel o/down on their columns.
TEST(ModelFamily, WeightSpecsCarryTheirTensorParallelDimension) {
  for (std::string_view type : models::KnownModelTypes()) {
    io::ModelConfig c = io::DefaultModelConfig({std::string(type), ""});
    c.num_hidden_layers = 1;
    c.layer_types.assign(1, "full_attention");
    if (c.is_moe()) {
      models::qwen3::MutableMoe(c).num_experts = 2;
      models::qwen3::MutableMoe(c).num_experts_per_tok = 1;
    }
    int split = 0;
    for (const auto& spec : models::WeightSpecs(c)) {
      const bool row = spec.name.find("o_proj") != std::string::npos ||
                       spec.name.find("down_proj") != std::string::npos;
      const bool col = spec.name.find("q_proj") != std::string::npos ||
                       spec.name.find("k_proj") != std::string::npos ||
                       spec.name.find("v_proj") != std::string::npos ||
                       spec.name.find("gate_proj") != std::string::npos ||
                       spec.name.find("up_proj") != std::string::npos;
      const bool experts = spec.name.find(".experts.") != std::string::npos;
      const int64_t want = experts || col ? 0 : row ? 1 : -1;
      EXPECT_EQ(spec.tensor_parallel_dim, want) << type << " " << spec.name;
      split += spec.tensor_parallel_dim >= 0;
    }
    EXPECT_GE(split, 7) << type;
  }
}

TEST(ModelFamily, EntryPiecesAgree) {
  io::ModelConfig c = testing::TinyConfig(false, 4, 2, 8);
  auto family = models::FamilyOf(c);
  ASSERT_TRUE(family.ok());
  const models::ModelFamily& f = **family;
  auto specs = f.weight_specs(c);
  ASSERT_FALSE(specs.empty());
  EXPECT_EQ(specs.front().name, f.embedding_weight);
  models::StepShape shape;
  shape.kind = models::StepKind::kPrefill;
  shape.batch = 2;
  shape.prompt_len = 4;
  shape.num_slots = 3;
  shape.max_len = 8;
  auto program = f.build_step(c, shape, nullptr, nullptr);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const auto& sig = program->signature;
  // The signature names every argument of the entry function, weights first, in spec order.
  const Function* fn = program->module->functions().front().get();
  ASSERT_EQ(fn->entry().num_arguments(), static_cast<int>(sig.inputs.size()));
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(sig.inputs[i].port, models::Port::kWeight);
    EXPECT_EQ(sig.inputs[i].name, specs[i].name);
  }
  EXPECT_EQ(sig.inputs[sig.Input(models::Port::kSlots)].type.dims, std::vector<int64_t>{2});
  // Caches hold all three slots; each cache result updates its argument in place.
  const int k0 = sig.Input(models::Port::kKCache, 0);
  EXPECT_EQ(sig.inputs[k0].type.dims[0], 3);
  const int out_k0 = sig.Output(models::Port::kKCache, 0);
  EXPECT_EQ(sig.outputs[out_k0].aliased_input, k0);
  EXPECT_EQ(sig.outputs[sig.Output(models::Port::kLogits)].type.dims,
            (std::vector<int64_t>{2, c.vocab_size}));
  // A decode step has one row per slot.
  shape.kind = models::StepKind::kDecode;
  EXPECT_FALSE(f.build_step(c, shape, nullptr, nullptr).ok());
  shape.batch = 3;
  EXPECT_TRUE(f.build_step(c, shape, nullptr, nullptr).ok());
}

TEST(ModelFamily, ExpectedTensorsNameEveryParameter) {
  auto c = io::ParseModelConfig(R"({"model_type": "qwen3", "vocab_size": 10, "hidden_size": 8,
      "intermediate_size": 12, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 4, "tie_word_embeddings": true})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto tensors = models::ExpectedTensors(*c);
  EXPECT_EQ(tensors.size(), 3u + 2 * 11);
  std::map<std::string, models::ExpectedTensor> by_name;
  for (const auto& t : tensors) by_name[t.name] = t;
  EXPECT_EQ(by_name.size(), tensors.size()) << "names are unique";
  EXPECT_EQ(by_name["model.embed_tokens.weight"].shape, (std::vector<int64_t>{10, 8}));
  EXPECT_EQ(by_name["model.layers.1.self_attn.q_proj.weight"].shape, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(by_name["model.layers.1.self_attn.k_proj.weight"].shape, (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(by_name["model.layers.0.self_attn.o_proj.weight"].shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(by_name["model.layers.0.self_attn.q_norm.weight"].shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(by_name["model.layers.0.mlp.down_proj.weight"].shape, (std::vector<int64_t>{8, 12}));
  EXPECT_TRUE(by_name["lm_head.weight"].optional);
  int64_t sum = 0;
  for (const auto& t : tensors)
    if (!t.optional) sum += NumElements(t.shape);
  EXPECT_EQ(models::ParameterCount(*c), sum);

  c->tie_word_embeddings = false;
  c->attention_bias = true;
  auto untied = models::ExpectedTensors(*c);
  EXPECT_EQ(untied.size(), 3u + 2 * 15);
  EXPECT_FALSE(untied.back().optional);
  EXPECT_EQ(models::ParameterCount(*c), sum + 10 * 8 + 2 * (16 + 8 + 8 + 8));
}

TEST(ModelFamily, ExpectedMoeTensors) {
  auto c = io::ParseModelConfig(R"({"model_type": "qwen3_moe", "vocab_size": 10, "hidden_size": 8,
      "intermediate_size": 12, "moe_intermediate_size": 6, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "num_experts": 3,
      "num_experts_per_tok": 2, "mlp_only_layers": [1]})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::set<std::string> names;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : models::ExpectedTensors(*c)) {
    names.insert(t.name);
    shapes[t.name] = t.shape;
  }
  EXPECT_EQ(shapes["model.layers.0.mlp.gate.weight"], (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(shapes["model.layers.0.mlp.experts.2.up_proj.weight"], (std::vector<int64_t>{6, 8}));
  EXPECT_EQ(shapes["model.layers.0.mlp.experts.0.down_proj.weight"], (std::vector<int64_t>{8, 6}));
  EXPECT_FALSE(names.count("model.layers.0.mlp.experts.3.up_proj.weight"));
  EXPECT_FALSE(names.count("model.layers.0.mlp.up_proj.weight"));
  // Layer 1 is dense (mlp_only_layers).
  EXPECT_EQ(shapes["model.layers.1.mlp.up_proj.weight"], (std::vector<int64_t>{12, 8}));
  EXPECT_FALSE(names.count("model.layers.1.mlp.gate.weight"));
  EXPECT_EQ(names.size(), 3u + 2 * 8 + (1 + 3 * 3) + 3);  // globals, attention, MoE, dense
}

// The parameter count is computed without listing tensors, and agrees with the list.
TEST(ModelFamily, ParameterCountFromSizesMatchesTheTensorList) {
  for (const char* json : {
           R"({"model_type":"qwen3","vocab_size":64,"hidden_size":16,"intermediate_size":32,
              "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
              "head_dim":8,"tie_word_embeddings":true})",
           R"({"model_type":"qwen3","vocab_size":10,"hidden_size":4,"intermediate_size":8,
              "num_hidden_layers":3,"num_attention_heads":1,"num_key_value_heads":1,"head_dim":4,
              "attention_bias":true})",
           R"({"architectures":["Qwen3MoeForCausalLM"],"vocab_size":32,"hidden_size":8,
              "intermediate_size":16,"moe_intermediate_size":4,"num_hidden_layers":3,
              "num_attention_heads":2,"num_key_value_heads":1,"num_experts":4,
              "num_experts_per_tok":2,"decoder_sparse_step":2,"mlp_only_layers":[0]})",
           // Llama has no q/k norms (model_config_fuzz found the count taking them anyway).
           R"({"model_type":"llama","vocab_size":24,"hidden_size":16,"intermediate_size":32,
              "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
              "head_dim":8,"tie_word_embeddings":true})",
           R"({"architectures":["LlamaForCausalLM"],"vocab_size":10,"hidden_size":8,
              "intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,
              "num_key_value_heads":1,"attention_bias":true})"}) {
    auto config = io::ParseModelConfig(json);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    int64_t sum = 0;
    for (const auto& t : models::ExpectedTensors(*config)) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      if (!t.optional) sum += n;
    }
    EXPECT_EQ(io::CountParameters(*config), sum) << json;
    EXPECT_EQ(models::ParameterCount(*config), sum) << json;
  }
  EXPECT_EQ(io::CountParameters(io::DefaultModelConfig(models::qwen3::kQwen3)), 12'049'461'248);
}

}  // namespace
}  // namespace tlaloc
