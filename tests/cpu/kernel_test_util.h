// What the CPU kernel tests share: evaluation contexts that run ParallelFor's chunks in order on
// the calling thread or on a two-thread pool (as the interpreter does), the q8_0 products'
// operands, and bf16 products checked pair by pair against the matrix-vector kernel (DotBF16),
// whose bits every bf16 kernel of a few rows promises.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cpu/reduction_matmul.h"
#include "ops/reduction_test_util.h"
#include "tlaloc/ir/serial_eval_context.h"
#include "tlaloc/support/half.h"
#include "tlaloc/support/thread_pool.h"

namespace tlaloc::cputest {

// Runs ParallelFor's chunks one after another on the calling thread: chunked by grain, so the
// kernels' chunk boundaries are exercised as on the pool; their operands are never reused.
class SerialContext : public SerialEvalContext {
 public:
  SerialContext() : SerialEvalContext({.chunk_by_grain = true}) {}
};

// Runs ParallelFor on a two-thread pool, as the interpreter does.
class PoolContext : public SerialEvalContext {
 public:
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t)>& body) override {
    pool_.ParallelFor(n, grain, body);
  }

 private:
  ThreadPool pool_{2};
};

// The operands of an int8 product with q8_0 activations.
struct Q8Case {
  std::vector<float> x;      // [m, k]
  std::vector<int8_t> w;     // [n, k]
  std::vector<uint16_t> ws;  // [n, k / 32] f16
};

// Random activations and weights with the awkward blocks in place: an all-zero activation block,
// a zero-scale weight block, a weight block of +-127 only, and activation blocks whose largest
// magnitude is exactly representable so that the extremes round to +-127.
inline Q8Case MakeQ8Case(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-3.f, 3.f);
  Q8Case c;
  c.x.resize(m * k);
  for (float& v : c.x) v = uni(rng);
  c.w.resize(n * k);
  for (int8_t& v : c.w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  c.ws.resize(n * k / 32);
  for (uint16_t& s : c.ws) s = FloatToHalfBits(std::ldexp(1.f + (rng() % 64) / 64.f, -8));
  if (m > 0 && k >= 64) {
    for (int i = 0; i < 32; ++i) c.x[32 + i] = 0;  // row 0, block 1: all zero
  }
  if (m > 1) c.x[k + 5] = 100.f, c.x[k + 6] = -100.f;  // row 1, block 0: the extremes
  if (n > 0) c.ws[0] = 0;                              // row 0, block 0: zero scale
  if (n > 2)
    for (int i = 0; i < 32; ++i) c.w[2 * k + i] = (i % 2) ? 127 : -127;
  return c;
}

inline std::vector<bf16> RandomBf16(size_t n, uint32_t seed) {
  std::vector<bf16> out;
  for (float f : rdtest::RandomFloats(n, seed, 2.0f)) out.push_back(bf16(f));
  return out;
}

// dot_general of x [m, k] and w [n, k] (bf16, contracted over k) with an f32 [m, n] result,
// through the interpreter (so through whichever kernel it picks for m); empty on an error,
// which it reports.
inline std::vector<float> Bf16RowsTimesRowsT(const std::vector<bf16>& x, const std::vector<bf16>& w,
                                             int64_t m, int64_t k, int64_t n) {
  Type f32_result(TensorType(ElementType::kF32, {m, n}));
  auto out =
      rdtest::RunOp("stablehlo.dot_general",
                    {Literal::FromVector<bf16>({m, k}, x), Literal::FromVector<bf16>({n, k}, w)},
                    rdtest::DotAttrs({}, {}, {1}, {1}), std::vector<Type>{f32_result});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  return rdtest::Values<float>((*out)[0]);
}

// Expects got[s * n + r] to be, bit for bit, DotBF16 of vector s (x_at(s, i), i < k) and bf16
// row r of w ([n, k]), for every s < m and r < n; reports the first few others with `what`.
inline void ExpectPairsAreDotBF16(const std::vector<float>& got, int64_t m, int64_t k, int64_t n,
                                  const std::function<float(int64_t s, int64_t i)>& x_at,
                                  const bf16* w, const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(got.size()), m * n) << what;
  std::vector<float> xs(k);
  std::vector<uint16_t> row(k);
  int bad = 0;
  for (int64_t s = 0; s < m && bad < 3; ++s) {
    for (int64_t i = 0; i < k; ++i) xs[i] = x_at(s, i);
    for (int64_t r = 0; r < n && bad < 3; ++r) {
      for (int64_t i = 0; i < k; ++i) row[i] = w[r * k + i].bits;
      const float want = cpu::DotBF16(xs.data(), row.data(), k);
      if (got[s * n + r] != want) {
        ++bad;
        ADD_FAILURE() << what << ": vector " << s << " of " << m << ", row " << r << ": "
                      << got[s * n + r] << " vs DotBF16's " << want;
      }
    }
  }
}

}  // namespace tlaloc::cputest
