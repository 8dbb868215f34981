#include "tlaloc/support/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace tlaloc {
namespace {

TEST(CpuFeaturesTest, ExtensionsImplyTheAvx512Core) {
  const CpuFeatures hw = DetectCpuFeatures();
  EXPECT_TRUE(!hw.avx512_bf16 || hw.avx512_core);
  EXPECT_TRUE(!hw.amx || hw.avx512_core);
  EXPECT_TRUE(!hw.avx512_core || hw.avx2);
}

TEST(CpuFeaturesTest, QueriesAnswerForTheHardwareWithTheEnvironmentsOverride) {
  const CpuFeatures want = ApplyCpuOverride(DetectCpuFeatures(), std::getenv("TLALOC_VECTOR_MATH"));
  EXPECT_EQ(HasAvx2(), want.avx2);
  EXPECT_EQ(HasAvx512Core(), want.avx512_core);
  EXPECT_EQ(HasAvx512Bf16(), want.avx512_bf16);
  EXPECT_EQ(HasAmx(), want.amx);
  EXPECT_EQ(Avx512DisabledByEnvironment(), DetectCpuFeatures().avx512_core && !want.avx512_core);
}

TEST(CpuFeaturesTest, VectorMathZeroTurnsOffEveryAvx512Feature) {
  const CpuFeatures all{.avx2 = true, .avx512_core = true, .avx512_bf16 = true, .amx = true};
  const CpuFeatures off = ApplyCpuOverride(all, "0");
  EXPECT_TRUE(off.avx2);  // not an AVX-512 path
  EXPECT_FALSE(off.avx512_core);
  EXPECT_FALSE(off.avx512_bf16);
  EXPECT_FALSE(off.amx);
  for (const char* kept : {static_cast<const char*>(nullptr), "1", ""}) {
    const CpuFeatures same = ApplyCpuOverride(all, kept);
    EXPECT_TRUE(same.avx512_core && same.avx512_bf16 && same.amx) << (kept ? kept : "unset");
  }
}

}  // namespace
}  // namespace tlaloc
