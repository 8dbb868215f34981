// Kernel mappings from JSON and the TLALOC_DISABLE_KERNELS switch.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tlaloc/kernels/kernelize.h"

namespace tlaloc::kernels {
namespace {

TEST(KernelMappingJson, BackendsModesAndCapabilities) {
  auto m = ParseKernelMapping(R"({
    "RMSNorm": {"cpu": "https://h/org/rms.git@v1",
                "cuda": [{"repo": "https://h/org/rms.git@v2", "capability": [80, 89]},
                         "https://h/org/rms.git@main"],
                "tpu": {"training": {"repo": "/local/rms", "layer": "FusedRMSNorm"}}}})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto cpu = m->Candidates("RMSNorm", Backend::kCpu, Mode::kInference);
  ASSERT_EQ(cpu.size(), 1u);
  EXPECT_EQ(*cpu[0].source.version, 1);
  auto cuda = m->Candidates("RMSNorm", Backend::kCuda, Mode::kInference);
  ASSERT_EQ(cuda.size(), 2u);
  ASSERT_TRUE(cuda[0].capability);
  EXPECT_EQ(cuda[0].capability->max, 89);
  EXPECT_EQ(cuda[1].source.revision, "main");
  EXPECT_TRUE(m->Candidates("RMSNorm", Backend::kTpu, Mode::kTraining).size() == 1);
  // A training kernel serves inference too, not the other way round.
  EXPECT_EQ(m->Candidates("RMSNorm", Backend::kTpu, Mode::kInference).size(), 1u);
  EXPECT_TRUE(m->Candidates("RMSNorm", Backend::kCpu, Mode::kTraining).empty());
  EXPECT_EQ(m->Candidates("RMSNorm", Backend::kTpu, Mode::kTraining)[0].layer, "FusedRMSNorm");
}

TEST(KernelMappingJson, ErrorsNameTheEntry) {
  struct Case {
    const char* json;
    const char* expect;
  };
  for (const Case& c :
       {Case{"[1]", "JSON object"}, Case{R"({"Softmax": {}})", "Softmax"},
        Case{R"({"RMSNorm": {"gpu": "x"}})", "RMSNorm.gpu"},
        Case{R"({"RMSNorm": {"cuda": {"repo": "x", "capability": [90, 80]}}})", "capability"},
        Case{R"({"RMSNorm": {"cpu": {"inference": "x", "serving": "y"}}})", "serving"},
        Case{R"({"RMSNorm": {"cpu": 3}})", "RMSNorm.cpu"}}) {
    auto m = ParseKernelMapping(c.json);
    ASSERT_FALSE(m.ok()) << c.json;
    EXPECT_NE(m.status().message().find(c.expect), std::string::npos) << m.status().ToString();
  }
}

TEST(KernelMappingJson, DisableSwitchKeepsEveryDecomposition) {
  auto m = ParseKernelMapping(R"({"RMSNorm": {"cpu": "/does/not/exist"}})");
  ASSERT_TRUE(m.ok());
  KernelizeOptions options;
  options.use_fallback = false;
  ::setenv("TLALOC_DISABLE_KERNELS", "1", 1);
  auto k = Kernelizer::Create(*m, options);
  ::unsetenv("TLALOC_DISABLE_KERNELS");
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_TRUE(k->resolved().empty());
  EXPECT_EQ(k->unresolved().at("RMSNorm"), "TLALOC_DISABLE_KERNELS=1");
  // Without the switch the missing folder is an error (fallback is off).
  EXPECT_FALSE(Kernelizer::Create(*m, options).ok());
}

}  // namespace
}  // namespace tlaloc::kernels
