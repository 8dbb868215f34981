// The GGUF packed-weight kernels (cpu/matmul_gguf4.h) read their sizes from ir/quant_format.h's
// table: each format's row bytes are its storage types' (QuantStorageTypes), and q8_0, which
// the table also holds, is refused by name. (That the products have the decomposition's bits is
// tests/models/gguf_packed_test.cc's FusedKernelHasTheDecompositionsBits.)
#include "cpu/matmul_gguf4.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu/kernel_test_util.h"
#include "tlaloc/ir/quant_format.h"

namespace tlaloc {
namespace {

TEST(GgufKernel, RowBytesAreTheStorageTypesOfEveryFormat) {
  const int64_t n = 3;
  for (const QuantFormatInfo& info : kQuantFormats)
    for (int64_t k : {info.block, 4 * info.block}) {
      auto types = QuantStorageTypes(info.format, {n, k});
      ASSERT_TRUE(types.ok()) << types.status().ToString();
      EXPECT_EQ(n * cpu::QuantRowBytes(info.format, k), types->first.byte_size())
          << info.name << " k=" << k;
      EXPECT_EQ(n * cpu::QuantScaleRowBytes(info.format, k), types->second.byte_size())
          << info.name << " k=" << k;
    }
}

TEST(GgufKernel, Q8_0IsRefusedByName) {
  EXPECT_FALSE(cpu::IsGgufPacked(QuantFormat::kQ8_0));
  for (QuantFormat f : {QuantFormat::kQ4_0, QuantFormat::kQ4_K, QuantFormat::kQ6_K})
    EXPECT_TRUE(cpu::IsGgufPacked(f)) << QuantFormatName(f);
  const int64_t k = 32, n = 2;
  std::vector<float> x(k, 1.f), c(n, -1.f);
  std::vector<uint8_t> q(n * k);
  std::vector<uint16_t> scale(n);
  cputest::SerialContext ctx;
  const Status s =
      cpu::GgufMatmul(QuantFormat::kQ8_0, x.data(), 1, q.data(), scale.data(), n, k, c.data(), ctx);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("q8_0"), std::string::npos) << s.ToString();
  EXPECT_EQ(c, std::vector<float>(n, -1.f)) << "nothing written";
}

}  // namespace
}  // namespace tlaloc
