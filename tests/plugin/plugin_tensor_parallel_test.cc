// Tensor-parallel generation of a MoE model (experts split over the devices) and of an int8
// checkpoint (matrices and block scales split together) through Tlaloc's PJRT plugin: ids and
// prefill logits equal the interpreter backend's on the same mesh bit for bit (2 and 4 devices
// for MoE, 2 for int8), as the dense model's do (tests/train/sharded_pjrt_test.cc).
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "testing/tiny_qwen3.h"
#include "testing/tiny_qwen3_variants.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/quantize.h"
#include "tlaloc/pjrt/pjrt_backend.h"

namespace tlaloc {
namespace {

std::shared_ptr<Backend> PluginBackend(int devices) {
  pjrt::SessionOptions o;
  o.plugin_path = TLALOC_PJRT_CPU_PLUGIN;
  o.cpu_device_count = devices;
  auto b = pjrt::MakePjrtBackend(o);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? std::shared_ptr<Backend>(std::move(*b)) : nullptr;
}

io::ModelConfig TinyMoeConfig() {
  return testing::AsTinyMoe(testing::TinyQwen3Config({.vocab_size = 96, .initializer_range = 0.2}));
}

std::vector<Literal> Weights(const io::ModelConfig& c) {
  return testing::RandomWeightsAsStored(c, 11);
}

void ExpectPluginEqualsInterpreter(const io::ModelConfig& c, int n) {
  const std::string what = "model=" + std::to_string(n);
  auto mesh = Mesh::Parse(what);
  ASSERT_TRUE(mesh.ok());
  std::shared_ptr<Backend> plugin = PluginBackend(n);
  ASSERT_NE(plugin, nullptr);
  auto a = generate::Generator::Create(c, Weights(c), ElementType::kF32,
                                       MakeInterpreterBackend({}, n), *mesh);
  auto b = generate::Generator::Create(c, Weights(c), ElementType::kF32, plugin, *mesh);
  ASSERT_TRUE(a.ok()) << what << ": " << a.status().ToString();
  ASSERT_TRUE(b.ok()) << what << ": " << b.status().ToString();
  ASSERT_EQ((*b)->engine().num_devices(), n);
  const std::vector<std::vector<int32_t>> prompts = {
      {5, 17, 42, 8, 63}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}};
  generate::GenerateOptions o;
  o.max_new_tokens = 8;
  o.row_sampling.resize(2);
  o.row_sampling[1].temperature = 1.3;
  o.row_seeds = {0, 99};
  auto want = (*a)->Generate(prompts, o);
  auto got = (*b)->Generate(prompts, o);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
  for (size_t r = 0; r < prompts.size(); ++r) {
    EXPECT_EQ((*got)[r].generated_ids, (*want)[r].generated_ids) << what << ", row " << r;
    EXPECT_EQ((*want)[r].generated_ids.size(), 8u);
  }
  auto pa = (*a)->Prefill({prompts[1]}, 32, {}, 0);
  auto pb = (*b)->Prefill({prompts[1]}, 32, {}, 0);
  ASSERT_TRUE(pa.ok() && pb.ok());
  ASSERT_EQ(pa->logits.byte_size(), pb->logits.byte_size());
  EXPECT_EQ(std::memcmp(pa->logits.data(), pb->logits.data(), pa->logits.byte_size()), 0) << what;
}

TEST(PluginTensorParallel, MoeExpertsSplitEqualTheInterpreterBitForBit) {
  for (int n : {2, 4}) ExpectPluginEqualsInterpreter(TinyMoeConfig(), n);
}

TEST(PluginTensorParallel, Int8CheckpointSplitEqualsTheInterpreterBitForBit) {
  io::ModelConfig c = testing::TinyQwen3Config({.vocab_size = 96, .initializer_range = 0.2});
  c.quantization = io::WeightQuantization{};
  ExpectPluginEqualsInterpreter(c, 2);
}

}  // namespace
}  // namespace tlaloc
