// The generator with a kernelize program transform: cpu RMSNorm and SiluAndMul kernels from git
// repositories give the same tokens as the decompositions, through the interpreter backend.
#include <gtest/gtest.h>

#include "kernels/kernel_repo_fixture.h"
#include "models/qwen3_reference.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/kernels/kernelize.h"

namespace tlaloc::kernels {
namespace {

TEST(KernelizeGenerate, GeneratorWithCpuKernelsGivesTheSameTokens) {
  if (!testing::HaveGit()) TL_ORACLE_MISSING("git (the git CLI) is not installed");
  auto root = testing::KernelTempDir("gen");
  testing::RefModel m = testing::RandomModel(testing::TinyConfig(false, 4, 2, 8), 11);
  auto kernelizer = testing::CpuRmsNormAndSiluKernelizer(root, m.config.rms_norm_eps);
  ASSERT_TRUE(kernelizer.ok()) << kernelizer.status().ToString();

  auto plain = generate::Generator::Create(m.config, m.literals, ElementType::kF32);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  InterpreterOptions io;
  io.custom_calls = kernelizer->CustomCalls();
  EXPECT_EQ(io.custom_calls.size(), 2u);
  auto kern = generate::Generator::Create(m.config, m.literals, ElementType::kF32,
                                          MakeInterpreterBackend(io));
  ASSERT_TRUE(kern.ok()) << kern.status().ToString();
  size_t replaced = 0;
  (*kern)->set_program_transform(
      [&](std::shared_ptr<Module> module, const nn::LayerTrace& trace) -> Status {
        auto r = kernelizer->Apply(module, trace);
        if (!r.ok()) return r.status();
        replaced += r->replaced.size();
        return OkStatus();
      });
  std::vector<std::vector<int32_t>> prompts{{3, 14, 15, 92, 65}, {35, 89}};
  generate::GenerateOptions opts;
  opts.max_new_tokens = 6;
  auto want = (*plain)->Generate(prompts, opts);
  auto got = (*kern)->Generate(prompts, opts);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (size_t r = 0; r < prompts.size(); ++r)
    EXPECT_EQ((*got)[r].generated_ids, (*want)[r].generated_ids) << "row " << r;
  // 9 RMSNorm and 2 SiluAndMul calls per program, prefill and decode-step programs.
  EXPECT_EQ(replaced, 2u * (4 * 2 + 1 + 2));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace tlaloc::kernels
