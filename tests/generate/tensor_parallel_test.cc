// Tensor-parallel greedy generation on 2 and 4 interpreter devices gives the single-device
// engine's greedy ids on a tiny random Qwen3 (both f32; the engine decodes with its KV cache).
#include "tlaloc/generate/tensor_parallel.h"

#include <gtest/gtest.h>

#include <set>

#include "testing/tiny_qwen3.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/models/init.h"

namespace tlaloc::generate {
namespace {

io::ModelConfig TinyConfig() {
  // peaked logits: greedy ids far from ties
  return testing::TinyQwen3Config({.vocab_size = 96, .initializer_range = 0.2});
}

std::vector<Literal> Weights(const io::ModelConfig& c) {
  std::vector<Literal> out;
  for (auto& t : models::RandomWeights(c, 11, ElementType::kF32)) out.push_back(t.value);
  return out;
}

TEST(TensorParallelGreedy, GivesTheSingleDeviceEnginesIds) {
  const io::ModelConfig c = TinyConfig();
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
  // Not one token over and over: the comparison covers several argmax decisions.
  std::set<int32_t> distinct((*want)[0].generated_ids.begin(), (*want)[0].generated_ids.end());
  EXPECT_GE(distinct.size(), 3u);
  // Rows at or past sample_vocab are never produced, as the engine masks them.
  auto mesh = Mesh::Parse("model=2");
  auto backend = MakeInterpreterBackend({}, 2);
  auto masked = TensorParallelGreedy::Create(c, Weights(c), *backend, *mesh, 32, 40);
  ASSERT_TRUE(masked.ok()) << masked.status().ToString();
  auto low = (*masked)->Generate(prompt, kNew);
  ASSERT_TRUE(low.ok());
  for (int32_t t : *low) EXPECT_LT(t, 40);
}

TEST(TensorParallelGreedy, RefusesMeshesAndPromptsByName) {
  io::ModelConfig c = TinyConfig();
  auto backend = MakeInterpreterBackend({}, 2);
  auto make = [&](const char* mesh_text, int64_t max_len) {
    auto mesh = Mesh::Parse(mesh_text);
    EXPECT_TRUE(mesh.ok());
    return TensorParallelGreedy::Create(c, Weights(c), *backend, *mesh, max_len);
  };
  auto data = make("data=2", 16);
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("plan tp needs a mesh of the axes 'model'"),
            std::string::npos);
  auto big = make("model=4", 16);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("needs 4 devices"), std::string::npos);
  auto tp = make("model=2", 4);
  ASSERT_TRUE(tp.ok()) << tp.status().ToString();
  EXPECT_FALSE((*tp)->Generate({1, 2, 3, 4}, 2).ok());  // no room left
  auto bad = (*tp)->Generate({1, 200}, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("token 200"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc::generate
