// Expert parallelism: a tiny Qwen3-MoE trained over 2 and 4 interpreter devices with the tp and
// dp_tp plans (the stacked experts split on E over `model`, every device routing all its tokens
// and computing only its experts' pairs, the partial outputs summed by the block's all_reduce),
// and with dp / fsdp, against the single-device step: the loss and every gradient, AdamW steps
// with the state kept on the devices, and each device holding 1/N of the expert bytes.
//
// Tolerance: as tests/train/sharded_trainer_test.cc (same sums in another order, f32): loss and
// every gradient within 5e-6 of their tensor's largest magnitude, step losses and gradient norms
// within 1e-5 relative, weights after the steps within 1e-3 of their largest magnitude. The
// routing itself must not differ: a top-k flip would move whole pairs between experts and fail
// the gradient check by orders of magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "sharded_test_util.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"
#include "tlaloc/train/sharded_trainer.h"
#include "train/train_step.h"

namespace tlaloc::train {
namespace {

using namespace testing_sharded;  // NOLINT: the shared fixture's names read as local ones

constexpr double kTolerance = 5e-6;
constexpr double kStepTolerance = 1e-5;

struct Case {
  const char* plan;
  const char* mesh;
  const char* name;
  bool dense_first;  // layer 0 a dense MLP (tensor-parallel), layer 1 MoE
};

io::ModelConfig ConfigOf(const Case& k) {
  return k.dense_first ? TinyMoeConfig({0}) : TinyMoeConfig();
}

double RelativeDiff(const Literal& a, const Literal& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.num_elements(); ++i) {
    diff = std::max(diff, std::fabs(a.GetAsDouble(i) - b.GetAsDouble(i)));
    scale = std::max(scale, std::fabs(b.GetAsDouble(i)));
  }
  return scale == 0 ? diff : diff / scale;
}

bool IsExperts(const std::string& name) { return name.find(".mlp.experts.") != std::string::npos; }

class ShardedMoeTest : public ::testing::TestWithParam<Case> {};

TEST_P(ShardedMoeTest, LossAndEveryGradientEqualTheUnshardedStep) {
  const Case k = GetParam();
  const io::ModelConfig c = ConfigOf(k);
  const Batch batch = MakeBatch(c, 3);
  auto ref = UnshardedLossAndGradients(c, batch);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();

  auto mesh = Mesh::Parse(k.mesh);
  ASSERT_TRUE(mesh.ok());
  auto plan = shard::ShardingPlan::Make(k.plan, *mesh, c, kBatch);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->splits_experts(), plan->model_size() > 1);
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
  double worst = 0, worst_expert = 0;
  int experts_seen = 0;
  for (size_t i = 0; i < got->grads.size(); ++i) {
    const std::string& name = plan->weights()[i].name;
    const double d = RelativeDiff(got->grads[i], (*ref)[2 + i]);
    EXPECT_LE(d, kTolerance) << name;
    worst = std::max(worst, d);
    if (IsExperts(name)) {
      ++experts_seen;
      worst_expert = std::max(worst_expert, d);
      // Most experts get some gradient (this batch's tokens pick them), so the comparison
      // covers each device's slice, not zeros against zeros.
      const Literal& g = (*ref)[2 + i];
      const int64_t per_expert = g.num_elements() / c.num_experts;
      int64_t used = 0;
      for (int64_t e = 0; e < c.num_experts; ++e) {
        double mass = 0;
        for (int64_t j = 0; j < per_expert; ++j)
          mass += std::fabs(g.GetAsDouble(e * per_expert + j));
        used += mass > 0;
      }
      EXPECT_GE(used, c.num_experts * 3 / 4) << name;
      std::printf("%s: %lld of %lld experts with a gradient\n", name.c_str(),
                  static_cast<long long>(used), static_cast<long long>(c.num_experts));
    }
  }
  EXPECT_EQ(experts_seen, 3 * (k.dense_first ? 1 : 2));
  std::printf("[moe %s %s] loss diff %.3g, largest gradient diff %.3g (experts %.3g)\n", k.plan,
              k.mesh, loss_diff, worst, worst_expert);
}

TEST_P(ShardedMoeTest, AdamWStepsMatchWithExpertsSplitOnTheDevices) {
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
  constexpr int kSteps = 3;
  double worst = 0;
  for (int s = 0; s < kSteps; ++s) {
    const Batch batch = MakeBatch(c, 20 + s);
    auto a = (*ref)->Step(batch);
    auto b = (*trainer)->Step(batch);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(a->tokens, b->tokens);
    const double d = std::fabs(a->loss - b->loss) / std::fabs(a->loss);
    EXPECT_LE(d, kStepTolerance) << "step " << s + 1;
    EXPECT_LE(std::fabs(a->grad_norm - b->grad_norm) / a->grad_norm, kStepTolerance);
    worst = std::max(worst, d);
  }
  // Parameters and both moments stay on their devices; the experts as E / model of them.
  int64_t expert_bytes_whole = 0, expert_bytes_device = 0;
  for (size_t i = 0; i < plan.weights().size(); ++i) {
    const std::string& name = plan.weights()[i].name;
    if (!IsExperts(name)) continue;
    const TensorType whole(ElementType::kF32, plan.weights()[i].shape);
    expert_bytes_whole += 3 * whole.byte_size();
    for (int which = 0; which < 3; ++which) {
      for (int dev = 0; dev < n; ++dev) {
        const DeviceBuffer& held = sharded->held(which, dev, i);
        ASSERT_EQ(held.device(), dev);
        ASSERT_FALSE(held.is_deleted());
        ASSERT_EQ(held.type(), plan.LocalWeightType(i)) << name;
      }
      expert_bytes_device += sharded->held(which, 0, i).type().byte_size();
    }
  }
  const int64_t split =
      plan.kind() == shard::PlanKind::kFsdp ? plan.data_size() : plan.model_size();
  EXPECT_EQ(expert_bytes_device * split, expert_bytes_whole);
  auto wa = (*ref)->Weights();
  auto wb = (*trainer)->Weights();
  ASSERT_TRUE(wa.ok() && wb.ok());
  double weight_diff = 0;
  for (size_t i = 0; i < wa->size(); ++i)
    weight_diff = std::max(weight_diff, RelativeDiff((*wb)[i], (*wa)[i]));
  EXPECT_LE(weight_diff, 1e-3);
  const std::vector<int64_t> peaks = sharded->last_peak_bytes();
  ASSERT_EQ(static_cast<int>(peaks.size()), n);
  std::printf(
      "[moe %s %s] %d-step loss diff %.3g, weight diff %.3g; per device: experts+moments %lld "
      "of %lld bytes, state %lld bytes, peak live %lld bytes\n",
      k.plan, k.mesh, kSteps, worst, weight_diff, static_cast<long long>(expert_bytes_device),
      static_cast<long long>(expert_bytes_whole),
      static_cast<long long>(sharded->state_bytes_per_device()),
      static_cast<long long>(*std::max_element(peaks.begin(), peaks.end())));
}

INSTANTIATE_TEST_SUITE_P(
    Plans, ShardedMoeTest,
    ::testing::Values(Case{"tp", "model=2", "tp_2", false}, Case{"tp", "model=4", "tp_4", false},
                      Case{"dp_tp", "data=2,model=2", "dp_tp_4", false},
                      Case{"tp", "model=2", "tp_2_dense_first", true},
                      Case{"dp", "data=2", "dp_2", false}, Case{"fsdp", "data=2", "fsdp_2", false}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// The global program for XLA: the stacked experts carry their E split as sdy.sharding, the
// text parses back to the same text, and on one device it computes the unsharded step's bits.
TEST(ShardedMoe, GlobalProgramShardsTheExpertsOnE) {
  const io::ModelConfig c = TinyMoeConfig();
  auto mesh = Mesh::Parse("data=2,model=2");
  ASSERT_TRUE(mesh.ok());
  auto plan = shard::ShardingPlan::Make("dp_tp", *mesh, c, kBatch);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto module = BuildAnnotatedStepProgram(c, Options(), *plan, kSeq);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  const std::string text = PrintModule(**module);
  auto parsed = ParseModule(text, "printed");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(PrintModule(**parsed), text);
  const Function& fn = *(*parsed)->Find("train_step");
  const int n = static_cast<int>(plan->weights().size());
  int experts = 0;
  for (int i = 0; i < n; ++i) {
    auto arg = ArgSharding(fn, i);
    ASSERT_TRUE(arg.ok() && arg->has_value());
    EXPECT_EQ(**arg, plan->weight(i));
    if (!IsExperts(plan->weights()[i].name)) continue;
    ++experts;
    EXPECT_EQ((*arg)->ToSdy(), "#sdy.sharding<@mesh, [{\"model\"}, {}, {}]>")
        << plan->weights()[i].name;
  }
  EXPECT_EQ(experts, 6);
  // No partition_id in the global program: XLA's partitioner splits the experts itself.
  EXPECT_EQ(text.find("partition_id"), std::string::npos);

  auto plain = BuildStepProgram(c, Options(), models::WeightSpecs(c), kBatch, kSeq);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  std::vector<Literal> args = Weights(c);
  for (int g = 0; g < 2; ++g)
    for (size_t i = 0; i < plan->weights().size(); ++i)
      args.push_back(Literal(TensorType(ElementType::kF32, plan->weights()[i].shape)));
  args.push_back(Literal::Scalar<int32_t>(1));
  const Batch batch = MakeBatch(c, 4);
  args.push_back(batch.input_ids);
  args.push_back(batch.labels);
  auto backend = MakeInterpreterBackend({}, 1);
  auto pa = backend->Compile(std::shared_ptr<const Module>(std::move(*parsed)));
  auto pp = backend->Compile(*plain);
  ASSERT_TRUE(pa.ok() && pp.ok());
  auto ra = backend->Run(**pa, args);
  auto rp = backend->Run(**pp, args);
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  ASSERT_TRUE(rp.ok()) << rp.status().ToString();
  ASSERT_EQ(ra->size(), rp->size());
  for (size_t i = 0; i < ra->size(); ++i) EXPECT_TRUE((*ra)[i].BitwiseEquals((*rp)[i])) << i;
}

// The per-device program finds its experts from stablehlo.partition_id and round-trips.
TEST(ShardedMoe, PerDeviceProgramReadsItsExpertSliceFromThePartitionId) {
  const io::ModelConfig c = TinyMoeConfig();
  auto mesh = Mesh::Parse("model=4");
  auto plan = shard::ShardingPlan::Make("tp", *mesh, c, kBatch);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (size_t i = 0; i < plan->weights().size(); ++i) {
    if (IsExperts(plan->weights()[i].name)) {
      EXPECT_EQ(plan->LocalWeightType(i).dims[0], 2) << plan->weights()[i].name;
    }
  }
  auto module = BuildDeviceStepProgram(c, Options(), *plan, kSeq);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  const std::string text = PrintModule(**module);
  EXPECT_NE(text.find("stablehlo.partition_id"), std::string::npos);
  auto parsed = ParseModule(text, "printed");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(PrintModule(**parsed), text);
}

// Through Tlaloc's PJRT plugin (the per-device program compiled for 1 x 4 partitions, whose
// partition_id picks each device's experts), three dp_tp steps equal the interpreter backend's
// bit for bit, as the dense plans do in tests/train/sharded_pjrt_test.cc.
TEST(ShardedMoe, ThroughThePluginEqualsTheInterpreterBitForBit) {
  const io::ModelConfig c = TinyMoeConfig();
  TrainOptions o = Options();
  o.mesh = "data=2,model=2";
  o.plan = "dp_tp";
  pjrt::SessionOptions so;
  so.plugin_path = TLALOC_PJRT_CPU_PLUGIN;
  so.cpu_device_count = 4;
  auto plugin = pjrt::MakePjrtBackend(so);
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  auto interp = MakeInterpreterBackend({}, 4);
  auto want = Trainer::Create(c, Weights(c), o, *interp, kBatch, kSeq);
  auto got = Trainer::Create(c, Weights(c), o, **plugin, kBatch, kSeq);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (int s = 0; s < 3; ++s) {
    const Batch batch = MakeBatch(c, 30 + s);
    auto a = (*want)->Step(batch);
    auto b = (*got)->Step(batch);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(a->loss, b->loss) << "step " << s + 1;
    EXPECT_EQ(a->grad_norm, b->grad_norm) << "step " << s + 1;
  }
  auto wa = (*want)->Weights();
  auto wb = (*got)->Weights();
  ASSERT_TRUE(wa.ok() && wb.ok());
  ASSERT_EQ(wa->size(), wb->size());
  for (size_t i = 0; i < wa->size(); ++i) {
    ASSERT_EQ((*wa)[i].byte_size(), (*wb)[i].byte_size());
    EXPECT_EQ(std::memcmp((*wa)[i].data(), (*wb)[i].data(), (*wa)[i].byte_size()), 0)
        << "weight " << i;
  }
}

}  // namespace
}  // namespace tlaloc::train
