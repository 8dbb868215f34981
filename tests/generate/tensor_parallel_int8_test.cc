// Tensor-parallel generation of an int8 checkpoint: the s8 matrices and their f16 block scales
// split together (column-parallel q/k/v, gate/up: rows, and the scales' rows with them;
// row-parallel o_proj, down_proj: whole 32-column blocks, and the scales' blocks with them).
// Ids equal the one-device engine's on 2 interpreter devices; a split that would cut a block is
// refused by name.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "cpu/reduction_matmul_q8_packed.h"
#include "testing/int8_form.h"
#include "testing/tiny_qwen3.h"
#include "testing/tiny_qwen3_variants.h"
#include "tlaloc/generate/engine.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/quantize.h"

namespace tlaloc::generate {
namespace {

io::ModelConfig Int8Config() {
  io::ModelConfig c = testing::TinyQwen3Config({.vocab_size = 96, .initializer_range = 0.2});
  c.quantization = io::WeightQuantization{};
  return c;
}

std::vector<Literal> Int8Weights(const io::ModelConfig& qc) {
  return testing::RandomWeightsAsStored(qc, 11);
}

std::vector<int32_t> Prompt(int64_t len) {
  std::vector<int32_t> p(len);
  for (int64_t i = 0; i < len; ++i) p[i] = static_cast<int32_t>((13 * i + 2) % 96);
  return p;
}

// Greedy ids: the prompt prefilled whole, then `steps` decode steps.
StatusOr<std::vector<int32_t>> Greedy(Engine& e, const std::vector<int32_t>& prompt,
                                      int64_t steps) {
  TL_RETURN_IF_ERROR(e.Reserve(1, 64));
  PrefillRow p;
  p.slot = 0;
  p.prompt = prompt;
  TL_ASSIGN_OR_RETURN(EngineStep step, e.Prefill(std::span<const PrefillRow>(&p, 1)));
  std::vector<int32_t> ids{step.tokens[0]};
  for (int64_t s = 1; s <= steps; ++s) {
    DecodeRow d;
    d.slot = 0;
    d.token = ids.back();
    d.position = static_cast<int32_t>(prompt.size() + s - 1);
    TL_ASSIGN_OR_RETURN(step, e.Decode(std::span<const DecodeRow>(&d, 1)));
    ids.push_back(step.tokens[0]);
  }
  e.Release(0);
  return ids;
}

TEST(TensorParallelInt8Engine, IdsEqualOneDeviceOnTwoDevices) {
  const io::ModelConfig c = Int8Config();
  auto one = Engine::Create(c, Int8Weights(c), ElementType::kF32);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  auto mesh = Mesh::Parse("model=2");
  ASSERT_TRUE(mesh.ok());
  auto tp =
      Engine::Create(c, Int8Weights(c), ElementType::kF32, MakeInterpreterBackend({}, 2), *mesh);
  ASSERT_TRUE(tp.ok()) << tp.status().ToString();
  // Each device holds its rows of q_proj and their scales, and its column blocks of o_proj and
  // their scales (whole q_proj: [64, 32] with [64, 1] scales; o_proj [32, 64] with [32, 2]).
  const auto specs = models::WeightSpecs(c);
  int checked = 0;
  for (int d = 0; d < 2; ++d) {
    const auto& held = (*tp)->device_weights(d);
    ASSERT_EQ(held.size(), specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::string& name = specs[i].name;
      std::vector<int64_t> want = specs[i].shape;
      if (name.find("q_proj.weight") != std::string::npos) want[0] /= 2;
      if (name.find("o_proj.weight") != std::string::npos) want[1] /= 2;
      if (want == specs[i].shape) continue;
      EXPECT_EQ(held[i]->type().dims, want) << name;
      EXPECT_EQ(held[i]->type().element_type, *specs[i].fixed_type) << name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 4 * c.num_hidden_layers);  // matrix and scale, q and o, per layer
  std::set<int32_t> seen;                           // the runs are not one id over and over
  for (int64_t len : {6, 23, 40}) {
    auto want = Greedy(**one, Prompt(len), 10);
    auto got = Greedy(**tp, Prompt(len), 10);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, *want) << "prompt " << len;
    seen.insert(want->begin(), want->end());
  }
  EXPECT_GE(seen.size(), 4u);
}

TEST(TensorParallelInt8Engine, EachDevicesPartsArePackedAtLoad) {
  if (!cpu::Q8PackingAvailable())
    GTEST_SKIP() << "no packed q8_0 layout on this CPU (neither AVX512-VNNI nor AVX2)";
  const tlaloc::testing::ScopedInt8Form q8(nn::Int8Form::kQ8_0);
  const io::ModelConfig c = Int8Config();
  int64_t matrices = 0;
  for (const auto& spec : models::WeightSpecs(c))
    matrices += spec.fixed_type == ElementType::kS8 && !spec.read_by_rows;
  ASSERT_GT(matrices, 0);
  auto mesh = Mesh::Parse("model=2");
  ASSERT_TRUE(mesh.ok());
  cpu::ClearQ8Cache();
  const int64_t before = cpu::GetQ8CacheStats().packs;
  auto tp =
      Engine::Create(c, Int8Weights(c), ElementType::kF32, MakeInterpreterBackend({}, 2), *mesh);
  ASSERT_TRUE(tp.ok()) << tp.status().ToString();
  EXPECT_EQ(cpu::GetQ8CacheStats().packs - before, 2 * matrices)
      << "each device's part of each int8 matrix should be packed at load";
  auto ids = Greedy(**tp, Prompt(9), 4);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(cpu::GetQ8CacheStats().packs - before, 2 * matrices)
      << "the first request should find every part packed";
  cpu::ClearQ8Cache();
}

TEST(TensorParallelInt8Engine, BlocksThatWouldStraddleDevicesAreRefusedByName) {
  // o_proj has 64 input columns: 16 per device over 4 would cut every block of 32 in two.
  const io::ModelConfig c = Int8Config();
  auto mesh = Mesh::Parse("model=4");
  ASSERT_TRUE(mesh.ok());
  auto tp =
      Engine::Create(c, Int8Weights(c), ElementType::kF32, MakeInterpreterBackend({}, 4), *mesh);
  ASSERT_FALSE(tp.ok());
  EXPECT_NE(tp.status().message().find(
                "int8 weight model.layers.0.self_attn.o_proj.weight has 64 input columns in "
                "blocks of 32"),
            std::string::npos)
      << tp.status().message();
  EXPECT_NE(tp.status().message().find("a block would straddle devices"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc::generate
