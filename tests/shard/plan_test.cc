// Sharding plans: names, the meshes and dimensions they refuse (by name), each weight's
// sharding per plan, device groups, and splitting / assembling host tensors.
#include "tlaloc/shard/plan.h"

#include <gtest/gtest.h>

#include "testing/tiny_qwen3.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::shard {
namespace {

io::ModelConfig TinyConfig() { return testing::TinyQwen3Config(); }

Mesh MeshOf(const char* text) {
  auto m = Mesh::Parse(text);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return *m;
}

std::string Error(std::string_view plan, const char* mesh, const io::ModelConfig& c,
                  int64_t batch) {
  auto p = ShardingPlan::Make(plan, MeshOf(mesh), c, batch);
  return p.ok() ? std::string("(accepted)") : p.status().message();
}

size_t IndexOf(const ShardingPlan& p, const std::string& name) {
  for (size_t i = 0; i < p.weights().size(); ++i)
    if (p.weights()[i].name == name) return i;
  ADD_FAILURE() << "no weight " << name;
  return 0;
}

TEST(ShardingPlan, UnknownNamesAreRefusedNamingTheFour) {
  EXPECT_EQ(Error("zero3", "data=2", TinyConfig(), 4),
            "unknown sharding plan 'zero3': expected one of dp, fsdp, tp, dp_tp");
  for (const char* name : {"dp", "fsdp", "tp", "dp_tp"}) {
    auto k = PlanByName(name);
    ASSERT_TRUE(k.ok());
    EXPECT_EQ(PlanName(*k), name);
  }
}

TEST(ShardingPlan, MeshesWhoseAxesDoNotFitThePlanAreRefused) {
  const auto c = TinyConfig();
  EXPECT_NE(Error("dp", "model=2", c, 4).find("plan dp needs a mesh of the axes 'data'"),
            std::string::npos);
  EXPECT_NE(Error("tp", "data=2", c, 4).find("got mesh data=2"), std::string::npos);
  EXPECT_NE(Error("dp_tp", "data=4", c, 4).find("'data' and 'model'"), std::string::npos);
  EXPECT_NE(Error("fsdp", "data=2,model=2", c, 4).find("got mesh data=2,model=2"),
            std::string::npos);
  EXPECT_EQ(Error("dp_tp", "model=2,data=2", c, 4), "(accepted)");
}

TEST(ShardingPlan, DimensionsThatDoNotDivideAreRefusedByName) {
  io::ModelConfig c = TinyConfig();
  EXPECT_EQ(Error("dp", "data=4", c, 6),
            "plan dp: batch 6 does not divide by mesh axis 'data' (size 4)");
  EXPECT_EQ(Error("fsdp", "data=4", c, 2),
            "plan fsdp: batch 2 does not divide by mesh axis 'data' (size 4)");
  c.num_key_value_heads = 2;
  EXPECT_EQ(Error("tp", "model=4", c, 1),
            "plan tp: num_key_value_heads 2 does not divide by mesh axis 'model' (size 4)");
  c = TinyConfig();
  c.num_attention_heads = 4;
  c.num_key_value_heads = 4;
  EXPECT_EQ(Error("tp", "model=8", c, 1),
            "plan tp: num_attention_heads 4 does not divide by mesh axis 'model' (size 8)");
  c = TinyConfig();
  c.intermediate_size = 66;
  EXPECT_EQ(Error("dp_tp", "data=2,model=4", c, 2),
            "plan dp_tp: intermediate_size 66 does not divide by mesh axis 'model' (size 4)");
}

TEST(ShardingPlan, EachPlanShardsTheWeightsItSays) {
  const auto c = TinyConfig();
  auto dp = ShardingPlan::Make("dp", MeshOf("data=2"), c, 4);
  ASSERT_TRUE(dp.ok()) << dp.status().ToString();
  for (size_t i = 0; i < dp->weights().size(); ++i) EXPECT_EQ(dp->WeightDim(i), -1);
  EXPECT_EQ(dp->tokens().ToSdy(), "#sdy.sharding<@mesh, [{\"data\"}, {}]>");
  EXPECT_EQ(dp->local_batch(), 2);

  auto fsdp = ShardingPlan::Make("fsdp", MeshOf("data=4"), c, 4);
  ASSERT_TRUE(fsdp.ok());
  for (size_t i = 0; i < fsdp->weights().size(); ++i) {
    EXPECT_EQ(fsdp->WeightDim(i), 0) << fsdp->weights()[i].name;
    EXPECT_EQ(fsdp->LocalWeightType(i).dims[0] * 4, fsdp->weights()[i].shape[0]);
  }

  auto tp = ShardingPlan::Make("tp", MeshOf("model=2"), c, 3);
  ASSERT_TRUE(tp.ok());
  const std::string l = "model.layers.1.";
  EXPECT_EQ(tp->weight(IndexOf(*tp, l + "self_attn.q_proj.weight")).ToSdy(),
            "#sdy.sharding<@mesh, [{\"model\"}, {}]>");
  EXPECT_EQ(tp->weight(IndexOf(*tp, l + "self_attn.k_proj.weight")).ToSdy(),
            "#sdy.sharding<@mesh, [{\"model\"}, {}]>");
  EXPECT_EQ(tp->weight(IndexOf(*tp, l + "self_attn.o_proj.weight")).ToSdy(),
            "#sdy.sharding<@mesh, [{}, {\"model\"}]>");
  EXPECT_EQ(tp->weight(IndexOf(*tp, l + "mlp.up_proj.weight")).ToSdy(),
            "#sdy.sharding<@mesh, [{\"model\"}, {}]>");
  EXPECT_EQ(tp->weight(IndexOf(*tp, l + "mlp.down_proj.weight")).ToSdy(),
            "#sdy.sharding<@mesh, [{}, {\"model\"}]>");
  for (const char* replicated :
       {"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"})
    EXPECT_EQ(tp->WeightDim(IndexOf(*tp, replicated)), -1) << replicated;
  EXPECT_EQ(tp->tokens().ToSdy(), "#sdy.sharding<@mesh, [{}, {}]>");
  EXPECT_EQ(tp->activation("heads").ToSdy(), "#sdy.sharding<@mesh, [{}, {}, {\"model\"}, {}]>");

  auto dp_tp = ShardingPlan::Make("dp_tp", MeshOf("data=2,model=2"), c, 4);
  ASSERT_TRUE(dp_tp.ok());
  EXPECT_EQ(dp_tp->activation("heads").ToSdy(),
            "#sdy.sharding<@mesh, [{\"data\"}, {}, {\"model\"}, {}]>");
  EXPECT_EQ(dp_tp->LocalWeightType(IndexOf(*dp_tp, l + "mlp.down_proj.weight")).dims,
            (std::vector<int64_t>{32, 32}));
}

// Expert parallelism: tp and dp_tp split a MoE layer's stacked experts [E, out, in] on E over
// `model`; the router stays whole; E must divide.
TEST(ShardingPlan, TensorParallelPlansSplitTheExpertsOnE) {
  io::ModelConfig c = TinyConfig();
  c.architecture = models::qwen3::kQwen3Moe;
  models::qwen3::MoeConfig& moe_fields = models::qwen3::MutableMoe(c);
  moe_fields.num_experts = 8;
  moe_fields.num_experts_per_tok = 2;
  moe_fields.moe_intermediate_size = 16;
  moe_fields.mlp_only_layers = {0};  // layer 0 dense, layer 1 MoE
  auto tp = ShardingPlan::Make("tp", MeshOf("model=4"), c, 1);
  ASSERT_TRUE(tp.ok()) << tp.status().ToString();
  EXPECT_TRUE(tp->splits_experts());
  const std::string l = "model.layers.1.mlp.";
  for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
    const size_t i = IndexOf(*tp, l + "experts." + proj + ".weight");
    EXPECT_EQ(tp->weight(i).ToSdy(), "#sdy.sharding<@mesh, [{\"model\"}, {}, {}]>") << proj;
    EXPECT_EQ(tp->LocalWeightType(i).dims[0], 2) << proj;
  }
  EXPECT_EQ(tp->WeightDim(IndexOf(*tp, l + "gate.weight")), -1);  // the router
  EXPECT_EQ(tp->WeightDim(IndexOf(*tp, "model.layers.0.mlp.down_proj.weight")), 1);
  auto one = ShardingPlan::Make("dp_tp", MeshOf("data=2,model=1"), c, 2);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_FALSE(one->splits_experts());
  auto dp = ShardingPlan::Make("dp", MeshOf("data=2"), c, 2);
  ASSERT_TRUE(dp.ok());
  EXPECT_FALSE(dp->splits_experts());

  moe_fields.num_experts = 6;
  EXPECT_EQ(Error("tp", "model=4", c, 1),
            "plan tp: num_experts 6 does not divide by mesh axis 'model' (size 4)");
  EXPECT_EQ(Error("dp_tp", "data=2,model=4", c, 2),
            "plan dp_tp: num_experts 6 does not divide by mesh axis 'model' (size 4)");
  // Every layer sparse: intermediate_size sizes no layer, so it need not divide.
  moe_fields.num_experts = 8;
  moe_fields.mlp_only_layers = {};
  c.intermediate_size = 66;
  EXPECT_EQ(Error("tp", "model=4", c, 1), "(accepted)");
}

TEST(ShardingPlan, GroupsVaryOnlyAlongTheirAxes) {
  auto p = ShardingPlan::Make("dp_tp", MeshOf("data=2,model=2"), TinyConfig(), 2);
  ASSERT_TRUE(p.ok());
  using G = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(p->Groups({kModelAxis}), (G{{0, 1}, {2, 3}}));
  EXPECT_EQ(p->Groups({kDataAxis}), (G{{0, 2}, {1, 3}}));
  EXPECT_EQ(p->Groups({}), (G{{0}, {1}, {2}, {3}}));
  EXPECT_EQ(p->Groups({kDataAxis, kModelAxis}), (G{{0, 1, 2, 3}}));
  EXPECT_EQ(p->OtherAxes({kModelAxis}), std::vector<std::string>{kDataAxis});
}

TEST(ShardingPlan, LocalPartsAssembleBackToTheWhole) {
  const Mesh mesh = MeshOf("data=2,model=2");
  std::vector<float> values(4 * 6);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  const Literal whole = Literal::FromVector<float>({4, 6}, values);
  Sharding s = Sharding::Replicated(2);
  s.dims[0] = {"data"};
  s.dims[1] = {"model"};
  std::vector<Literal> parts;
  for (int d = 0; d < 4; ++d) {
    auto part = LocalPart(whole, mesh, s, d);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    parts.push_back(*part);
  }
  // Device 3 is (data 1, model 1): rows 2..3, columns 3..5.
  EXPECT_EQ(parts[3].dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(parts[3].span<float>()[0], 15.0f);
  EXPECT_EQ(parts[3].span<float>()[5], 23.0f);
  auto back = Assemble(parts, mesh, s, whole.type());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->BitwiseEquals(whole));
  parts.pop_back();
  EXPECT_FALSE(Assemble(parts, mesh, s, whole.type()).ok());
}

}  // namespace
}  // namespace tlaloc::shard
