// The train-step program through a PJRT plugin (Tlaloc's own CPU plugin): the module is printed
// as StableHLO, compiled by the plugin and run with donated parameters and moments; the losses
// and weights match the interpreter backend's.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "tlaloc/models/init.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {
namespace {

TEST(TrainerPjrt, StepsMatchTheInterpreter) {
#ifndef TLALOC_PJRT_CPU_PLUGIN
  GTEST_SKIP() << "TLALOC_PJRT_CPU_PLUGIN (Tlaloc's PJRT CPU plugin path) not defined";
#else
  if (!std::filesystem::exists(TLALOC_PJRT_CPU_PLUGIN))
    GTEST_SKIP() << "libtlaloc_pjrt_cpu.so not built at " << TLALOC_PJRT_CPU_PLUGIN;
  pjrt::SessionOptions so;
  so.plugin_path = TLALOC_PJRT_CPU_PLUGIN;
  auto pjrt_backend = pjrt::MakePjrtBackend(so);
  ASSERT_TRUE(pjrt_backend.ok()) << pjrt_backend.status().ToString();
  auto interp = MakeInterpreterBackend();

  io::ModelConfig c = io::DefaultModelConfig(io::ModelArchitecture::kQwen3);
  c.vocab_size = 40;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 8;
  c.max_window_layers = 1;
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
    EXPECT_EQ(sa->loss, sb->loss) << "step " << s + 1;
    EXPECT_EQ(sa->grad_norm, sb->grad_norm);
  }
  auto wa = (*a)->Weights(), wb = (*b)->Weights();
  ASSERT_TRUE(wa.ok() && wb.ok());
  for (size_t i = 0; i < wa->size(); ++i) EXPECT_TRUE((*wa)[i].BitwiseEquals((*wb)[i])) << i;
#endif
}

}  // namespace
}  // namespace tlaloc::train
