// Tensor-parallel generation of a MoE model through the engine: each device holds E / N of
// every MoE layer's experts (training's tp plan: tests/train/sharded_trainer_test.cc), routes every
// token over all E, and the slices' shares are summed by the block's all_reduce. Ids equal the
// one-device engine's on 2 and 4 interpreter devices (greedy and sampled, whole and chunked
// prompts, decode steps), with a dense layer among the sparse ones too; each device holds 1/N
// of the experts; a num_experts the mesh does not divide is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "generate/engine_run.h"
#include "testing/tiny_qwen3.h"
#include "testing/tiny_qwen3_variants.h"
#include "tlaloc/generate/engine.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::generate {
namespace {

io::ModelConfig TinyMoeConfig() {
  return testing::AsTinyMoe(testing::TinyQwen3Config({.vocab_size = 96, .initializer_range = 0.2}));
}

std::vector<Literal> Weights(const io::ModelConfig& c) {
  std::vector<Literal> out;
  for (auto& t : models::RandomWeights(c, 11, ElementType::kF32)) out.push_back(t.value);
  return out;
}

StatusOr<std::unique_ptr<Engine>> MakeEngine(const io::ModelConfig& c, const char* mesh_text,
                                             int devices = 0) {
  if (mesh_text == nullptr) return Engine::Create(c, Weights(c), ElementType::kF32);
  TL_ASSIGN_OR_RETURN(Mesh mesh, Mesh::Parse(mesh_text));
  std::shared_ptr<Backend> backend =
      MakeInterpreterBackend({}, devices > 0 ? devices : static_cast<int>(mesh.num_devices()));
  return Engine::Create(c, Weights(c), ElementType::kF32, backend, mesh);
}

std::vector<int32_t> Prompt(int64_t len) {
  std::vector<int32_t> p(len);
  for (int64_t i = 0; i < len; ++i) p[i] = static_cast<int32_t>((11 * i + 3) % 96);
  return p;
}

// Ids of `c` through the mesh equal one device's, greedy and sampled.
void ExpectIdsEqualOneDevice(const io::ModelConfig& c, const std::string& label) {
  auto one = MakeEngine(c, nullptr);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  RowSampling greedy;
  RowSampling sampled;
  sampled.params.temperature = 1.5;
  sampled.params.top_k = 40;
  sampled.params.top_p = 0.95;
  sampled.seed = 77;
  constexpr int64_t kSteps = 8;
  for (const char* mesh : {"model=2", "model=4"}) {
    auto tp = MakeEngine(c, mesh);
    ASSERT_TRUE(tp.ok()) << label << " " << mesh << ": " << tp.status().ToString();
    for (int64_t len : {5, 21}) {
      for (int64_t chunk : {len, int64_t{16}}) {
        for (const RowSampling* s : {&greedy, &sampled}) {
          const std::string what = label + ", " + mesh + ", prompt " + std::to_string(len) +
                                   ", chunk " + std::to_string(chunk) +
                                   (s == &greedy ? ", greedy" : ", sampled");
          auto want = RunOneSlot(**one, Prompt(len), chunk, *s, kSteps);
          auto got = RunOneSlot(**tp, Prompt(len), chunk, *s, kSteps);
          ASSERT_TRUE(want.ok()) << want.status().ToString();
          ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
          EXPECT_EQ(got->tokens, want->tokens) << what;
          // The expert slices and heads are summed in another order: rounding only. A routing
          // difference would move whole expert outputs (orders of magnitude more).
          for (size_t i = 0; i < want->logits.size(); ++i)
            EXPECT_LT(MaxRelativeDifference(got->logits[i], want->logits[i]), 1e-5) << what;
          if (s == &greedy) {
            EXPECT_GE(std::set<int32_t>(want->tokens.begin(), want->tokens.end()).size(), 3u)
                << what << ": the ids are not one id over and over";
          }
        }
      }
    }
  }
}

TEST(TensorParallelMoeEngine, IdsEqualOneDevice) {
  ExpectIdsEqualOneDevice(TinyMoeConfig(), "moe");
}

TEST(TensorParallelMoeEngine, IdsEqualOneDeviceWithADenseLayer) {
  io::ModelConfig c = TinyMoeConfig();
  // Layer 0 dense (intermediate split), layer 1 sparse (experts split).
  models::qwen3::MutableMoe(c).mlp_only_layers = {0};
  ExpectIdsEqualOneDevice(c, "dense+moe");
}

TEST(TensorParallelMoeEngine, EachDeviceHoldsItsSliceOfTheExperts) {
  const io::ModelConfig c = TinyMoeConfig();
  auto one = MakeEngine(c, nullptr);
  ASSERT_TRUE(one.ok());
  for (int n : {2, 4}) {
    const std::string mesh = "model=" + std::to_string(n);
    auto tp = MakeEngine(c, mesh.c_str());
    ASSERT_TRUE(tp.ok()) << tp.status().ToString();
    // The engine's config keeps every expert (each device routes over all of them).
    EXPECT_EQ(models::qwen3::Moe((*tp)->device_config()).num_experts,
              models::qwen3::Moe(c).num_experts);
    for (int d = 0; d < n; ++d) {
      const auto& held = (*tp)->device_weights(d);
      const auto& whole = (*one)->device_weights(0);
      ASSERT_EQ(held.size(), whole.size());
      int experts = 0;
      for (size_t i = 0; i < held.size(); ++i) {
        if (whole[i]->type().rank() != 3) continue;  // the stacked experts [E, out, in]
        ++experts;
        EXPECT_EQ(held[i]->type().dims[0] * n, models::qwen3::Moe(c).num_experts)
            << mesh << " weight " << i;
        EXPECT_EQ(held[i]->device(), d);
      }
      EXPECT_EQ(experts, 3 * c.num_hidden_layers);
    }
  }
}

TEST(TensorParallelMoeEngine, ExpertsThatDoNotDivideAreRefusedByName) {
  io::ModelConfig c = TinyMoeConfig();
  models::qwen3::MutableMoe(c).num_experts = 6;
  auto e = MakeEngine(c, "model=4");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("num_experts 6 does not divide by mesh axis 'model'"),
            std::string::npos)
      << e.status().message();
}

}  // namespace
}  // namespace tlaloc::generate
