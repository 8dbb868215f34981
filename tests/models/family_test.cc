// The model family registry: lookups by model_type, refusals naming the known families, and
// the entries' pieces agreeing with each other.
#include "tlaloc/models/family.h"

#include <gtest/gtest.h>

#include "models/qwen3_reference.h"

namespace tlaloc {
namespace {

TEST(ModelFamily, KnownTypesAndLookups) {
  auto types = models::KnownModelTypes();
  ASSERT_EQ(types.size(), 2u);
  EXPECT_EQ(types[0], "qwen3");
  EXPECT_EQ(types[1], "qwen3_moe");
  auto dense = models::FindFamily("qwen3");
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ((*dense)->architecture, "Qwen3ForCausalLM");
  io::ModelConfig moe = io::DefaultModelConfig(io::ModelArchitecture::kQwen3Moe);
  auto family = models::FamilyOf(moe);
  ASSERT_TRUE(family.ok());
  EXPECT_EQ((*family)->model_type, "qwen3_moe");
}

TEST(ModelFamily, UnknownTypeNamesTheKnownOnes) {
  auto llama = models::FindFamily("llama");
  ASSERT_FALSE(llama.ok());
  const std::string msg(llama.status().message());
  EXPECT_NE(msg.find("\"llama\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("known: qwen3, qwen3_moe"), std::string::npos) << msg;
}

TEST(ModelFamily, EntryPiecesAgree) {
  io::ModelConfig c = testing::TinyConfig(false, 4, 2, 8);
  auto family = models::FamilyOf(c);
  ASSERT_TRUE(family.ok());
  const models::ModelFamily& f = **family;
  auto specs = f.weight_specs(c);
  ASSERT_FALSE(specs.empty());
  EXPECT_EQ(specs.front().name, f.embedding_weight);
  models::StepShape shape;
  shape.kind = models::StepKind::kPrefill;
  shape.batch = 2;
  shape.prompt_len = 4;
  shape.num_slots = 3;
  shape.max_len = 8;
  auto program = f.build_step(c, shape, nullptr);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const auto& sig = program->signature;
  // The signature names every argument of the entry function, weights first, in spec order.
  const Function* fn = program->module->functions().front().get();
  ASSERT_EQ(fn->entry().num_arguments(), static_cast<int>(sig.inputs.size()));
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(sig.inputs[i].port, models::Port::kWeight);
    EXPECT_EQ(sig.inputs[i].name, specs[i].name);
  }
  EXPECT_EQ(sig.inputs[sig.Input(models::Port::kSlots)].type.dims, std::vector<int64_t>{2});
  // Caches hold all three slots; each cache result updates its argument in place.
  const int k0 = sig.Input(models::Port::kKCache, 0);
  EXPECT_EQ(sig.inputs[k0].type.dims[0], 3);
  const int out_k0 = sig.Output(models::Port::kKCache, 0);
  EXPECT_EQ(sig.outputs[out_k0].aliased_input, k0);
  EXPECT_EQ(sig.outputs[sig.Output(models::Port::kLogits)].type.dims,
            (std::vector<int64_t>{2, c.vocab_size}));
  // A decode step has one row per slot.
  shape.kind = models::StepKind::kDecode;
  EXPECT_FALSE(f.build_step(c, shape, nullptr).ok());
  shape.batch = 3;
  EXPECT_TRUE(f.build_step(c, shape, nullptr).ok());
}

}  // namespace
}  // namespace tlaloc
