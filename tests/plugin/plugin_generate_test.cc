// Qwen3 generation through a PJRT plugin (Tlaloc's own by default, or the
// TLALOC_TEST_PJRT_TARGET lane) against the in-process interpreter: the same prompts give the
// same tokens, greedy and sampled with a seed, with the KV caches donated step to step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "models/qwen3_reference.h"
#include "pjrt/pjrt_test_util.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/pjrt/pjrt_backend.h"

namespace tlaloc {
namespace {

class PluginGenerate : public ::testing::Test {
 protected:
  void SetUp() override {
    const pjrt::testing::Lane lane = pjrt::testing::TestLane();
    ASSERT_TRUE(lane.error.empty()) << lane.error;
    if (!lane.skip.empty()) GTEST_SKIP() << lane.skip;
    pjrt::SessionOptions options;
    options.target = lane.target;
    auto backend = pjrt::MakePjrtBackend(options);
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    plugin_ = std::move(*backend);
  }

  // Two generators over the same random weights: one on the plugin, one in process.
  void MakeGenerators(const io::ModelConfig& config, uint32_t seed) {
    testing::RefModel m = testing::RandomModel(config, seed);
    auto remote = generate::Generator::Create(m.config, m.literals, ElementType::kF32, plugin_);
    ASSERT_TRUE(remote.ok()) << remote.status().ToString();
    auto local = generate::Generator::Create(m.config, m.literals, ElementType::kF32);
    ASSERT_TRUE(local.ok()) << local.status().ToString();
    remote_ = std::move(*remote);
    local_ = std::move(*local);
  }

  std::shared_ptr<Backend> plugin_;
  std::unique_ptr<generate::Generator> remote_, local_;
};

TEST_F(PluginGenerate, GreedyAndSeededSamplingMatchTheInterpreter) {
  MakeGenerators(testing::TinyConfig(false, 4, 2, 8), 41);
  ASSERT_TRUE(remote_ && local_);
  EXPECT_EQ(remote_->backend().name().rfind("pjrt:", 0), 0u);
  EXPECT_EQ(local_->backend().name(), "interp");
  const std::vector<std::vector<int32_t>> prompts{{3, 14, 15, 92, 65}, {35, 89}};
  struct Case {
    const char* what;
    nn::SamplingParams sampling;
    uint64_t seed;
  };
  for (const Case& c : {Case{"greedy", {}, 0}, Case{"sampled", {1.1, 20, 0.9}, 1234},
                        Case{"sampled, another seed", {1.1, 20, 0.9}, 99}}) {
    generate::GenerateOptions opts;
    opts.max_new_tokens = 10;
    opts.sampling = c.sampling;
    opts.seed = c.seed;
    std::vector<std::vector<int32_t>> streamed(prompts.size());
    auto remote =
        remote_->Generate(prompts, opts, [&](size_t r, int32_t id) { streamed[r].push_back(id); });
    ASSERT_TRUE(remote.ok()) << c.what << ": " << remote.status().ToString();
    auto local = local_->Generate(prompts, opts);
    ASSERT_TRUE(local.ok()) << c.what << ": " << local.status().ToString();
    for (size_t r = 0; r < prompts.size(); ++r) {
      EXPECT_EQ((*remote)[r].generated_ids, (*local)[r].generated_ids) << c.what << ", row " << r;
      EXPECT_EQ((*remote)[r].generated_ids.size(), 10u) << c.what << ", row " << r;
      EXPECT_EQ(streamed[r], (*remote)[r].generated_ids);
    }
  }
  // One prefill and one decode program, reused across calls: sampling settings are inputs.
  EXPECT_EQ(remote_->num_compiled_programs(), 2u);
}

TEST_F(PluginGenerate, StepsGiveTheInterpretersLogits) {
  MakeGenerators(testing::TinyConfig(true, 4, 2, 8), 43);
  ASSERT_TRUE(remote_ && local_);
  auto first = remote_->Prefill({{7, 8, 9}}, 64, {}, 0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(remote_->caches().size(), 4u);
  auto next = remote_->DecodeStep(first->tokens, {3}, {}, 0, 1);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  // The donated caches were replaced by the step's results, all live.
  ASSERT_EQ(remote_->caches().size(), 4u);
  for (const auto& c : remote_->caches()) EXPECT_FALSE(c->is_deleted());

  auto local_first = local_->Prefill({{7, 8, 9}}, 64, {}, 0);
  ASSERT_TRUE(local_first.ok());
  auto local_next = local_->DecodeStep(local_first->tokens, {3}, {}, 0, 1);
  ASSERT_TRUE(local_next.ok());
  EXPECT_EQ(next->tokens, local_next->tokens);
  // Tlaloc's plugin runs the same interpreter on the same text: bit-identical logits. Another
  // compiler fuses and reorders: the largest difference is printed and bounded (XLA:CPU's
  // figure is in docs/PJRT.md).
  if (pjrt::testing::TestLane().is_tlaloc_plugin()) {
    EXPECT_TRUE(first->logits.BitwiseEquals(local_first->logits));
    EXPECT_TRUE(next->logits.BitwiseEquals(local_next->logits));
  } else {
    for (auto [what, got, want] : {std::tuple{"prefill", &first->logits, &local_first->logits},
                                   std::tuple{"decode", &next->logits, &local_next->logits}}) {
      ASSERT_EQ(got->type(), want->type());
      auto x = got->span<float>(), y = want->span<float>();
      double worst = 0, scale = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        worst = std::max(worst, std::fabs(double{x[i]} - y[i]));
        scale = std::max(scale, std::fabs(double{y[i]}));
      }
      std::printf("  %s logits: largest difference %.3g (largest |logit| %.3g)\n", what, worst,
                  scale);
      EXPECT_LE(worst, 1e-4 * std::max(1.0, scale)) << what;
    }
  }
}

}  // namespace
}  // namespace tlaloc
