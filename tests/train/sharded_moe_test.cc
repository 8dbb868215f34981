// Expert parallelism's programs: the Shardy-annotated global program splits the stacked experts
// on E, the per-device program finds its experts from stablehlo.partition_id, and through the
// PJRT plugin the dp_tp steps equal the interpreter's. The sharded steps' losses, gradients and
// AdamW steps against one device are ShardedTrainerTest's moe_* cases
// (tests/train/sharded_trainer_test.cc).
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
