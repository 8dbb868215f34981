// SwiGLU's gate, silu(g) * u as builder::Silu and nn::SiluAndMul emit it (logistic, two
// products), runs as one kernel (src/interp/fusion_silu.cc) with bit for bit the ops' results,
// for bf16 and f32, special values included.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/support/half.h"

namespace tlaloc {
namespace {

struct SiluRun {
  Literal out;
  int64_t ops = 0;
};

SiluRun RunSiluMul(const Literal& g, const Literal& u, bool fuse) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor gin = fb.AddArg(g.type()), uin = fb.AddArg(u.type());
  EXPECT_TRUE(fb.Return({Silu(gin) * uin}).ok());
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto out = (*exe)->Execute({g, u}, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {out.ok() ? (*out)[0] : Literal(), stats.ops_executed};
}

Literal Random(const std::vector<int64_t>& dims, ElementType et, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  int64_t n = 1;
  for (int64_t x : dims) n *= x;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  v[0] = std::numeric_limits<float>::quiet_NaN();
  v[1] = std::numeric_limits<float>::infinity();
  v[2] = -std::numeric_limits<float>::infinity();
  v[3] = -0.0f;
  v[4] = 3e38f;
  v[5] = -100.0f;
  if (et == ElementType::kF32) return Literal::FromVector<float>(dims, v);
  Literal out(TensorType(et, dims));
  auto* bits = reinterpret_cast<uint16_t*>(out.data());
  for (int64_t i = 0; i < n; ++i) bits[i] = FloatToBf16Bits(v[static_cast<size_t>(i)]);
  return out;
}

TEST(FusionSiluTest, SiluTimesUpFusedIsBitIdenticalToTheOpsOneByOne) {
  for (ElementType et : {ElementType::kBF16, ElementType::kF32}) {
    for (const auto& dims : std::vector<std::vector<int64_t>>{{1, 1, 3072}, {3, 700}, {8}}) {
      const Literal g = Random(dims, et, 1), u = Random(dims, et, 2);
      SiluRun fused = RunSiluMul(g, u, true), plain = RunSiluMul(g, u, false);
      ASSERT_EQ(fused.out.byte_size(), plain.out.byte_size());
      EXPECT_EQ(std::memcmp(fused.out.data(), plain.out.data(), plain.out.byte_size()), 0)
          << MlirName(et) << " " << dims.back();
      EXPECT_EQ(fused.ops, plain.ops - 2) << MlirName(et) << ": not fused";
    }
  }
}

}  // namespace
}  // namespace tlaloc
