// The bulk f32 exp / logistic / rsqrt kernels (src/cpu/vector_math.h; AVX-512 or AVX2 + FMA,
// whichever the CPU has, and the AVX2 ones directly on AVX-512 CPUs) against the scalar
// definition, bit for bit: sampled inputs with every special value and the edges where results
// overflow, turn subnormal, vanish or reach 1, directly and through the interpreter's ops.
#include "cpu/vector_math.h"

#include <bit>
#include <cstdio>
#include <cstring>
#include <random>

#include "cpu/vector_math_avx2.h"
#include "ops/elementwise_test_util.h"
#include "tlaloc/support/cpu_features.h"

namespace tlaloc::ewtest {
namespace {

using ops::vmath::F32Kernel;

struct KernelCase {
  const char* op;
  double (*definition)(double);
  F32Kernel kernel, scalar_kernel;
};

const KernelCase kKernelCases[] = {
    {"stablehlo.exponential", ops::vmath::Exp, cpu::vmath::ExpF32, ops::vmath::ExpF32Scalar},
    {"stablehlo.logistic", ops::vmath::Logistic, cpu::vmath::LogisticF32,
     ops::vmath::LogisticF32Scalar},
    {"stablehlo.rsqrt", ops::vmath::Rsqrt, cpu::vmath::RsqrtF32, ops::vmath::RsqrtF32Scalar},
};

// A set of vectorised kernels: the dispatched ones (AVX-512 or AVX2, whichever KernelPath()
// picked) and, on AVX-512 CPUs, the AVX2 ones called directly, so both are checked there.
struct KernelSet {
  std::string name;
  F32Kernel exp, logistic, rsqrt;
  ops::vmath::Bf16ToF32Kernel bf16_to_f32;
  ops::vmath::F32ToBf16Kernel f32_to_bf16;
};

std::vector<KernelSet> VectorPathsOfThisCpu() {
  std::vector<KernelSet> paths;
  if (cpu::vmath::HasVectorKernels())
    paths.push_back({cpu::vmath::KernelPathName(), cpu::vmath::ExpF32, cpu::vmath::LogisticF32,
                     cpu::vmath::RsqrtF32, cpu::vmath::Bf16ToF32, cpu::vmath::F32ToBf16});
  if (cpu::vmath::KernelPath() == cpu::vmath::VectorPath::kAvx512 && HasAvx2())
    paths.push_back({"AVX2+FMA (direct)", cpu::vmath::avx2::ExpF32, cpu::vmath::avx2::LogisticF32,
                     cpu::vmath::avx2::RsqrtF32, cpu::vmath::avx2::Bf16ToF32,
                     cpu::vmath::avx2::F32ToBf16});
  return paths;
}

float FromBits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

// Every float within `radius` steps of x (both signs of x are the caller's business).
void AddNeighbours(std::vector<float>& xs, float x, uint32_t radius) {
  const uint32_t u = Bits(x);
  for (uint32_t d = 0; d <= 2 * radius; ++d) xs.push_back(FromBits(u - radius + d));
}

// About 3.5 million inputs: special values, dense runs around each edge, random bit patterns
// (all exponents, NaN payloads included) and random values in the range where exp is finite.
std::vector<float> SampledInputs() {
  const float kInfF = std::numeric_limits<float>::infinity();
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           kInfF,
                           -kInfF,
                           FromBits(0x7fc00000u),  // quiet NaN
                           FromBits(0xffc00000u),
                           FromBits(0x7f800001u),  // signalling NaNs with payloads
                           FromBits(0xffa5a5a5u),
                           FromBits(0x7fffffffu),
                           std::numeric_limits<float>::denorm_min(),
                           -std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::min(),
                           std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max(),
                           1.0f,
                           -1.0f,
                           -1e9f,
                           -3.4e38f};
  // exp: overflow to inf (~88.72), subnormal results (~-87.34), results that round to 0 (~-103.97);
  // logistic: its results reach 1 (~16.64) and vanish (~-103.28); rsqrt: inputs near 0 and 1.
  const float edges[] = {88.72283935546875f,
                         -87.33654022216797f,
                         -103.97208404541016f,
                         -103.27893829345703f,
                         16.635532379150391f,
                         17.32868f,
                         1.0f,
                         std::numeric_limits<float>::min()};
  for (float e : edges) {
    AddNeighbours(xs, e, 1 << 15);
    AddNeighbours(xs, -e, 1 << 12);
  }
  AddNeighbours(xs, 0.0f, 1 << 16);  // tiny inputs of both signs, subnormals included
  // exp(x) ~ 1 + x lies just past a float midpoint for x near 2^-24 and 2^-25: hard roundings.
  AddNeighbours(xs, 0x1p-24f, 1 << 14);
  AddNeighbours(xs, -0x1p-25f, 1 << 14);
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 2'000'000; ++i) xs.push_back(FromBits(any_bits(rng)));
  std::uniform_real_distribution<float> finite_range(-110.0f, 90.0f);
  for (int i = 0; i < 1'000'000; ++i) xs.push_back(finite_range(rng));
  return xs;
}

// The first few inputs whose two kernels' results differ in any bit; empty when none do.
std::string Mismatches(const std::vector<float>& xs, const std::vector<float>& got,
                       const std::vector<float>& want) {
  std::string report;
  int count = 0;
  for (size_t i = 0; i < xs.size(); ++i)
    if (Bits(got[i]) != Bits(want[i]) && ++count <= 5) {
      char line[128];
      std::snprintf(line, sizeof line, "x=%a (0x%08x): got 0x%08x, want 0x%08x\n", xs[i],
                    Bits(xs[i]), Bits(got[i]), Bits(want[i]));
      report += line;
    }
  if (count > 0) report += std::to_string(count) + " mismatches";
  return report;
}

TEST(VectorMath, KernelsMatchScalarDefinitionOnSampledInputs) {
  const std::vector<KernelSet> paths = VectorPathsOfThisCpu();
  if (paths.empty())
    GTEST_SKIP() << "vector kernels off: no AVX2 + FMA nor AVX-512, or TLALOC_VECTOR_MATH=0";
  const std::vector<float> xs = SampledInputs();
  const int64_t n = static_cast<int64_t>(xs.size());
  for (const KernelSet& path : paths) {
    std::printf("vector math path: %s\n", path.name.c_str());
    const F32Kernel kernels[] = {path.exp, path.logistic, path.rsqrt};
    for (int k = 0; k < 3; ++k) {
      const KernelCase& c = kKernelCases[k];
      const std::string what = path.name + " " + c.op;
      std::vector<float> want(n), got(n);
      c.scalar_kernel(xs.data(), want.data(), n);
      kernels[k](xs.data(), got.data(), n);
      EXPECT_EQ(Mismatches(xs, got, want), "") << what;
      // In place, from an unaligned start with a ragged tail (masked loads and stores).
      std::vector<float> inout = xs;
      kernels[k](inout.data() + 1, inout.data() + 1, n - 4);
      EXPECT_EQ(Bits(inout[0]), Bits(xs[0])) << what << ": wrote before its range";
      for (int64_t i = n - 3; i < n; ++i)
        EXPECT_EQ(Bits(inout[i]), Bits(xs[i])) << what << ": wrote past its range";
      std::vector<float> expected = xs;
      std::copy(want.begin() + 1, want.end() - 3, expected.begin() + 1);
      EXPECT_EQ(Mismatches(xs, inout, expected), "") << what << " in place";
      // Every length up to two vectors' worth, so each ragged end is taken.
      for (int64_t len = 0; len <= 17; ++len) {
        std::vector<float> short_out(len + 1, -7.0f);
        kernels[k](xs.data() + 5, short_out.data(), len);
        for (int64_t i = 0; i < len; ++i)
          ASSERT_EQ(Bits(short_out[i]), Bits(want[5 + i])) << what << " length " << len;
        ASSERT_EQ(short_out[len], -7.0f) << what << " length " << len << ": wrote past its end";
      }
    }
  }
}

// The portable path (every CPU without AVX-512) is the definition applied per element.
TEST(VectorMath, ScalarKernelsFollowTheDefinition) {
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f,
                           4.0f,
                           88.8f,
                           -100.0f,
                           -104.0f,
                           1e-40f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           FromBits(0x7fc00123u)};
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 100'000; ++i) xs.push_back(FromBits(any_bits(rng)));
  for (const KernelCase& c : kKernelCases) {
    std::vector<float> got(xs.size()), want(xs.size());
    c.scalar_kernel(xs.data(), got.data(), static_cast<int64_t>(xs.size()));
    for (size_t i = 0; i < xs.size(); ++i)
      want[i] = static_cast<float>(c.definition(static_cast<double>(xs[i])));
    EXPECT_EQ(Mismatches(xs, got, want), "") << c.op;
  }
  float out[4];
  const float special[4] = {0.0f, 88.8f, -100.0f, -0.0f};
  ops::vmath::ExpF32Scalar(special, out, 4);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], std::numeric_limits<float>::infinity());  // overflows f32
  EXPECT_GT(out[2], 0.0f);                                    // 3.7e-44 is a subnormal, not 0
  ops::vmath::LogisticF32Scalar(special, out, 4);
  EXPECT_EQ(out[3], 0.5f);
  ops::vmath::RsqrtF32Scalar(special, out, 4);
  EXPECT_EQ(out[3], -std::numeric_limits<float>::infinity());
}

// The ops in f32 (through the kernels, over several parallel chunks) and in bf16 / f16 (through
// the kernels in float blocks, then rounded) give what the scalar definition gives.
TEST(VectorMath, OpsMatchTheDefinitionInEveryFloatType) {
  std::vector<float> xs;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> range(-120.0f, 100.0f);
  const int64_t n = 100'003;  // several chunks plus a ragged tail
  for (int64_t i = 0; i < n; ++i)
    xs.push_back(i % 97 == 0 ? -std::abs(range(rng)) * 1e6f : range(rng));
  for (const KernelCase& c : kKernelCases) {
    auto f32 = Elems<float>(Run1(c.op, {Literal::FromVector<float>({n}, xs)}));
    ASSERT_EQ(static_cast<int64_t>(f32.size()), n);
    std::vector<bf16> bx;
    std::vector<f16> hx;
    for (float x : xs) {
      bx.push_back(bf16(x));
      hx.push_back(f16(x));
    }
    auto b = Elems<bf16>(Run1(c.op, {Literal::FromVector<bf16>({n}, bx)}));
    auto h = Elems<f16>(Run1(c.op, {Literal::FromVector<f16>({n}, hx)}));
    ASSERT_EQ(static_cast<int64_t>(b.size()), n);
    ASSERT_EQ(static_cast<int64_t>(h.size()), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(Bits(f32[i]), Bits(static_cast<float>(c.definition(xs[i]))))
          << c.op << " f32 at " << xs[i];
      ASSERT_EQ(b[i].bits, bf16(static_cast<float>(c.definition(bx[i].f()))).bits)
          << c.op << " bf16 at " << bx[i].f();
      ASSERT_EQ(h[i].bits, f16(static_cast<float>(c.definition(hx[i].f()))).bits)
          << c.op << " f16 at " << hx[i].f();
    }
  }
}

// bf16 widening and rounding in bulk (vectorised where the CPU allows) against the scalar
// Bf16BitsToFloat / FloatToBf16Bits: every bf16 value, and for every upper half of an f32 the
// lower halves that decide its rounding (zero, below, at and above the tie, all ones), NaN
// payloads and subnormals included; from an unaligned start with a ragged tail.
TEST(VectorMath, Bf16ConversionsMatchTheScalarOnes) {
  std::vector<KernelSet> paths = VectorPathsOfThisCpu();
  if (paths.empty())  // the scalar loops, which the dispatch then picks
    paths.push_back({cpu::vmath::KernelPathName(), nullptr, nullptr, nullptr, cpu::vmath::Bf16ToF32,
                     cpu::vmath::F32ToBf16});
  std::vector<uint16_t> halves(1 << 16);
  for (uint32_t i = 0; i < (1u << 16); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> xs;
  for (uint32_t high = 0; high < (1u << 16); ++high)
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      xs.push_back(FromBits(high << 16 | low));
  const int64_t n = static_cast<int64_t>(xs.size());
  for (const KernelSet& path : paths) {
    std::printf("bf16 conversion path: %s\n", path.name.c_str());
    std::vector<float> widened(halves.size() + 1, -1.0f);
    path.bf16_to_f32(halves.data() + 1, widened.data() + 1, (1 << 16) - 4);
    EXPECT_EQ(widened[0], -1.0f) << path.name;
    for (size_t i = 1; i + 3 < halves.size(); ++i)
      ASSERT_EQ(Bits(widened[i]), Bits(Bf16BitsToFloat(halves[i])))
          << path.name << ": bf16 0x" << std::hex << i;
    for (size_t i = halves.size() - 3; i < widened.size(); ++i)
      ASSERT_EQ(widened[i], -1.0f) << path.name << ": wrote past its range";

    std::vector<uint16_t> rounded(n + 3, 0xabcd);
    path.f32_to_bf16(xs.data() + 1, rounded.data() + 1, n - 2);
    EXPECT_EQ(rounded[0], 0xabcd) << path.name << ": wrote before its range";
    EXPECT_EQ(rounded[n - 1], 0xabcd) << path.name << ": wrote past its range";
    int mismatches = 0;
    for (int64_t i = 1; i < n - 1; ++i)
      if (rounded[i] != FloatToBf16Bits(xs[i]) && ++mismatches <= 5)
        ADD_FAILURE() << path.name << ": f32 0x" << std::hex << Bits(xs[i]) << ": got 0x"
                      << rounded[i] << ", want 0x" << FloatToBf16Bits(xs[i]);
    EXPECT_EQ(mismatches, 0) << path.name;
    // Every length up to two vectors' worth of each: the ragged ends.
    for (int64_t len = 0; len <= 33; ++len) {
      std::vector<float> wide(len + 1, -1.0f);
      std::vector<uint16_t> narrow(len + 1, 0xabcd);
      path.bf16_to_f32(halves.data() + 3, wide.data(), len);
      path.f32_to_bf16(xs.data() + 3, narrow.data(), len);
      for (int64_t i = 0; i < len; ++i) {
        ASSERT_EQ(Bits(wide[i]), Bits(Bf16BitsToFloat(halves[3 + i]))) << path.name << " " << len;
        ASSERT_EQ(narrow[i], FloatToBf16Bits(xs[3 + i])) << path.name << " " << len;
      }
      ASSERT_EQ(wide[len], -1.0f) << path.name << " length " << len << ": wrote past its end";
      ASSERT_EQ(narrow[len], 0xabcd) << path.name << " length " << len << ": wrote past its end";
    }
  }
}

// convert between f32 and bf16, and binary ops on bf16 (widened, computed in f32 and rounded in
// blocks) give, element by element,
// the scalar rule: the f32 result of the widened operands rounded once to bf16. Several parallel
// chunks, a ragged tail, and special values.
TEST(VectorMath, Bf16ConvertAndBinaryOpsFollowTheScalarRule) {
  const int64_t n = 100'003;
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> any_half(0, 0xffff);
  std::uniform_real_distribution<float> range(-50.0f, 50.0f);
  std::vector<bf16> a, b;
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            1e-40f,
                            3.0e38f};
  for (int64_t i = 0; i < n; ++i) {
    if (i % 3 == 0) {
      a.push_back(bf16::FromBits(static_cast<uint16_t>(any_half(rng))));
      b.push_back(bf16::FromBits(static_cast<uint16_t>(any_half(rng))));
    } else {
      a.push_back(bf16(i % 101 == 0 ? specials[i % 6] : range(rng)));
      b.push_back(bf16(i % 103 == 0 ? specials[(i + 1) % 6] : range(rng)));
    }
  }
  struct Case {
    const char* op;
    float (*f)(float, float);
  };
  const Case cases[] = {
      {"stablehlo.multiply", [](float x, float y) { return x * y; }},
      {"stablehlo.add", [](float x, float y) { return x + y; }},
      {"stablehlo.subtract", [](float x, float y) { return x - y; }},
      {"stablehlo.divide", [](float x, float y) { return x / y; }},
  };
  // convert f32 -> bf16 -> f32 through the ops' bulk path: the scalar rounding and widening.
  std::vector<float> wide;
  for (int64_t i = 0; i < n; ++i) wide.push_back(a[i].f() * 1.2345f + b[i].f() * 1e-3f);
  Literal narrowed = Run1("stablehlo.convert", {Literal::FromVector<float>({n}, wide)}, {},
                          std::vector<Type>{Type(TensorType(ElementType::kBF16, {n}))});
  Literal back = Run1("stablehlo.convert", {narrowed}, {},
                      std::vector<Type>{Type(TensorType(ElementType::kF32, {n}))});
  auto narrowed_values = Elems<bf16>(narrowed);
  auto back_values = Elems<float>(back);
  ASSERT_EQ(static_cast<int64_t>(back_values.size()), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(narrowed_values[i].bits, FloatToBf16Bits(wide[i])) << "convert of " << wide[i];
    ASSERT_EQ(Bits(back_values[i]), Bits(Bf16BitsToFloat(narrowed_values[i].bits)));
  }
  for (const Case& c : cases) {
    auto got = Elems<bf16>(
        Run1(c.op, {Literal::FromVector<bf16>({n}, a), Literal::FromVector<bf16>({n}, b)}));
    ASSERT_EQ(static_cast<int64_t>(got.size()), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i].bits, bf16(c.f(a[i].f(), b[i].f())).bits)
          << c.op << " of " << a[i].f() << " and " << b[i].f() << " at " << i;
  }
}

// The row steps of softmax (subtract, divide, masked select) give the scalar loops' bits on
// sampled inputs with every special value, at every length through a few vectors, in place and
// not, and the select says where its last set mask is.
TEST(VectorMath, RowStepsMatchTheScalarLoops) {
  std::printf("vector math path: %s\n", cpu::vmath::KernelPathName());
  const std::vector<float> xs = SampledInputs();
  std::mt19937 rng(17);
  std::uniform_int_distribution<size_t> start(0, xs.size() - 64);
  const float divisors[] = {3.0f,
                            -0.0f,
                            1e-40f,
                            std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            7.25e30f};
  for (int64_t n = 0; n <= 40; ++n)
    for (float b : divisors) {
      const float* in = xs.data() + start(rng);
      std::vector<float> got(static_cast<size_t>(n) + 1, -1.0f), inout(in, in + n);
      cpu::vmath::SubtractScalarF32(in, b, got.data(), n);
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(Bits(got[j]), Bits(in[j] - b)) << "subtract n=" << n << " at " << j;
      EXPECT_EQ(got[n], -1.0f) << "subtract wrote past its end";
      cpu::vmath::DivideByScalarF32(inout.data(), b, inout.data(), n);
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(Bits(inout[j]), Bits(in[j] / b)) << "divide n=" << n << " at " << j;
      std::vector<uint8_t> mask(static_cast<size_t>(n));
      int64_t last = 0;
      for (int64_t j = 0; j < n; ++j) {
        mask[j] = static_cast<uint8_t>((rng() % 3 == 0) ? 0 : 1 + rng() % 2);
        if (mask[j]) last = j + 1;
      }
      if (n % 5 == 0) std::fill(mask.begin(), mask.end(), 0), last = 0;  // nothing visible
      std::vector<float> selected(static_cast<size_t>(n) + 1, -1.0f);
      EXPECT_EQ(cpu::vmath::SelectRowF32(in, mask.data(), b, selected.data(), n), last)
          << "select n=" << n;
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(Bits(selected[j]), Bits(mask[j] ? in[j] : b)) << "select n=" << n << " at " << j;
      EXPECT_EQ(selected[n], -1.0f) << "select wrote past its end";
    }
}

}  // namespace
}  // namespace tlaloc::ewtest
