// Variant names, targets, and the choice of a variant with the reasons for each rejection.
#include "tlaloc/kernels/variant.h"

#include <gtest/gtest.h>

namespace tlaloc::kernels {
namespace {

Target Host() { return Target::HostCpu(); }

TEST(KernelVariants, ParsesArchNoarchAndUniversalNames) {
  auto cpu = ParseVariantName("tlaloc1-cpu-x86_64-linux");
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ(cpu->backend, Backend::kCpu);
  EXPECT_EQ(cpu->abi, 1);
  EXPECT_EQ(cpu->arch, "x86_64");
  auto cu = ParseVariantName("tlaloc1-cu128-aarch64-linux");
  ASSERT_TRUE(cu.ok());
  EXPECT_EQ(cu->backend, Backend::kCuda);
  EXPECT_EQ(cu->backend_version, "128");
  for (const char* name : {"tlaloc1-rocm71-x86_64-linux", "tlaloc1-xpu20253-x86_64-linux",
                           "tlaloc1-metal-aarch64-darwin", "tlaloc-neuron", "tlaloc-tpu"})
    EXPECT_TRUE(ParseVariantName(name).ok()) << name;
  auto tpu = ParseVariantName("tlaloc-tpu");
  EXPECT_TRUE(tpu->noarch);
  EXPECT_EQ(tpu->backend, Backend::kTpu);
  auto uni = ParseVariantName("tlaloc-universal");
  EXPECT_EQ(uni->backend, Backend::kUniversal);
  for (const char* bad : {"torch27-cxx11-cu128-x86_64-linux", "tlaloc1-cuda-x86_64-linux",
                          "tlalocX-cpu-x86_64-linux", "tlaloc-gpu", "tlaloc1-cpu-x86_64"}) {
    auto r = ParseVariantName(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(bad), std::string::npos);
    }
  }
}

TEST(KernelVariants, TargetsParse) {
  auto t = Target::Parse("cuda12.4:sm80");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->backend, Backend::kCuda);
  EXPECT_EQ(t->cuda_minor, 4);
  EXPECT_EQ(t->capability, 80);
  EXPECT_FALSE(Target::Parse("cuda12").ok());
  EXPECT_FALSE(Target::Parse("gpu").ok());
  EXPECT_EQ(Target::Parse("tpu")->backend, Backend::kTpu);
}

TEST(KernelVariants, CpuPrefersArchBuildOverUniversal) {
  std::string arch = "tlaloc1-cpu-" + Host().arch + "-" + Host().os;
  auto v = SelectVariant({"tlaloc-universal", arch, "tlaloc1-cu128-x86_64-linux"}, Host(), "r");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, arch);
  auto only_uni = SelectVariant({"tlaloc-universal", "tlaloc-tpu"}, Host(), "r");
  EXPECT_EQ(*only_uni, "tlaloc-universal");
}

TEST(KernelVariants, CudaMinorRulesAndNoarch) {
  Target t = *Target::Parse("cuda12.6:sm90");
  t.arch = "x86_64", t.os = "linux";
  auto ranked = RankVariants(
      {"tlaloc1-cu124-x86_64-linux", "tlaloc1-cu126-x86_64-linux", "tlaloc1-cu128-x86_64-linux",
       "tlaloc1-cu118-x86_64-linux", "tlaloc-cuda", "tlaloc-universal"},
      t);
  ASSERT_EQ(ranked.size(), 6u);
  EXPECT_EQ(ranked[0].variant, "tlaloc1-cu126-x86_64-linux");
  EXPECT_EQ(ranked[1].variant, "tlaloc1-cu124-x86_64-linux");
  EXPECT_EQ(ranked[2].variant, "tlaloc-cuda");
  EXPECT_EQ(ranked[3].variant, "tlaloc-universal");
  for (size_t i = 4; i < 6; ++i) EXPECT_FALSE(ranked[i].accepted);
  EXPECT_NE(ranked[4].reason.find("CUDA"), std::string::npos);
}

TEST(KernelVariants, MissingVariantListsEveryRejection) {
  std::vector<std::string> variants = {"tlaloc1-rocm71-x86_64-linux",
                                       "tlaloc1-metal-aarch64-darwin",
                                       "tlaloc-neuron",
                                       "tlaloc-xpu",
                                       "tlaloc-tpu",
                                       "tlaloc2-cpu-" + Host().arch + "-linux",
                                       "not-a-variant"};
  auto v = SelectVariant(variants, Host(), "org/kernel");
  ASSERT_FALSE(v.ok());
  const std::string& m = v.status().message();
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.find("org/kernel"), std::string::npos);
  for (const auto& name : variants) EXPECT_NE(m.find(name), std::string::npos) << name;
  EXPECT_NE(m.find("Tlaloc cannot run rocm"), std::string::npos) << m;
  EXPECT_NE(m.find("Tlaloc cannot run neuron"), std::string::npos) << m;
  EXPECT_NE(m.find("ABI 2"), std::string::npos) << m;
  EXPECT_NE(m.find("not the target's cpu"), std::string::npos) << m;
}

}  // namespace
}  // namespace tlaloc::kernels
