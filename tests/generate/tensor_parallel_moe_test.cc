// Tensor-parallel generation of a MoE model through the engine: refused by name until the
// engine's step programs take experts split over devices (training's tp plan splits them:
// tests/train/sharded_moe_test.cc), and a num_experts the mesh does not divide is named.
#include <gtest/gtest.h>

#include "testing/tiny_qwen3.h"
#include "tlaloc/generate/engine.h"
#include "tlaloc/models/init.h"

namespace tlaloc::generate {
namespace {

io::ModelConfig TinyMoeConfig() {
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

std::string EngineError(const io::ModelConfig& c, const char* mesh_text) {
  auto mesh = Mesh::Parse(mesh_text);
  EXPECT_TRUE(mesh.ok());
  std::shared_ptr<Backend> backend = MakeInterpreterBackend({}, 4);
  auto engine = Engine::Create(c, Weights(c), ElementType::kF32, backend, *mesh);
  return engine.ok() ? std::string("(accepted)") : engine.status().ToString();
}

TEST(TensorParallelEngine, MoeModelIsRefusedByName) {
  const std::string e = EngineError(TinyMoeConfig(), "model=2");
  EXPECT_NE(e.find("layer 0 is a MoE layer"), std::string::npos) << e;
}

TEST(TensorParallelEngine, MoeExpertsThatDoNotDivideAreRefusedByName) {
  io::ModelConfig c = TinyMoeConfig();
  c.num_experts = 6;
  const std::string e = EngineError(c, "model=4");
  EXPECT_NE(e.find("num_experts 6 does not divide by mesh axis 'model'"), std::string::npos) << e;
}

}  // namespace
}  // namespace tlaloc::generate
