// Kernels in the global (Shardy-annotated) form of a generation step: the tiny Qwen3 prefill
// program built with the tp plan's activation constraints, kernelized with the cpu RMSNorm and
// SiluAndMul kernels, annotated for mesh model=2 (weights and KV pools split as the plan says)
// and every kernel call placed in an sdy.manual_computation. Structural pins (q_norm's and
// k_norm's calls take their heads split over `model`, the others whole), the printed program
// parses back to the same text, and on one device (the manual computations run their body on
// each part) it gives the kernelized one-device program's results bit for bit.
#include "tlaloc/shard/manual_kernels.h"

#include <gtest/gtest.h>

#include "kernels/kernel_repo_fixture.h"
#include "models/qwen3_reference.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/kernels/kernelize.h"
#include "tlaloc/models/family.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::kernels {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ManualKernels, KernelCallsGoInsideManualComputationsOfTheGlobalStep) {
  if (!testing::HaveGit()) TL_ORACLE_MISSING("git (the git CLI) is not installed");
  auto root = testing::KernelTempDir("manual");
  testing::RefModel m = testing::RandomModel(testing::TinyConfig(false, 4, 2, 8), 11);
  auto kernelizer = testing::CpuRmsNormAndSiluKernelizer(root, m.config.rms_norm_eps);
  ASSERT_TRUE(kernelizer.ok()) << kernelizer.status().ToString();

  auto mesh = Mesh::Parse("model=2");
  ASSERT_TRUE(mesh.ok());
  auto plan = shard::ShardingPlan::Make("tp", *mesh, m.config, 1);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto family = models::FamilyOf(m.config);
  ASSERT_TRUE(family.ok());
  models::StepShape shape;
  shape.kind = models::StepKind::kPrefill;
  shape.batch = 2;
  shape.prompt_len = 8;
  shape.max_len = 16;
  models::ParallelHooks hooks;
  hooks.annotate = shard::GenerationAnnotateHook(*plan);
  nn::LayerTrace trace;
  auto built = (*family)->build_step(m.config, shape, &trace, &hooks);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto kernelized = kernelizer->Apply(built->module, trace);
  ASSERT_TRUE(kernelized.ok()) << kernelized.status().ToString();
  // 2 layers x 4 RMSNorms + the final norm, 2 SiluAndMul.
  ASSERT_EQ(kernelized->replaced.size(), 11u);
  // The one-device program: the kernelized step as it is (its constraints are the identity).
  const std::string one_device = PrintModule(*built->module);
  ASSERT_EQ(Count(one_device, "stablehlo.custom_call"), 11u);

  Module& global = *built->module;
  ASSERT_TRUE(shard::AnnotateGenerationStep(global, built->entry, built->signature, *plan).ok());
  auto wrapped = shard::PlaceKernelsInManualComputations(global, built->entry);
  ASSERT_TRUE(wrapped.ok()) << wrapped.status().ToString();
  EXPECT_EQ(*wrapped, 11);
  const std::string text = PrintModule(global);
  EXPECT_EQ(Count(text, "sdy.manual_computation("), 11u);
  EXPECT_EQ(Count(text, "manual_axes={\"model\"}"), 11u);
  for (const char* want : {
           "sdy.mesh @mesh = <[\"model\"=2]>",
           // q_norm and k_norm: heads [2, 8, heads, 8] split over model, the weight whole; the
           // body takes each device's heads.
           "in_shardings=[<@mesh, [{}, {}, {\"model\"}, {}]>, <@mesh, [{}]>] "
           "out_shardings=[<@mesh, [{}, {}, {\"model\"}, {}]>] manual_axes={\"model\"} "
           "(%",
           ": tensor<2x8x2x8xf32>, %",
           // q_proj's rows split (column parallel), the KV pools' heads.
           "tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"model\"}, {}]>}",
           "tensor<2x2x16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {\"model\"}, {}, "
           "{}]>}",
       })
    EXPECT_NE(text.find(want), std::string::npos) << want << "\nin\n" << text;
  EXPECT_EQ(Count(text, "in_shardings=[<@mesh, [{}, {}, {\"model\"}, {}]>"), 4u);  // q/k norms
  auto back = ParseModule(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(PrintModule(**back), text);

  auto one = ParseModule(one_device);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  InterpreterOptions io;
  io.custom_calls = kernelizer->CustomCalls();
  std::map<models::Port, Literal> inputs;
  std::vector<int32_t> tokens(16), positions(16);
  for (int i = 0; i < 16; ++i) {
    tokens[i] = (7 * i + 3) % 96;
    positions[i] = i % 8;
  }
  inputs[models::Port::kTokens] = Literal::FromVector<int32_t>({2, 8}, tokens);
  inputs[models::Port::kPositions] = Literal::FromVector<int32_t>({2, 8}, positions);
  inputs[models::Port::kLengths] = Literal::FromVector<int32_t>({2}, {8, 5});
  inputs[models::Port::kSlots] = Literal::FromVector<int32_t>({2}, {1, 0});
  auto args = [&] {
    std::map<models::Port, Literal> copy;
    for (const auto& [port, value] : inputs) copy[port] = value.Clone();
    return testing::StepArgs(*built, m.literals, std::move(copy));
  };
  auto want = Interpret(**one, built->entry, args(), nullptr, io);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const Module* run : {&global, back->get()}) {
    auto got = Interpret(*run, built->entry, args(), nullptr, io);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t r = 0; r < want->size(); ++r) {
      ASSERT_EQ((*got)[r].byte_size(), (*want)[r].byte_size()) << "result " << r;
      EXPECT_EQ(std::memcmp((*got)[r].data(), (*want)[r].data(), (*want)[r].byte_size()), 0)
          << "result " << r;
    }
  }
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace tlaloc::kernels
