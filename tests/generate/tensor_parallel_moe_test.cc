// Tensor-parallel greedy generation of a MoE model (expert parallelism: each device holds
// num_experts / model of the stacked experts, routes every token and computes its experts'
// pairs) gives the single-device engine's greedy ids on 2 and 4 interpreter devices.
#include <gtest/gtest.h>

#include <set>

#include "testing/tiny_qwen3.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/generate/tensor_parallel.h"
#include "tlaloc/models/init.h"

namespace tlaloc::generate {
namespace {

io::ModelConfig TinyMoeConfig() {
  // peaked logits: greedy ids far from ties
  io::ModelConfig c = testing::TinyQwen3Config({.vocab_size = 96, .initializer_range = 0.2});
  c.architecture = io::ModelArchitecture::kQwen3Moe;
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 16;
  c.norm_topk_prob = true;
  c.mlp_only_layers = {};
  return c;
}

std::vector<Literal> Weights(const io::ModelConfig& c) {
  std::vector<Literal> out;
  for (auto& t : models::RandomWeights(c, 11, ElementType::kF32)) out.push_back(t.value);
  return out;
}

TEST(TensorParallelGreedy, MoeModelGivesTheSingleDeviceEnginesIds) {
  const io::ModelConfig c = TinyMoeConfig();
  const std::vector<int32_t> prompt = {5, 17, 42, 8, 63};
  constexpr int64_t kNew = 12;
  auto engine = Generator::Create(c, Weights(c), ElementType::kF32);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  GenerateOptions options;
  options.max_new_tokens = kNew;
  auto want = (*engine)->Generate({prompt}, options);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_EQ(static_cast<int64_t>((*want)[0].generated_ids.size()), kNew);
  for (const char* mesh_text : {"model=2", "model=4"}) {
    auto mesh = Mesh::Parse(mesh_text);
    ASSERT_TRUE(mesh.ok());
    auto backend = MakeInterpreterBackend({}, static_cast<int>(mesh->num_devices()));
    auto tp = TensorParallelGreedy::Create(c, Weights(c), *backend, *mesh, 32);
    ASSERT_TRUE(tp.ok()) << tp.status().ToString();
    auto got = (*tp)->Generate(prompt, kNew);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, (*want)[0].generated_ids) << mesh_text;
  }
  std::set<int32_t> distinct((*want)[0].generated_ids.begin(), (*want)[0].generated_ids.end());
  EXPECT_GE(distinct.size(), 3u);
}

TEST(TensorParallelGreedy, MoeExpertsThatDoNotDivideAreRefusedByName) {
  io::ModelConfig c = TinyMoeConfig();
  c.num_experts = 6;
  auto backend = MakeInterpreterBackend({}, 4);
  auto mesh = Mesh::Parse("model=4");
  ASSERT_TRUE(mesh.ok());
  auto tp = TensorParallelGreedy::Create(c, Weights(c), *backend, *mesh, 16);
  ASSERT_FALSE(tp.ok());
  EXPECT_NE(tp.status().message().find("num_experts 6 does not divide by mesh axis 'model'"),
            std::string::npos)
      << tp.status().ToString();
}

}  // namespace
}  // namespace tlaloc::generate
