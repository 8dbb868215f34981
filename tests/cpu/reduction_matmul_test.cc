// The matrix-product kernels behind dot_general: the bf16 matrix-vector kernel and the oneDNN
// bf16 path, checked against exact references and against each other.
#include "cpu/reduction_matmul.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "cpu/kernel_test_util.h"
#include "tlaloc/cpu/blas_kernels.h"
#include "tlaloc/support/cpu_features.h"

namespace tlaloc {
namespace {

using cputest::RandomBf16;
using rdtest::DotAttrs;
using rdtest::RunOp;
using rdtest::Values;

// Exact products of bf16 values summed in double, and the bound an f32 accumulation of k terms
// in any order stays within.
struct Reference {
  double value = 0, bound = 0;
};

Reference DotReference(const bf16* x, int64_t x_step, const bf16* w, int64_t w_step, int64_t k) {
  Reference r;
  double magnitude = 0;
  for (int64_t i = 0; i < k; ++i) {
    double p = static_cast<double>(x[i * x_step].f()) * w[i * w_step].f();
    r.value += p;
    magnitude += std::abs(p);
  }
  r.bound = magnitude * static_cast<double>(k) * 0x1p-24 + 1e-30;
  return r;
}

TEST(MatmulKernelTest, Bf16RowDotsMatchExactProductsWithAndWithoutTail) {
  for (int64_t k : {1024, 1000, 31, 7}) {
    std::vector<float> x = rdtest::RandomFloats(k, 3);
    std::vector<bf16> row = RandomBf16(k, 4);
    double exact = 0, magnitude = 0;
    for (int64_t i = 0; i < k; ++i) {
      exact += static_cast<double>(x[i]) * row[i].f();
      magnitude += std::abs(static_cast<double>(x[i]) * row[i].f());
    }
    std::vector<uint16_t> bits;
    for (bf16 b : row) bits.push_back(b.bits);
    const float got = cpu::DotBF16(x.data(), bits.data(), k);
    EXPECT_NEAR(got, exact, magnitude * k * 0x1p-24) << "k=" << k;
  }
}

// One or two vectors times weight rows: with two, rows 0-3 go through the four-row kernel, 4-6
// through the one-row kernel; with one (on AVX-512), every row through the streaming kernel,
// over several blocks and threads with 300 rows, its prefetch stopping near the matrix's end.
// Each result must be bit-identical to DotBF16 of that row and vector, tail or none, so a row's
// value never depends on its position, its kernel or on how many vectors share the pass.
TEST(MatmulKernelTest, Bf16FourRowKernelAgreesBitwiseWithOneRowKernel) {
  for (int64_t k : {1056, 1000})
    for (int64_t n : {7, 300})
      for (int64_t m : {1, 2}) {
        std::vector<bf16> x = RandomBf16(m * k, 5), w = RandomBf16(n * k, 6);
        cputest::ExpectPairsAreDotBF16(
            cputest::Bf16RowsTimesRowsT(x, w, m, k, n), m, k, n,
            [&](int64_t s, int64_t i) { return x[s * k + i].f(); }, w.data(),
            "m=" + std::to_string(m) + " k=" + std::to_string(k) + " n=" + std::to_string(n));
        // The same values as f32 rows (the f32 kernels sum in the bf16 kernels' lane order).
        std::vector<float> xf, wf;
        for (bf16 v : x) xf.push_back(v.f());
        for (bf16 v : w) wf.push_back(v.f());
        auto out =
            RunOp("stablehlo.dot_general",
                  {Literal::FromVector<float>({m, k}, xf), Literal::FromVector<float>({n, k}, wf)},
                  DotAttrs({}, {}, {1}, {1}),
                  std::vector<Type>{Type(TensorType(ElementType::kF32, {m, n}))});
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        cputest::ExpectPairsAreDotBF16(
            Values<float>((*out)[0]), m, k, n, [&](int64_t s, int64_t i) { return xf[s * k + i]; },
            w.data(), "f32 m=" + std::to_string(m) + " k=" + std::to_string(k));
      }
}

// A few vectors times B stored [k, n] with n contiguous (decode attention's probabilities times
// V): the register-blocked column kernel must give, bit for bit, the in-order sums of single
// FMAs, for column counts that are not multiples of 16 or 64.
TEST(MatmulKernelTest, VectorsTimesRowMajorColumnsAccumulateInOrder) {
  for (int64_t m : {1, 2, 3, 4})
    for (int64_t n : {7, 64, 130}) {
      const int64_t k = 37;
      std::vector<bf16> x = RandomBf16(m * k, 8), b = RandomBf16(k * n, 9);
      Type f32_result(TensorType(ElementType::kF32, {m, n}));
      auto out = RunOp("stablehlo.dot_general",
                       {Literal::FromVector<bf16>({m, k}, x), Literal::FromVector<bf16>({k, n}, b)},
                       DotAttrs({}, {}, {1}, {0}), std::vector<Type>{f32_result});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      auto got = Values<float>((*out)[0]);
      for (int64_t s = 0; s < m; ++s)
        for (int64_t j = 0; j < n; ++j) {
          float acc = 0;
          for (int64_t p = 0; p < k; ++p) acc = std::fma(x[s * k + p].f(), b[p * n + j].f(), acc);
          ASSERT_EQ(got[s * n + j], acc) << "m=" << m << " n=" << n << " at " << s << "," << j;
        }
    }
}

// bf16 x bf16 with an f32 result and enough rows for the GEMM path (oneDNN where the CPU has
// bf16 arithmetic): weights as [n, k] (a Linear layer), as [k, n], and batched with a
// transposed left side, all against exact products.
TEST(MatmulKernelTest, Bf16GemmMatchesExactProductsInEveryLayout) {
  const int64_t m = 37, k = 200, n = 300;
  std::vector<bf16> a = RandomBf16(m * k, 7), w = RandomBf16(n * k, 8);
  Type f32_result(TensorType(ElementType::kF32, {m, n}));
  // [m, k] . [n, k] over k.
  auto linear = RunOp("stablehlo.dot_general",
                      {Literal::FromVector<bf16>({m, k}, a), Literal::FromVector<bf16>({n, k}, w)},
                      DotAttrs({}, {}, {1}, {1}), std::vector<Type>{f32_result});
  ASSERT_TRUE(linear.ok()) << linear.status().ToString();
  // [m, k] . [k, n] over k (the same numbers read column-wise).
  auto plain = RunOp("stablehlo.dot_general",
                     {Literal::FromVector<bf16>({m, k}, a), Literal::FromVector<bf16>({k, n}, w)},
                     DotAttrs({}, {}, {1}, {0}), std::vector<Type>{f32_result});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  auto got_linear = Values<float>((*linear)[0]), got_plain = Values<float>((*plain)[0]);
  int checked = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      Reference r = DotReference(&a[i * k], 1, &w[j * k], 1, k);
      ASSERT_NEAR(got_linear[i * n + j], r.value, r.bound) << i << "," << j;
      Reference p = DotReference(&a[i * k], 1, &w[j], n, k);
      ASSERT_NEAR(got_plain[i * n + j], p.value, p.bound) << i << "," << j;
      ++checked;
    }
  EXPECT_EQ(checked, m * n);

  // Batched: lhs [b, k, m] contracted over its middle dimension, rhs [b, n, k].
  const int64_t batch = 3, bm = 9, bk = 64, bn = 70;
  std::vector<bf16> lhs = RandomBf16(batch * bk * bm, 9), rhs = RandomBf16(batch * bn * bk, 10);
  Type batched_result(TensorType(ElementType::kF32, {batch, bm, bn}));
  auto batched = RunOp("stablehlo.dot_general",
                       {Literal::FromVector<bf16>({batch, bk, bm}, lhs),
                        Literal::FromVector<bf16>({batch, bn, bk}, rhs)},
                       DotAttrs({0}, {0}, {1}, {2}), std::vector<Type>{batched_result});
  ASSERT_TRUE(batched.ok()) << batched.status().ToString();
  auto got_batched = Values<float>((*batched)[0]);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < bm; ++i)
      for (int64_t j = 0; j < bn; ++j) {
        Reference r = DotReference(&lhs[b * bk * bm + i], bm, &rhs[(b * bn + j) * bk], 1, bk);
        ASSERT_NEAR(got_batched[(b * bm + i) * bn + j], r.value, r.bound)
            << b << "," << i << "," << j;
      }
}

TEST(MatmulKernelTest, OneDnnBf16PathIsUsedWhereTheCpuHasBf16Arithmetic) {
  if (!HasAvx512Bf16() && !HasAmx())
    GTEST_SKIP() << "no AVX512-BF16 or AMX (or TLALOC_VECTOR_MATH=0): oneDNN's bf16 path is off";
  const char* env = std::getenv("TLALOC_BF16_MATMUL");
  if (env && std::string(env) == "blas") GTEST_SKIP() << "TLALOC_BF16_MATMUL=blas turns it off";
  EXPECT_TRUE(cpu::DnnlBf16Available());
}

// TLALOC_F32_MATMUL picks the f32 products' library; unset, oneDNN only where OpenBLAS's kernels
// are older than the CPU. tests/CMakeLists.txt runs this suite under both settings too.
TEST(MatmulKernelTest, F32LibrarySwitchIsHonoured) {
  const char* env = std::getenv("TLALOC_F32_MATMUL");
  const std::string want = env ? env : "";
  if (want == "dnnl") {
    EXPECT_TRUE(cpu::DnnlF32Available());
  } else if (want == "blas") {
    EXPECT_FALSE(cpu::DnnlF32Available());
  } else {
    EXPECT_EQ(cpu::DnnlF32Available(), !cpu::OpenBlasCoreFitsCpu());
  }
}

// f32 x f32 with the GEMM path (oneDNN when OpenBLAS loaded kernels older than this CPU,
// OpenBLAS otherwise): weights as [n, k] and [k, n], against double sums.
TEST(MatmulKernelTest, F32GemmMatchesDoubleSumsInBothWeightLayouts) {
  const int64_t m = 33, k = 150, n = 260;
  std::vector<float> a = rdtest::RandomFloats(m * k, 21), w = rdtest::RandomFloats(n * k, 22);
  for (bool transposed : {true, false}) {
    std::vector<int64_t> w_dims =
        transposed ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
    auto out = rdtest::RunOp(
        "stablehlo.dot_general",
        {Literal::FromVector<float>({m, k}, a), Literal::FromVector<float>(w_dims, w)},
        rdtest::DotAttrs({}, {}, {1}, {transposed ? 1 : 0}));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    auto got = rdtest::Values<float>((*out)[0]);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0, magnitude = 0;
        for (int64_t p = 0; p < k; ++p) {
          double prod =
              static_cast<double>(a[i * k + p]) * (transposed ? w[j * k + p] : w[p * n + j]);
          s += prod;
          magnitude += std::abs(prod);
        }
        ASSERT_NEAR(got[i * n + j], s, magnitude * k * 0x1p-24) << i << "," << j;
      }
  }
}

}  // namespace
}  // namespace tlaloc
