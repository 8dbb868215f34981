// Tensor-parallel generation through the engine: the weights and the KV pools split over 2 and 4
// interpreter devices on a `model` axis give the single-device engine's ids, greedy and sampled
// (same seed), for prompts of several lengths, whole or prefilled in chunks; each device holds
// about 1/N of the KV bytes and its part of the weights. Tiny random Qwen3, f32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "generate/engine_run.h"
#include "testing/tiny_qwen3.h"
#include "tlaloc/generate/engine.h"
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

std::vector<int32_t> Prompt(int64_t len) {
  std::vector<int32_t> p(len);
  for (int64_t i = 0; i < len; ++i) p[i] = static_cast<int32_t>((7 * i + 5) % 96);
  return p;
}

StatusOr<std::unique_ptr<Engine>> MakeEngine(const char* mesh_text) {
  const io::ModelConfig c = TinyConfig();
  if (mesh_text == nullptr) return Engine::Create(c, Weights(c), ElementType::kF32);
  TL_ASSIGN_OR_RETURN(Mesh mesh, Mesh::Parse(mesh_text));
  std::shared_ptr<Backend> backend =
      MakeInterpreterBackend({}, static_cast<int>(mesh.num_devices()));
  return Engine::Create(c, Weights(c), ElementType::kF32, backend, mesh);
}

TEST(TensorParallelEngine, GreedyAndSampledIdsEqualOneDevice) {
  auto one = MakeEngine(nullptr);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  RowSampling greedy;
  RowSampling sampled;
  sampled.params.temperature = 1.5;  // flat enough that the draw is not the argmax
  sampled.params.top_k = 40;
  sampled.params.top_p = 0.95;
  sampled.seed = 1234;
  constexpr int64_t kSteps = 10;
  for (const char* mesh : {"model=2", "model=4"}) {
    auto tp = MakeEngine(mesh);
    ASSERT_TRUE(tp.ok()) << tp.status().ToString();
    int sampled_differs_from_greedy = 0;
    // Prompt lengths across the prefill buckets (16, 32, 64), whole and in chunks of 16 (a chunk
    // that ends mid-block continues from there).
    for (int64_t len : {3, 17, 40}) {
      for (int64_t chunk : {len, int64_t{16}, int64_t{7}}) {
        const std::vector<int32_t> prompt = Prompt(len);
        std::vector<int32_t> greedy_ids;
        for (const RowSampling* s : {&greedy, &sampled}) {
          const std::string what = std::string(mesh) + ", prompt " + std::to_string(len) +
                                   ", chunk " + std::to_string(chunk) +
                                   (s == &greedy ? ", greedy" : ", sampled");
          auto want = RunOneSlot(**one, prompt, chunk, *s, kSteps, 1);
          auto got = RunOneSlot(**tp, prompt, chunk, *s, kSteps, 1);
          ASSERT_TRUE(want.ok()) << want.status().ToString();
          ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
          EXPECT_EQ(got->tokens, want->tokens) << what;
          // The all_reduce adds the heads' partial sums in another order: rounding only.
          for (size_t i = 0; i < want->logits.size(); ++i)
            EXPECT_LT(MaxRelativeDifference(got->logits[i], want->logits[i]), 1e-5) << what;
          if (s == &greedy)
            greedy_ids = want->tokens;
          else
            sampled_differs_from_greedy += want->tokens != greedy_ids;
        }
      }
    }
    // The sampled runs really sampled, and the greedy ones are not one id over and over.
    EXPECT_GT(sampled_differs_from_greedy, 0) << mesh;
  }
  auto again = RunOneSlot(**one, Prompt(17), 17, greedy, kSteps, 1);
  ASSERT_TRUE(again.ok());
  EXPECT_GE(std::set<int32_t>(again->tokens.begin(), again->tokens.end()).size(), 3u);
}

TEST(TensorParallelEngine, EachDeviceHoldsItsPartOfTheWeightsAndTheKvCache) {
  auto one = MakeEngine(nullptr);
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE((*one)->Reserve(4, 64).ok());
  const int64_t weights1 = (*one)->weight_bytes(0), cache1 = (*one)->cache_bytes(0);
  ASSERT_GT(cache1, 0);
  for (int n : {2, 4}) {
    const std::string mesh = "model=" + std::to_string(n);
    auto tp = MakeEngine(mesh.c_str());
    ASSERT_TRUE(tp.ok());
    ASSERT_TRUE((*tp)->Reserve(4, 64).ok());
    ASSERT_EQ((*tp)->num_devices(), n);
    EXPECT_EQ((*tp)->device_config().num_key_value_heads, 4 / n);
    EXPECT_EQ((*tp)->block_bytes() * n, (*one)->block_bytes());
    for (int d = 0; d < n; ++d) {
      // KV pools split on the kv-head dimension: exactly 1/N.
      EXPECT_EQ((*tp)->cache_bytes(d) * n, cache1) << mesh << " device " << d;
      for (const auto& pool : (*tp)->device_caches(d)) {
        EXPECT_EQ(pool->device(), d);
        EXPECT_EQ(pool->type().dims[1], 4 / n);
      }
      // Layer weights split, embedding, head and norms whole on every device.
      EXPECT_LT((*tp)->weight_bytes(d), weights1) << mesh;
      std::printf("%s device %d: weights %lld of %lld bytes, KV %lld of %lld\n", mesh.c_str(), d,
                  static_cast<long long>((*tp)->weight_bytes(d)), static_cast<long long>(weights1),
                  static_cast<long long>((*tp)->cache_bytes(d)), static_cast<long long>(cache1));
    }
  }
}

TEST(TensorParallelEngine, GeneratorSamplesTheSameThroughTheMesh) {
  const io::ModelConfig c = TinyConfig();
  auto one = Generator::Create(c, Weights(c), ElementType::kF32);
  auto mesh = Mesh::Parse("model=2");
  ASSERT_TRUE(mesh.ok());
  auto tp =
      Generator::Create(c, Weights(c), ElementType::kF32, MakeInterpreterBackend({}, 2), *mesh);
  ASSERT_TRUE(one.ok() && tp.ok()) << tp.status().ToString();
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.sampling.temperature = 1.2;
  o.row_seeds = {3, 4};
  (*one)->set_sample_vocab(40);
  (*tp)->set_sample_vocab(40);
  const std::vector<std::vector<int32_t>> prompts = {Prompt(5), Prompt(21)};
  auto want = (*one)->Generate(prompts, o);
  auto got = (*tp)->Generate(prompts, o);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status().ToString();
  for (size_t r = 0; r < prompts.size(); ++r) {
    EXPECT_EQ((*got)[r].generated_ids, (*want)[r].generated_ids) << "row " << r;
    for (int32_t t : (*got)[r].generated_ids) EXPECT_LT(t, 40);  // the sample_vocab mask
  }
}

TEST(TensorParallelEngine, RefusesMeshesByName) {
  const io::ModelConfig c = TinyConfig();
  auto make = [&](const io::ModelConfig& config, const char* mesh_text, int devices) {
    auto mesh = Mesh::Parse(mesh_text);
    EXPECT_TRUE(mesh.ok());
    return Engine::Create(config, Weights(config), ElementType::kF32,
                          MakeInterpreterBackend({}, devices), *mesh);
  };
  auto data = make(c, "data=2", 2);
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("plan tp needs a mesh of the axes 'model'"),
            std::string::npos)
      << data.status().message();
  auto few = make(c, "model=4", 2);
  ASSERT_FALSE(few.ok());
  EXPECT_NE(few.status().message().find("needs 4 devices"), std::string::npos);
  // 2 KV heads cannot be split 4 ways.
  io::ModelConfig kv2 = testing::TinyQwen3Config({.vocab_size = 96, .num_key_value_heads = 2});
  auto kv = make(kv2, "model=4", 4);
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.status().message().find("num_key_value_heads 2 does not divide by mesh axis "
                                       "'model' (size 4)"),
            std::string::npos)
      << kv.status().message();
}

}  // namespace
}  // namespace tlaloc::generate
