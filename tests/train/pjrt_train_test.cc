// The train-step program through a PJRT plugin (Tlaloc's own CPU plugin, or the
// TLALOC_TEST_PJRT_TARGET lane, e.g. the bring-up session's training lane): the module is printed
// as StableHLO, compiled by the plugin and run with donated parameters and moments; the losses
// and weights match the interpreter backend's, bit for bit on Tlaloc's plugin and within a
// relative 1e-3 on another.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "pjrt/pjrt_test_util.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/qwen3.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {
namespace {

TEST(TrainerPjrt, StepsMatchTheInterpreter) {
  const pjrt::testing::Lane lane = pjrt::testing::TestLane();
  ASSERT_TRUE(lane.error.empty()) << lane.error;
  if (!lane.skip.empty()) GTEST_SKIP() << lane.skip;
  if (!std::filesystem::exists(lane.plugin_path))
    GTEST_SKIP() << "no PJRT plugin at " << lane.plugin_path;
  const bool exact = lane.is_tlaloc_plugin();
  pjrt::SessionOptions so;
  so.target = lane.target;
  so.plugin_path = lane.plugin_path;
  auto pjrt_backend = pjrt::MakePjrtBackend(so);
  ASSERT_TRUE(pjrt_backend.ok()) << pjrt_backend.status().ToString();
  auto interp = MakeInterpreterBackend();

  io::ModelConfig c = io::DefaultModelConfig(models::qwen3::kQwen3);
  c.vocab_size = 40;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 8;
  models::qwen3::MutableSlidingWindow(c).max_window_layers = 1;
  c.layer_types.assign(1, "full_attention");
  c.initializer_range = 0.2;
  std::vector<Literal> weights;
  for (auto& t : models::RandomWeights(c, 5, ElementType::kF32)) weights.push_back(t.value);
  std::mt19937 rng(3);
  std::vector<int32_t> ids(2 * 6), labels(2 * 6);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % c.vocab_size);
  for (size_t i = 0; i < ids.size(); ++i) labels[i] = i % 6 == 5 ? kIgnoreLabel : ids[i + 1];
  Batch batch{Literal::FromVector<int32_t>({2, 6}, ids),
              Literal::FromVector<int32_t>({2, 6}, labels)};
  TrainOptions o;
  o.adamw.lr = 1e-2;
  o.loss_chunk = 4;
  auto a = Trainer::Create(c, weights, o, *interp, 2, 6);
  auto b = Trainer::Create(c, weights, o, **pjrt_backend, 2, 6);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  for (int s = 0; s < 3; ++s) {
    auto sa = (*a)->Step(batch);
    auto sb = (*b)->Step(batch);
    ASSERT_TRUE(sa.ok()) << sa.status().ToString();
    ASSERT_TRUE(sb.ok()) << sb.status().ToString();
    if (exact) {
      EXPECT_EQ(sa->loss, sb->loss) << "step " << s + 1;
      EXPECT_EQ(sa->grad_norm, sb->grad_norm);
    } else {
      EXPECT_NEAR(sa->loss, sb->loss, 1e-3 * std::abs(sa->loss)) << "step " << s + 1;
      EXPECT_NEAR(sa->grad_norm, sb->grad_norm, 1e-3 * std::abs(sa->grad_norm));
    }
  }
  auto wa = (*a)->Weights(), wb = (*b)->Weights();
  ASSERT_TRUE(wa.ok() && wb.ok());
  for (size_t i = 0; i < wa->size(); ++i) {
    if (exact) {
      EXPECT_TRUE((*wa)[i].BitwiseEquals((*wb)[i])) << i;
      continue;
    }
    auto x = (*wa)[i].span<float>(), y = (*wb)[i].span<float>();
    ASSERT_EQ(x.size(), y.size());
    for (size_t k = 0; k < x.size(); ++k) {
      EXPECT_NEAR(x[k], y[k], 1e-3 * std::max(1.0f, std::abs(x[k])))
          << "weight " << i << "[" << k << "]";
    }
  }
}

}  // namespace
}  // namespace tlaloc::train
