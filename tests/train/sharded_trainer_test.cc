// The four sharding plans on 2 and 4 interpreter devices against the single-device step, on a
// tiny Qwen3 and a tiny Qwen3-MoE: the loss and every gradient, 5 AdamW steps' losses,
// parameters and moments kept on their devices as each device's part, and FSDP holding 1/N of
// the state per device. The MoE cases add expert parallelism (tp and dp_tp split the stacked
// experts on E over `model`: every device routes all its tokens, computes only its experts'
// pairs, and the block's all_reduce sums the partial outputs), each device holding 1/N of the
// expert bytes.
//
// Tolerance: the sharded step sums the same terms in another order (per-device partial sums
// folded by all_reduce / reduce_scatter instead of one long sum, the replicated weights'
// gradients as sums of per-device parts), so results differ by f32 rounding. The loss and
// every gradient must agree within 5e-6 of their tensor's largest magnitude: f32 rounds at
// 6e-8 relative and the sums here run over up to ~100 terms (measured: at most 1.3e-6, the
// norms' weights, whose gradients sum over every token and head). Over 5 AdamW steps the
// weights drift further apart: AdamW divides each gradient element by its own running root
// mean square, so an element whose gradient is near zero turns a rounding difference into a
// visible update; weights must agree within 1e-3 of their largest magnitude and the losses and
// gradient norms, which average over everything, within 1e-5 relative. MoE routing itself must
// not differ: a top-k flip would move whole pairs between experts and fail the gradient check
// by orders of magnitude.
#include "tlaloc/train/sharded_trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "sharded_test_util.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/qwen3.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::train {
namespace {

using namespace testing_sharded;  // NOLINT: the shared fixture's names read as local ones

constexpr double kTolerance = 5e-6;
constexpr double kStepTolerance = 1e-5;

enum class Model { kDense, kMoe, kMoeDenseFirst };  // kMoeDenseFirst: layer 0 a dense MLP

struct Case {
  const char* plan;
  const char* mesh;
  const char* name;
  Model model = Model::kDense;
};

io::ModelConfig ConfigOf(const Case& k) {
  switch (k.model) {
    case Model::kMoe:
      return TinyMoeConfig();
    case Model::kMoeDenseFirst:
      return TinyMoeConfig({0});
    default:
      return TinyConfig();
  }
}

class ShardedTrainerTest : public ::testing::TestWithParam<Case> {};

TEST_P(ShardedTrainerTest, LossAndEveryGradientEqualTheUnshardedStep) {
  const Case k = GetParam();
  const io::ModelConfig c = ConfigOf(k);
  const Batch batch = MakeBatch(c, 3);
  auto ref = UnshardedLossAndGradients(c, batch);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();

  auto mesh = Mesh::Parse(k.mesh);
  ASSERT_TRUE(mesh.ok());
  auto plan = shard::ShardingPlan::Make(k.plan, *mesh, c, kBatch);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  if (k.model != Model::kDense) {
    EXPECT_EQ(plan->splits_experts(), plan->model_size() > 1);
  }
  auto backend = MakeInterpreterBackend({}, static_cast<int>(mesh->num_devices()));
  auto trainer = ShardedTrainer::Create(c, Weights(c), Options(), *backend, *plan, kSeq);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  auto got = (*trainer)->LossAndGrad(batch);
  ASSERT_TRUE(got.ok()) << got.status().ToString();

  const double ref_loss = (*ref)[0].GetAsDouble(0);
  EXPECT_EQ(got->tokens, (*ref)[1].GetAsDouble(0));
  const double loss_diff = std::fabs(got->loss - ref_loss) / std::fabs(ref_loss);
  EXPECT_LE(loss_diff, kTolerance);
  ASSERT_EQ(got->grads.size() + 2, ref->size());
  double worst = 0;
  std::string worst_name;
  int experts_seen = 0;
  for (size_t i = 0; i < got->grads.size(); ++i) {
    const std::string& name = plan->weights()[i].name;
    const double d = RelativeDiff(got->grads[i], (*ref)[2 + i]);
    EXPECT_LE(d, kTolerance) << name;
    if (d >= worst) {
      worst = d;
      worst_name = name;
    }
    if (!IsExperts(name)) continue;
    // Most experts get some gradient (this batch's tokens pick them), so the comparison covers
    // each device's slice, not zeros against zeros.
    ++experts_seen;
    const Literal& g = (*ref)[2 + i];
    const int64_t per_expert = g.num_elements() / models::qwen3::Moe(c).num_experts;
    int64_t used = 0;
    for (int64_t e = 0; e < models::qwen3::Moe(c).num_experts; ++e) {
      double mass = 0;
      for (int64_t j = 0; j < per_expert; ++j) mass += std::fabs(g.GetAsDouble(e * per_expert + j));
      used += mass > 0;
    }
    EXPECT_GE(used, models::qwen3::Moe(c).num_experts * 3 / 4) << name;
  }
  const int moe_layers = k.model == Model::kMoe ? 2 : k.model == Model::kMoeDenseFirst ? 1 : 0;
  EXPECT_EQ(experts_seen, 3 * moe_layers);
  std::printf("[%s: %s %s] loss diff %.3g (relative), largest gradient diff %.3g (%s)\n", k.name,
              k.plan, k.mesh, loss_diff, worst, worst_name.c_str());
}

TEST_P(ShardedTrainerTest, FiveAdamWStepsMatchWithStateKeptOnTheDevices) {
  const Case k = GetParam();
  const io::ModelConfig c = ConfigOf(k);
  auto one = MakeInterpreterBackend({}, 1);
  auto ref = Trainer::Create(c, Weights(c), Options(), *one, kBatch, kSeq);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto mesh = Mesh::Parse(k.mesh);
  ASSERT_TRUE(mesh.ok());
  const int n = static_cast<int>(mesh->num_devices());
  auto backend = MakeInterpreterBackend({}, n);
  TrainOptions o = Options();
  o.mesh = k.mesh;
  o.plan = k.plan;
  auto trainer = Trainer::Create(c, Weights(c), o, *backend, kBatch, kSeq);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  ShardedTrainer* sharded = (*trainer)->sharded();
  ASSERT_NE(sharded, nullptr);
  const shard::ShardingPlan& plan = sharded->plan();
  double worst = 0;
  for (int s = 0; s < 5; ++s) {
    const Batch batch = MakeBatch(c, 10 + s);
    auto a = (*ref)->Step(batch);
    auto b = (*trainer)->Step(batch);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(a->tokens, b->tokens);
    const double d = std::fabs(a->loss - b->loss) / std::fabs(a->loss);
    EXPECT_LE(d, kStepTolerance) << "step " << s + 1;
    EXPECT_LE(std::fabs(a->grad_norm - b->grad_norm) / a->grad_norm, kStepTolerance);
    worst = std::max(worst, d);
    // Between steps every parameter and moment is a buffer of its device holding its part.
    for (int which = 0; which < 3; ++which) {
      for (int dev = 0; dev < n; ++dev) {
        for (size_t i = 0; i < plan.weights().size(); ++i) {
          const DeviceBuffer& held = sharded->held(which, dev, i);
          ASSERT_EQ(held.device(), dev);
          ASSERT_FALSE(held.is_deleted());
          ASSERT_EQ(held.type(), plan.LocalWeightType(i)) << plan.weights()[i].name;
        }
      }
    }
  }
  EXPECT_EQ((*trainer)->step(), 5);
  // The trained weights (assembled only now) equal the single-device run's.
  auto wa = (*ref)->Weights();
  auto wb = (*trainer)->Weights();
  ASSERT_TRUE(wa.ok() && wb.ok());
  double weight_diff = 0;
  for (size_t i = 0; i < wa->size(); ++i)
    weight_diff = std::max(weight_diff, RelativeDiff((*wb)[i], (*wa)[i]));
  EXPECT_LE(weight_diff, 1e-3);

  int64_t whole = 0;
  for (const auto& spec : plan.weights())
    whole += 3 * TensorType(ElementType::kF32, spec.shape).byte_size();
  const std::vector<int64_t> peaks = sharded->last_peak_bytes();
  ASSERT_EQ(static_cast<int>(peaks.size()), n);
  if (plan.kind() == shard::PlanKind::kFsdp) {
    EXPECT_EQ(sharded->state_bytes_per_device() * n, whole);
  }
  if (plan.kind() == shard::PlanKind::kDp) {
    EXPECT_EQ(sharded->state_bytes_per_device(), whole);
  }
  // The experts as E / model of them (E / data under FSDP).
  int64_t expert_bytes_whole = 0, expert_bytes_device = 0;
  for (size_t i = 0; i < plan.weights().size(); ++i) {
    if (!IsExperts(plan.weights()[i].name)) continue;
    expert_bytes_whole += 3 * TensorType(ElementType::kF32, plan.weights()[i].shape).byte_size();
    expert_bytes_device += 3 * plan.LocalWeightType(i).byte_size();
  }
  const int64_t split =
      plan.kind() == shard::PlanKind::kFsdp ? plan.data_size() : plan.model_size();
  EXPECT_EQ(expert_bytes_device * split, expert_bytes_whole);
  std::printf(
      "[%s: %s %s] 5-step loss diff %.3g, weight diff %.3g; per device: state %lld of %lld bytes "
      "(experts and moments %lld of %lld), peak live %lld bytes\n",
      k.name, k.plan, k.mesh, worst, weight_diff,
      static_cast<long long>(sharded->state_bytes_per_device()), static_cast<long long>(whole),
      static_cast<long long>(expert_bytes_device), static_cast<long long>(expert_bytes_whole),
      static_cast<long long>(*std::max_element(peaks.begin(), peaks.end())));
}

INSTANTIATE_TEST_SUITE_P(
    Plans, ShardedTrainerTest,
    ::testing::Values(Case{"dp", "data=2", "dp_2"}, Case{"fsdp", "data=2", "fsdp_2"},
                      Case{"tp", "model=2", "tp_2"}, Case{"dp", "data=4", "dp_4"},
                      Case{"fsdp", "data=4", "fsdp_4"}, Case{"tp", "model=4", "tp_4"},
                      Case{"dp_tp", "data=2,model=2", "dp_tp_4"},
                      Case{"tp", "model=2", "moe_tp_2", Model::kMoe},
                      Case{"tp", "model=4", "moe_tp_4", Model::kMoe},
                      Case{"dp_tp", "data=2,model=2", "moe_dp_tp_4", Model::kMoe},
                      Case{"tp", "model=2", "moe_tp_2_dense_first", Model::kMoeDenseFirst},
                      Case{"dp", "data=2", "moe_dp_2", Model::kMoe},
                      Case{"fsdp", "data=2", "moe_fsdp_2", Model::kMoe}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// Remat regions and the chunked LM-head loss (what real vocabularies use) recompute forward
// ops, collectives included, in the backward pass: every device recomputes the same ones.
TEST(ShardedTrainer, RematAndChunkedLossGiveTheUnshardedGradients) {
  const io::ModelConfig c = TinyConfig();
  TrainOptions o = Options();
  o.remat_layers = true;
  o.loss_chunk = 8;
  const Batch batch = MakeBatch(c, 5);
  auto ref = UnshardedLossAndGradients(c, batch, o);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  for (Case k : {Case{"dp_tp", "data=2,model=2", ""}, Case{"fsdp", "data=2", ""}}) {
    auto mesh = Mesh::Parse(k.mesh);
    auto plan = shard::ShardingPlan::Make(k.plan, *mesh, c, kBatch);
    ASSERT_TRUE(plan.ok());
    auto backend = MakeInterpreterBackend({}, static_cast<int>(mesh->num_devices()));
    auto trainer = ShardedTrainer::Create(c, Weights(c), o, *backend, *plan, kSeq);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    auto got = (*trainer)->LossAndGrad(batch);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_LE(std::fabs(got->loss - (*ref)[0].GetAsDouble(0)) / (*ref)[0].GetAsDouble(0),
              kTolerance)
        << k.plan;
    for (size_t i = 0; i < got->grads.size(); ++i)
      EXPECT_LE(RelativeDiff(got->grads[i], (*ref)[2 + i]), kTolerance)
          << k.plan << " " << plan->weights()[i].name;
  }
}

// FSDP's devices each hold a quarter of the weights and moments, so a step's peak live bytes
// per device are below data parallelism's, which holds all of them on every device.
TEST(ShardedTrainer, FsdpPeakPerDeviceIsBelowDataParallelism) {
  const io::ModelConfig c = TinyConfig();
  auto peak = [&](const char* plan, const char* mesh_text) -> int64_t {
    auto mesh = Mesh::Parse(mesh_text);
    EXPECT_TRUE(mesh.ok());
    auto p = shard::ShardingPlan::Make(plan, *mesh, c, kBatch);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    auto backend = MakeInterpreterBackend({}, static_cast<int>(mesh->num_devices()));
    auto t = ShardedTrainer::Create(c, Weights(c), Options(), *backend, *p, kSeq);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (!t.ok() || !(*t)->Step(MakeBatch(c, 1)).ok()) return -1;
    const auto peaks = (*t)->last_peak_bytes();
    return peaks.empty() ? -1 : *std::max_element(peaks.begin(), peaks.end());
  };
  const int64_t one = peak("dp", "data=1"), dp = peak("dp", "data=4"),
                fsdp = peak("fsdp", "data=4");
  std::printf("peak live bytes per device: 1 device %lld, dp data=4 %lld, fsdp data=4 %lld\n",
              static_cast<long long>(one), static_cast<long long>(dp),
              static_cast<long long>(fsdp));
  ASSERT_GT(fsdp, 0);
  EXPECT_LT(fsdp, dp);
  EXPECT_LT(dp, one);  // a quarter of the batch's activations
}

TEST(ShardedTrainer, BadMeshesAndPlansAreRefusedByName) {
  const io::ModelConfig c = TinyConfig();
  auto backend = MakeInterpreterBackend({}, 2);
  auto make = [&](const char* mesh, const char* plan) {
    TrainOptions o = Options();
    o.mesh = mesh;
    o.plan = plan;
    auto t = Trainer::Create(c, Weights(c), o, *backend, kBatch, kSeq);
    return t.ok() ? std::string("(accepted)") : t.status().message();
  };
  EXPECT_NE(make("data=2", "zero").find("unknown sharding plan 'zero'"), std::string::npos);
  EXPECT_NE(make("data=4", "dp").find("mesh data=4 needs 4 devices; backend interp has 2"),
            std::string::npos);
  EXPECT_NE(make("data=x", "dp").find("data=x"), std::string::npos);
  EXPECT_NE(make("", "dp").find("needs both a mesh and a plan"), std::string::npos);
}

// With remat, FSDP gathers each layer's weights inside the layer's remat region, so the
// backward pass gathers them again instead of keeping every layer's gathered weights alive.
TEST(ShardedTrainer, FsdpWithRematKeepsOneLayersGatheredWeights) {
  const io::ModelConfig c = TinyConfig();
  auto peak = [&](const char* plan, bool remat) -> int64_t {
    auto mesh = Mesh::Parse("data=4");
    EXPECT_TRUE(mesh.ok());
    auto p = shard::ShardingPlan::Make(plan, *mesh, c, kBatch);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    auto backend = MakeInterpreterBackend({}, 4);
    TrainOptions o = Options();
    o.remat_layers = remat;
    auto t = ShardedTrainer::Create(c, Weights(c), o, *backend, *p, kSeq);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (!t.ok() || !(*t)->Step(MakeBatch(c, 1)).ok()) return -1;
    const auto peaks = (*t)->last_peak_bytes();
    return peaks.empty() ? -1 : *std::max_element(peaks.begin(), peaks.end());
  };
  const int64_t dp = peak("dp", true), fsdp = peak("fsdp", true), fsdp_plain = peak("fsdp", false);
  std::printf("peak live bytes per device, data=4: dp+remat %lld, fsdp+remat %lld, fsdp %lld\n",
              static_cast<long long>(dp), static_cast<long long>(fsdp),
              static_cast<long long>(fsdp_plain));
  ASSERT_GT(fsdp, 0);
  EXPECT_LT(fsdp, fsdp_plain);
  // The backward pass gathers every split layer weight a second time (the recomputed layer),
  // and only those: the embedding and final norm stay gathered once.
  auto mesh = Mesh::Parse("data=4");
  ASSERT_TRUE(mesh.ok());
  auto plan = shard::ShardingPlan::Make("fsdp", *mesh, c, kBatch);
  ASSERT_TRUE(plan.ok());
  auto gathers = [&](bool remat) {
    TrainOptions o = Options();
    o.remat_layers = remat;
    auto m = BuildDeviceStepProgram(c, o, *plan, kSeq);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    int64_t n = 0;
    for (const auto& op : (*m)->Find("train_step")->entry().operations())
      n += op->name() == "stablehlo.all_gather";
    return n;
  };
  int64_t split = 0, split_in_layers = 0;
  for (size_t i = 0; i < plan->weights().size(); ++i) {
    if (plan->WeightDim(i) < 0) continue;
    ++split;
    split_in_layers += plan->weights()[i].name.rfind("model.layers.", 0) == 0;
  }
  ASSERT_GT(split_in_layers, 0);
  EXPECT_EQ(gathers(false), split);
  EXPECT_EQ(gathers(true), split + split_in_layers);
}

}  // namespace
}  // namespace tlaloc::train
