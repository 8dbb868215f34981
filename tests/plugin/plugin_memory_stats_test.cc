// Tlaloc's plugin reports PJRT_Executable_GetCompiledMemoryStats from the interpreter's plan:
// argument and output bytes, aliased (donated) bytes once, and the peak of live temporaries
// including those of a callee or a region while the op holding it runs.
#include <gtest/gtest.h>

#include "models/qwen3_reference.h"
#include "pjrt/pjrt_test_util.h"
#include "tlaloc/models/family.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/pjrt/session.h"

namespace tlaloc::pjrt {
namespace {

std::unique_ptr<PjrtSession> OpenTlalocPlugin() {
  SessionOptions o;
  o.target = PjrtTarget::Path(pjrt::testing::CpuPluginPath());
  auto s = PjrtSession::Open(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// 16-byte temporaries in the callee: %0 lives while %1 is computed; %1 is the output.
constexpr const char* kCall = R"(
func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @square_of_double(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @square_of_double(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %x : tensor<4xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
})";

// A 64-byte temporary in main is live while the callee's 16 bytes are.
constexpr const char* kCallWhileLive = R"(
func.func public @main(%a: tensor<4xf32>, %b: tensor<16xf32>) -> (tensor<4xf32>, tensor<16xf32>) {
  %big = stablehlo.multiply %b, %b : tensor<16xf32>
  %0 = func.call @square_of_double(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.add %big, %b : tensor<16xf32>
  return %0, %1 : tensor<4xf32>, tensor<16xf32>
}
func.func private @square_of_double(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %x : tensor<4xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
})";

TEST(PluginMemoryStats, CalleeTemporariesCountWhileTheCallRuns) {
  auto session = OpenTlalocPlugin();
  ASSERT_TRUE(session);
  auto exe = session->Compile(kCall);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto s = (*exe)->MemoryStats();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->argument_bytes, 16);
  EXPECT_EQ(s->output_bytes, 16);
  EXPECT_EQ(s->temp_bytes, 16) << "the callee's result is the output, counted once";
  EXPECT_EQ(s->alias_bytes, 0);

  auto both = session->Compile(kCallWhileLive);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  auto s2 = (*both)->MemoryStats();
  ASSERT_TRUE(s2.ok()) << s2.status().ToString();
  EXPECT_EQ(s2->argument_bytes, 16 + 64);
  EXPECT_EQ(s2->output_bytes, 16 + 64);
  EXPECT_EQ(s2->temp_bytes, 64 + 16);
}

TEST(PluginMemoryStats, DecodeStepAliasesEveryCache) {
  io::ModelConfig config = tlaloc::testing::TinyConfig(false, 4, 2, 8);
  models::StepShape shape;
  shape.batch = 2;
  shape.max_len = 64;
  auto module = models::BuildStep(config, shape);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto session = OpenTlalocPlugin();
  ASSERT_TRUE(session);
  auto backend = MakePjrtBackend(std::move(session));
  auto program = backend->Compile(module->module, module->entry);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  auto s = backend->MemoryStats(**program);
  ASSERT_TRUE(s.ok()) << s.status().ToString();

  const int64_t cache_bytes =
      2 * config.num_hidden_layers * models::KvCacheType(config, shape).byte_size();
  int64_t weight_bytes = 0;
  for (const auto& spec : models::WeightSpecs(config)) weight_bytes += 4 * NumElements(spec.shape);
  EXPECT_EQ(s->alias_bytes, cache_bytes);
  // Weights, caches, and the small per-step inputs (per row: token, position, temperature,
  // top-k, top-p, two key words, step, min-p: 36 bytes; no penalty inputs in a plain step).
  EXPECT_GT(s->argument_bytes, weight_bytes + cache_bytes);
  EXPECT_LE(s->argument_bytes, weight_bytes + cache_bytes + 2 * 36);
  // Sampled tokens, f32 logits, and the updated caches.
  EXPECT_EQ(s->output_bytes, 2 * 4 + 2 * config.vocab_size * 4 + cache_bytes);
  EXPECT_GT(s->temp_bytes, 0);
}

}  // namespace
}  // namespace tlaloc::pjrt
