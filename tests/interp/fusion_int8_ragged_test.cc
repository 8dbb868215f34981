// The int8 expert product (nn::SparseMoe's int8 experts: DequantizeInt8 of an s8 stack, then
// chlo.ragged_dot's grouped rows) runs as one kernel (fusion_int8.cc, cpu/ragged_dot_int8.cc)
// with the unfused chain's results bit for bit (decode's groups: the matrix-vector kernel's
// arithmetic on both paths; prefill's: the f32 grouped kernel's sgemm on the same dequantised
// block), and close to a double-precision reference; empty groups, rows past the last group and a
// group larger than the rows included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/cpu/blas_kernels.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/support/half.h"

namespace tlaloc {
namespace {

struct RaggedRun {
  Literal out;
  int64_t ops = 0;
};

// x f32 [M, K] grouped by `sizes` (s32 [G]) times q s8 [G, N, K] with scales f16 [G, N, K / 32].
RaggedRun RunInt8Ragged(const Literal& x, const Literal& q, const Literal& scales,
                        const Literal& sizes, bool fuse) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor xin = fb.AddArg(x.type()), qin = fb.AddArg(q.type()), sin = fb.AddArg(scales.type());
  Tensor gin = fb.AddArg(sizes.type());
  const int64_t g = q.dims()[0], n = q.dims()[1], k = q.dims()[2];
  Tensor values = Convert(Reshape(qin, {g, n, k / 32, 32}), ElementType::kF32);
  Tensor sc = BroadcastInDim(Convert(sin, ElementType::kF32), {g, n, k / 32, 32}, {0, 1, 2});
  Tensor w = Reshape(values * sc, {g, n, k});
  EXPECT_TRUE(fb.Return({RaggedDot(xin, w, gin, 2, ElementType::kF32)}).ok());
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto out = (*exe)->Execute({x, q, scales, sizes}, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {(*out)[0], stats.ops_executed};
}

TEST(FusionInt8RaggedTest, FusedMatchesTheOpsOneByOneAndADoubleReference) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> qdist(-127, 127);
  struct Case {
    int64_t rows, n, k;
    std::vector<int32_t> sizes;
  };
  for (const Case& c : {Case{1, 48, 64, {0, 1, 0}},          // decode: one token, one expert
                        Case{4, 64, 96, {1, 0, 2, 1}},       // decode rows, an empty group
                        Case{6, 33, 32, {0, 4, 0}},          // rows past the last group: zero
                        Case{40, 70, 128, {17, 0, 9, 14}},   // prefill groups
                        Case{12, 300, 64, {3, 20}},          // a group larger than the rows
                        Case{64, 1100, 64, {30, 2, 32}}}) {  // over 1024 outputs
    const int64_t g = static_cast<int64_t>(c.sizes.size());
    std::vector<float> xv(static_cast<size_t>(c.rows * c.k));
    for (float& v : xv) v = dist(rng);
    std::vector<int8_t> qv(static_cast<size_t>(g * c.n * c.k));
    for (int8_t& v : qv) v = static_cast<int8_t>(qdist(rng));
    std::vector<uint16_t> sv(qv.size() / 32);
    for (uint16_t& v : sv) v = FloatToHalfBits(std::fabs(dist(rng)) * 0.01f);
    const Literal x = Literal::FromVector<float>({c.rows, c.k}, xv);
    const Literal q = Literal::FromVector<int8_t>({g, c.n, c.k}, qv);
    Literal s(TensorType(ElementType::kF16, {g, c.n, c.k / 32}));
    std::memcpy(s.data(), sv.data(), sv.size() * 2);
    const Literal sizes = Literal::FromVector<int32_t>({g}, c.sizes);
    RaggedRun fused = RunInt8Ragged(x, q, s, sizes, true),
              plain = RunInt8Ragged(x, q, s, sizes, false);
    const std::string what = "rows " + std::to_string(c.rows) + ", n " + std::to_string(c.n);
    EXPECT_EQ(fused.ops, plain.ops - 6) << what << ": the seven-op chain did not run as one";
    ASSERT_EQ(fused.out.byte_size(), plain.out.byte_size());
    // Decode's groups: the matrix-vector kernel on both paths; prefill's: the same sgemm call
    // on the same dequantised block (both need OpenBLAS's kernels to fit the CPU).
    bool small_groups = true;
    for (int32_t size : c.sizes) small_groups = small_groups && size <= 4;
    if (small_groups || cpu::OpenBlasCoreFitsCpu()) {
      EXPECT_EQ(std::memcmp(fused.out.data(), plain.out.data(), plain.out.byte_size()), 0) << what;
    }
    // Against double precision, relative to the sum of magnitudes of each output's terms.
    double worst = 0, worst_plain = 0;
    std::vector<int64_t> group_of(static_cast<size_t>(c.rows), -1);  // -1: in no group
    for (int64_t e = 0, start = 0; e < g; start += c.sizes[e], ++e)
      for (int64_t r = start; r < std::min<int64_t>(start + c.sizes[e], c.rows); ++r)
        group_of[r] = e;
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = 0, mag = 0;
        if (group_of[r] >= 0) {
          const int64_t base = (group_of[r] * c.n + j) * c.k;
          for (int64_t i = 0; i < c.k; ++i) {
            const double w = qv[base + i] * double(HalfBitsToFloat(sv[(base + i) / 32]));
            ref += xv[r * c.k + i] * w;
            mag += std::fabs(xv[r * c.k + i] * w);
          }
        }
        const double got = fused.out.span<float>()[r * c.n + j];
        if (group_of[r] < 0) {
          EXPECT_EQ(got, 0.0) << what << ": row " << r << " is in no group";
        }
        worst = std::max(worst, std::fabs(got - ref) / (mag + 1e-30));
        worst_plain = std::max(
            worst_plain, std::fabs(plain.out.span<float>()[r * c.n + j] - ref) / (mag + 1e-30));
      }
    EXPECT_LT(worst, 1e-5) << what;
    EXPECT_LT(worst_plain, 1e-5) << what;
  }
}

TEST(FusionInt8RaggedTest, NegativeGroupSizeIsAnError) {
  const Literal x = Literal::FromVector<float>({2, 32}, std::vector<float>(64, 1.0f));
  const Literal q = Literal::FromVector<int8_t>({2, 3, 32}, std::vector<int8_t>(192, 1));
  Literal s(TensorType(ElementType::kF16, {2, 3, 1}));
  std::memset(s.data(), 0, s.byte_size());
  const Literal sizes = Literal::FromVector<int32_t>({2}, {1, -1});
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor xin = fb.AddArg(x.type()), qin = fb.AddArg(q.type()), sin = fb.AddArg(s.type());
  Tensor gin = fb.AddArg(sizes.type());
  Tensor values = Convert(Reshape(qin, {2, 3, 1, 32}), ElementType::kF32);
  Tensor sc = BroadcastInDim(Convert(sin, ElementType::kF32), {2, 3, 1, 32}, {0, 1, 2});
  Tensor w = Reshape(values * sc, {2, 3, 32});
  ASSERT_TRUE(fb.Return({RaggedDot(xin, w, gin, 2, ElementType::kF32)}).ok());
  auto exe = Executable::Prepare(module, "main", InterpreterOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto out = (*exe)->Execute({x, q, s, sizes});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().ToString().find("group_sizes[1] = -1 is negative"), std::string::npos)
      << out.status().ToString();
}

}  // namespace
}  // namespace tlaloc
