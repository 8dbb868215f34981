// The two lowerings of one sharded train step, printed: the global program with Shardy
// annotations (what XLA's partitioner takes) and the per-device program with collectives. Both
// parse back and print the same text; the global program's shardings and constraints are what
// the plan says (structural pins: XLA is not on this machine) and, with the constraints being
// the identity on one device, it computes the unsharded step's exact bits.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "testing/tiny_qwen3.h"
#include "tlaloc/models/init.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"
#include "tlaloc/train/sharded_trainer.h"
#include "train/train_step.h"

namespace tlaloc::train {
namespace {

io::ModelConfig TinyConfig() {
  return testing::TinyQwen3Config({.num_attention_heads = 4, .num_key_value_heads = 2});
}

constexpr int64_t kBatch = 4, kSeq = 8;

struct Case {
  const char* plan;
  const char* mesh;
};

shard::ShardingPlan PlanOf(const Case& k) {
  auto mesh = Mesh::Parse(k.mesh);
  EXPECT_TRUE(mesh.ok());
  auto plan = shard::ShardingPlan::Make(k.plan, *mesh, TinyConfig(), kBatch);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return *plan;
}

// Ops by name in a function's top-level block, and the shardings of its constraints.
struct Census {
  std::map<std::string, int> ops;
  std::map<std::string, int> constraints;  // sharding text -> count
  std::map<int64_t, int> channels;         // channel handle -> collectives carrying it
};

Census Count(const Function& fn) {
  Census c;
  for (const auto& op : fn.entry().operations()) {
    ++c.ops[op->name()];
    if (op->name() == "sdy.sharding_constraint")
      ++c.constraints[FindAttr(op->attrs(), "sharding")->as_string()];
    if (const Attribute* h = FindAttr(op->attrs(), "channel_handle"))
      ++c.channels[GetIntAttr(h->as_dict(), "handle", 0)];
  }
  return c;
}

std::string RoundTrip(const Module& m, std::string* error) {
  const std::string text = PrintModule(m);
  auto parsed = ParseModule(text, "printed");
  if (!parsed.ok()) {
    *error = parsed.status().ToString();
    return "";
  }
  return PrintModule(**parsed);
}

class AnnotatedStepTest : public ::testing::TestWithParam<Case> {};

TEST_P(AnnotatedStepTest, GlobalProgramCarriesThePlansShardingsAndRoundTrips) {
  const shard::ShardingPlan plan = PlanOf(GetParam());
  auto module = BuildAnnotatedStepProgram(TinyConfig(), TrainOptions{}, plan, kSeq);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  std::string error;
  const std::string text = PrintModule(**module);
  EXPECT_EQ(RoundTrip(**module, &error), text) << error;
  EXPECT_NE(text.find("sdy.mesh @mesh = " + plan.mesh().ToSdy()), std::string::npos);

  auto parsed = ParseModule(text, "printed");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Function& fn = *(*parsed)->Find("train_step");
  auto mesh = FindMesh(**parsed, "mesh");
  ASSERT_TRUE(mesh.ok());
  EXPECT_EQ(mesh->ToString(), plan.mesh().ToString());
  const int n = static_cast<int>(plan.weights().size());
  for (int g = 0; g < 3; ++g) {
    for (int i = 0; i < n; ++i) {
      auto arg = ArgSharding(fn, g * n + i);
      auto result = ResultSharding(fn, g * n + i);
      ASSERT_TRUE(arg.ok() && arg->has_value() && result.ok() && result->has_value());
      EXPECT_EQ(**arg, plan.weight(i)) << plan.weights()[i].name;
      EXPECT_EQ(**result, plan.weight(i)) << plan.weights()[i].name;
    }
  }
  for (int t : {3 * n + 1, 3 * n + 2}) {
    auto s = ArgSharding(fn, t);
    ASSERT_TRUE(s.ok() && s->has_value());
    EXPECT_EQ(**s, plan.tokens());
  }
  // The partitioner inserts the collectives; the global program has none.
  const Census census = Count(fn);
  for (const char* op :
       {"stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter"})
    EXPECT_EQ(census.ops.count(op), 0u) << op;
  // q, k, v of every layer carry the heads' sharding; every layer's output the residual's;
  // every gradient its weight's sharding.
  const int64_t layers = TinyConfig().num_hidden_layers;
  EXPECT_EQ(census.constraints.at(plan.activation("heads").ToSdy()), 3 * layers);
  std::map<std::string, int> grads;
  for (int i = 0; i < n; ++i) ++grads[plan.weight(i).ToSdy()];
  for (const auto& [sharding, count] : grads) {
    int want = count;
    if (sharding == plan.activation("hidden").ToSdy()) want += layers;
    const auto it = census.constraints.find(sharding);
    ASSERT_NE(it, census.constraints.end()) << sharding;
    EXPECT_GE(it->second, want) << sharding;
  }
}

TEST_P(AnnotatedStepTest, PerDeviceProgramRoundTripsWithItsCollectives) {
  const shard::ShardingPlan plan = PlanOf(GetParam());
  auto module = BuildDeviceStepProgram(TinyConfig(), TrainOptions{}, plan, kSeq);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  std::string error;
  EXPECT_EQ(RoundTrip(**module, &error), PrintModule(**module)) << error;
  const Census census = Count(*(*module)->Find("train_step"));
  const int64_t layers = TinyConfig().num_hidden_layers;
  auto count = [&](const char* op) {
    auto it = census.ops.find(op);
    return it == census.ops.end() ? 0 : it->second;
  };
  // Every collective has its own positive channel handle, gradients' collectives included
  // (autodiff copies the forward's attributes): XLA and StableHLO's reference interpreter pair
  // collectives by handle, and the reference interpreter mixed up two that shared one.
  for (const auto& [handle, uses] : census.channels) {
    EXPECT_GT(handle, 0);
    EXPECT_EQ(uses, 1) << "channel handle " << handle << " is carried by " << uses
                       << " collectives";
  }
  switch (plan.kind()) {
    case shard::PlanKind::kDp:
      // Loss terms, every gradient, and the loss's transpose; no gathers.
      EXPECT_GE(count("stablehlo.all_reduce"), static_cast<int>(plan.weights().size()) + 2);
      EXPECT_EQ(count("stablehlo.all_gather"), 0);
      break;
    case shard::PlanKind::kFsdp:
      EXPECT_EQ(count("stablehlo.all_gather"), static_cast<int>(plan.weights().size()));
      EXPECT_EQ(count("stablehlo.reduce_scatter"), static_cast<int>(plan.weights().size()));
      break;
    case shard::PlanKind::kTp:
    case shard::PlanKind::kDpTp:
      // Per layer: one forward all_reduce per block and its transpose, at least.
      EXPECT_GE(count("stablehlo.all_reduce"), 4 * layers);
      EXPECT_EQ(count("stablehlo.all_gather"), 0);
      break;
  }
}

TEST(AnnotatedStep, OnOneDeviceTheGlobalProgramIsTheUnshardedStep) {
  const io::ModelConfig c = TinyConfig();
  const shard::ShardingPlan plan = PlanOf({"dp_tp", "data=2,model=2"});
  TrainOptions o;
  o.adamw.lr = 1e-2;
  auto annotated = BuildAnnotatedStepProgram(c, o, plan, kSeq);
  auto plain = BuildStepProgram(c, o, models::WeightSpecs(c), kBatch, kSeq);
  ASSERT_TRUE(annotated.ok() && plain.ok());
  std::vector<Literal> args;
  std::vector<Literal> zeros;
  for (auto& t : models::RandomWeights(c, 5, ElementType::kF32)) {
    args.push_back(t.value);
    zeros.push_back(Literal(t.value.type()));
  }
  for (int g = 0; g < 2; ++g)
    for (const Literal& z : zeros) args.push_back(z);
  args.push_back(Literal::Scalar<int32_t>(1));
  std::mt19937 rng(4);
  std::vector<int32_t> ids(kBatch * kSeq);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % c.vocab_size);
  args.push_back(Literal::FromVector<int32_t>({kBatch, kSeq}, ids));
  args.push_back(Literal::FromVector<int32_t>({kBatch, kSeq}, ids));
  auto backend = MakeInterpreterBackend({}, 1);
  auto pa = backend->Compile(*annotated);
  auto pp = backend->Compile(*plain);
  ASSERT_TRUE(pa.ok() && pp.ok());
  auto ra = backend->Run(**pa, args);
  auto rp = backend->Run(**pp, args);
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  ASSERT_TRUE(rp.ok()) << rp.status().ToString();
  ASSERT_EQ(ra->size(), rp->size());
  for (size_t i = 0; i < ra->size(); ++i) EXPECT_TRUE((*ra)[i].BitwiseEquals((*rp)[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(Plans, AnnotatedStepTest,
                         ::testing::Values(Case{"dp", "data=2"}, Case{"fsdp", "data=4"},
                                           Case{"tp", "model=2"}, Case{"dp_tp", "data=2,model=2"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.plan);
                         });

}  // namespace
}  // namespace tlaloc::train
