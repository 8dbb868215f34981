// The sharding plans through a PJRT backend (issue 16's `--target ... --mesh`): the Trainer's
// per-device step is compiled by the plugin for replicas x partitions and runs with one argument
// list per device in one Execute, parameters and moments kept on the plugin's devices between
// steps. Tlaloc's plugin runs the same interpreter, so every loss, gradient norm and trained
// weight must equal the interpreter backend's bit for bit; a difference means the printed text,
// the compile options, the device order or the donation lists lost something on the way.
// Tensor-parallel generation through the engine (weights and KV pools split over the plugin's
// devices) gives the interpreter backend's ids and logits, bit for bit, greedy and sampled.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "sharded_test_util.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/models/init.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/train/sharded_trainer.h"

namespace tlaloc::train {
namespace {

using namespace testing_sharded;  // NOLINT: the shared fixture's names read as local ones

// Tlaloc's plugin with `devices` CPU devices, as `--target PATH` with TLALOC_CPU_DEVICES opens it.
std::unique_ptr<Backend> PluginBackend(int devices) {
  pjrt::SessionOptions o;
  o.plugin_path = TLALOC_PJRT_CPU_PLUGIN;
  o.cpu_device_count = devices;
  auto b = pjrt::MakePjrtBackend(o);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? std::move(*b) : nullptr;
}

struct Case {
  const char* plan;
  const char* mesh;
  const char* name;
};

class ShardedPjrtTest : public ::testing::TestWithParam<Case> {};

TEST_P(ShardedPjrtTest, ThreeAdamWStepsEqualTheInterpreterBackendBitForBit) {
  const Case k = GetParam();
  const io::ModelConfig c = TinyConfig();
  auto mesh = Mesh::Parse(k.mesh);
  ASSERT_TRUE(mesh.ok());
  const int n = static_cast<int>(mesh->num_devices());
  TrainOptions o = Options();
  o.mesh = k.mesh;
  o.plan = k.plan;
  auto interp = MakeInterpreterBackend({}, n);
  auto plugin = PluginBackend(n);
  ASSERT_NE(plugin, nullptr);
  ASSERT_EQ(plugin->num_devices(), n);
  auto want = Trainer::Create(c, Weights(c), o, *interp, kBatch, kSeq);
  auto got = Trainer::Create(c, Weights(c), o, *plugin, kBatch, kSeq);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ShardedTrainer* sharded = (*got)->sharded();
  ASSERT_NE(sharded, nullptr);
  for (int s = 0; s < 3; ++s) {
    const Batch batch = MakeBatch(c, 20 + s);
    auto a = (*want)->Step(batch);
    auto b = (*got)->Step(batch);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(a->loss, b->loss) << "step " << s + 1;
    EXPECT_EQ(a->grad_norm, b->grad_norm) << "step " << s + 1;
    EXPECT_EQ(a->tokens, b->tokens);
    // Between steps every parameter and moment is a live buffer of its own plugin device.
    for (int which = 0; which < 3; ++which)
      for (int dev = 0; dev < n; ++dev)
        for (size_t i = 0; i < sharded->plan().weights().size(); ++i) {
          const DeviceBuffer& held = sharded->held(which, dev, i);
          ASSERT_EQ(held.device(), dev);
          ASSERT_FALSE(held.is_deleted());
        }
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

INSTANTIATE_TEST_SUITE_P(Plans, ShardedPjrtTest,
                         ::testing::Values(Case{"dp", "data=2", "dp_2"},
                                           Case{"fsdp", "data=2", "fsdp_2"},
                                           Case{"tp", "model=2", "tp_2"},
                                           Case{"dp_tp", "data=2,model=2", "dp_tp_2x2"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ShardedPjrt, TensorParallelEngineGivesTheInterpretersIdsAndLogits) {
  const io::ModelConfig c = testing::TinyQwen3Config({.vocab_size = 96, .initializer_range = 0.2});
  for (int n : {2, 4}) {
    auto mesh = Mesh::Parse("model=" + std::to_string(n));
    ASSERT_TRUE(mesh.ok());
    std::shared_ptr<Backend> plugin = PluginBackend(n);
    ASSERT_NE(plugin, nullptr);
    auto a = generate::Generator::Create(c, Weights(c, 11), ElementType::kF32,
                                         MakeInterpreterBackend({}, n), *mesh);
    auto b = generate::Generator::Create(c, Weights(c, 11), ElementType::kF32, plugin, *mesh);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_EQ((*b)->engine().num_devices(), n);
    // Two prompts (one past a 16-token block), one greedy row and one sampled row.
    const std::vector<std::vector<int32_t>> prompts = {
        {5, 17, 42, 8, 63},
        {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}};
    generate::GenerateOptions o;
    o.max_new_tokens = 10;
    o.row_sampling.resize(2);
    o.row_sampling[1].temperature = 1.3;
    o.row_seeds = {0, 99};
    auto want = (*a)->Generate(prompts, o);
    auto got = (*b)->Generate(prompts, o);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (size_t r = 0; r < prompts.size(); ++r) {
      EXPECT_EQ((*got)[r].generated_ids, (*want)[r].generated_ids) << n << " devices, row " << r;
      EXPECT_EQ((*want)[r].generated_ids.size(), 10u);
    }
    // The KV pools live on the plugin's devices, each with its KV heads.
    for (int d = 0; d < n; ++d)
      for (const auto& pool : (*b)->engine().device_caches(d)) {
        EXPECT_EQ(pool->device(), d);
        EXPECT_EQ(pool->type().dims[1], c.num_key_value_heads / n);
      }
    // Logits bit for bit: one more step on each from the same cache contents.
    auto pa = (*a)->Prefill({prompts[1]}, 32, {}, 0);
    auto pb = (*b)->Prefill({prompts[1]}, 32, {}, 0);
    ASSERT_TRUE(pa.ok() && pb.ok());
    ASSERT_EQ(pa->logits.byte_size(), pb->logits.byte_size());
    EXPECT_EQ(std::memcmp(pa->logits.data(), pb->logits.data(), pa->logits.byte_size()), 0);
  }
}

TEST(ShardedPjrt, TooFewPluginDevicesAreRefusedByName) {
  auto plugin = PluginBackend(1);
  ASSERT_NE(plugin, nullptr);
  const io::ModelConfig c = TinyConfig();
  TrainOptions o;
  o.mesh = "data=2";
  o.plan = "dp";
  auto t = Trainer::Create(c, Weights(c), o, *plugin, kBatch, kSeq);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("2 devices"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace tlaloc::train
