// The Trainer on a small Qwen3 through the interpreter backend: it learns a fixed batch, its
// step loss equals the eval loss, chunked and full losses agree, bf16 compute trains, and a
// resumed optimizer state continues exactly where the first trainer was.
#include "tlaloc/train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::train {
namespace {

io::ModelConfig SmallConfig() {
  io::ModelConfig c = io::DefaultModelConfig(models::qwen3::kQwen3);
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 128;
  models::qwen3::MutableSlidingWindow(c).max_window_layers = 2;
  c.initializer_range = 0.1;
  c.tie_word_embeddings = false;
  c.rope_theta = 10000;
  c.layer_types.assign(2, "full_attention");
  return c;
}

std::vector<Literal> Weights(const io::ModelConfig& c, uint64_t seed) {
  std::vector<Literal> out;
  for (auto& t : models::RandomWeights(c, seed, ElementType::kF32)) out.push_back(t.value);
  return out;
}

Batch MakeBatch(int64_t b, int64_t t, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(b * t), labels(b * t);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % vocab);
  for (int64_t r = 0; r < b; ++r)
    for (int64_t i = 0; i < t; ++i)
      labels[r * t + i] = i + 1 < t && i >= 2 ? ids[r * t + i + 1] : kIgnoreLabel;
  return {Literal::FromVector<int32_t>({b, t}, ids), Literal::FromVector<int32_t>({b, t}, labels)};
}

TEST(Trainer, LearnsAFixedBatchAndStepLossIsEvalLoss) {
  auto backend = MakeInterpreterBackend();
  TrainOptions o;
  o.adamw.lr = 1e-2;
  o.adamw.grad_clip_norm = 1.0;
  const io::ModelConfig c = SmallConfig();
  auto trainer = Trainer::Create(c, Weights(c, 1), o, *backend, 2, 8);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  Batch batch = MakeBatch(2, 8, c.vocab_size, 2);
  auto eval0 = (*trainer)->EvalLoss(batch);
  ASSERT_TRUE(eval0.ok()) << eval0.status().ToString();
  EXPECT_NEAR(*eval0, std::log(64.0), 0.5);  // near-uniform predictions at the start
  double first = 0, last = 0;
  for (int s = 0; s < 15; ++s) {
    auto st = (*trainer)->Step(batch);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(st->tokens, 10);
    EXPECT_GT(st->grad_norm, 0);
    EXPECT_DOUBLE_EQ(st->lr, static_cast<double>(1e-2f));
    if (s == 0) {
      first = st->loss;
      EXPECT_NEAR(first, *eval0, 1e-6 * first);
    }
    last = st->loss;
  }
  EXPECT_EQ((*trainer)->step(), 15);
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
  auto w = (*trainer)->Weights();
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->size(), models::WeightSpecs(c).size());
  EXPECT_EQ((*w)[0].element_type(), ElementType::kF32);
}

TEST(Trainer, ChunkedLossAndBf16Compute) {
  auto backend = MakeInterpreterBackend();
  const io::ModelConfig c = SmallConfig();
  Batch batch = MakeBatch(2, 8, c.vocab_size, 3);
  TrainOptions full, chunked, bf16;
  chunked.loss_chunk = 5;
  bf16.compute_dtype = ElementType::kBF16;
  std::vector<double> losses;
  for (const TrainOptions& o : {full, chunked, bf16}) {
    auto t = Trainer::Create(c, Weights(c, 4), o, *backend, 2, 8);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    double loss = 0;
    for (int s = 0; s < 3; ++s) {
      auto st = (*t)->Step(batch);
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      loss = st->loss;
    }
    losses.push_back(loss);
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-5 * losses[0]);
  EXPECT_TRUE(std::isfinite(losses[2]));
  EXPECT_NEAR(losses[2], losses[0], 0.05 * losses[0]);
}

TEST(Trainer, RematLayersKeepsLossAndGradientsWithLessMemory) {
  io::ModelConfig c = SmallConfig();
  c.num_hidden_layers = 4;
  models::qwen3::MutableSlidingWindow(c).max_window_layers = 4;
  c.layer_types.assign(4, "full_attention");
  const int64_t bsz = 2, t = 32;
  Batch batch = MakeBatch(bsz, t, c.vocab_size, 12);
  std::vector<Literal> args = Weights(c, 13);
  args.push_back(batch.input_ids);
  args.push_back(batch.labels);
  std::vector<std::vector<Literal>> outs;
  std::vector<int64_t> peaks;
  for (bool remat : {false, true}) {
    TrainOptions o;
    o.remat_layers = remat;
    auto m = BuildLossAndGradProgram(c, o, bsz, t);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ExecutionStats stats;
    auto r = Interpret(**m, "loss_and_grad", args, &stats);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    outs.push_back(std::move(*r));
    peaks.push_back(stats.peak_live_bytes);
  }
  for (size_t i = 0; i < outs[0].size(); ++i)
    EXPECT_TRUE(outs[0][i].BitwiseEquals(outs[1][i])) << "result " << i;
  EXPECT_LT(peaks[1], peaks[0]) << "remat " << peaks[1] << " vs saved " << peaks[0];
  std::printf("loss+grad peak live bytes: layers saved %lld, layers recomputed %lld\n",
              static_cast<long long>(peaks[0]), static_cast<long long>(peaks[1]));
}

TEST(Trainer, ResumedOptimizerStateContinuesExactly) {
  auto backend = MakeInterpreterBackend();
  const io::ModelConfig c = SmallConfig();
  TrainOptions o;
  o.adamw.lr = 5e-3;
  o.adamw.warmup_steps = 2;
  o.adamw.total_steps = 6;
  Batch b1 = MakeBatch(1, 6, c.vocab_size, 5), b2 = MakeBatch(1, 6, c.vocab_size, 6);
  auto a = Trainer::Create(c, Weights(c, 7), o, *backend, 1, 6);
  ASSERT_TRUE(a.ok());
  for (int s = 0; s < 3; ++s) ASSERT_TRUE((*a)->Step(b1).ok());
  auto state = (*a)->OptimizerState();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->size(), 1 + 2 * models::WeightSpecs(c).size());
  EXPECT_EQ((*state)[0].first, "step");
  EXPECT_EQ((*state)[1].first, "m." + models::WeightSpecs(c)[0].name);
  auto weights = (*a)->Weights();
  ASSERT_TRUE(weights.ok());
  auto b = Trainer::Create(c, std::move(*weights), o, *backend, 1, 6);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->LoadOptimizerState(*state).ok());
  EXPECT_EQ((*b)->step(), 3);
  auto sa = (*a)->Step(b2);
  auto sb = (*b)->Step(b2);
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_EQ(sa->loss, sb->loss);
  EXPECT_EQ(sa->lr, sb->lr);
  auto wa = (*a)->Weights(), wb = (*b)->Weights();
  ASSERT_TRUE(wa.ok() && wb.ok());
  for (size_t i = 0; i < wa->size(); ++i) EXPECT_TRUE((*wa)[i].BitwiseEquals((*wb)[i])) << i;

  state->pop_back();
  Status bad = (*b)->LoadOptimizerState(*state);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("missing tensor \"v."), std::string::npos) << bad.message();
}

TEST(Trainer, BadInputsAreRefusedByName) {
  auto backend = MakeInterpreterBackend();
  const io::ModelConfig c = SmallConfig();
  auto w = Weights(c, 8);
  w.pop_back();
  auto short_weights = Trainer::Create(c, w, TrainOptions{}, *backend, 1, 4);
  ASSERT_FALSE(short_weights.ok());
  EXPECT_NE(short_weights.status().message().find("weights"), std::string::npos);
  auto t = Trainer::Create(c, Weights(c, 8), TrainOptions{}, *backend, 1, 4);
  ASSERT_TRUE(t.ok());
  Batch wrong = MakeBatch(1, 5, c.vocab_size, 9);
  auto st = (*t)->Step(wrong);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("input_ids"), std::string::npos) << st.status().message();
}

}  // namespace
}  // namespace tlaloc::train
