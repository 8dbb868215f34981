// The runbook's portability questions, asked of the TLALOC_TEST_PJRT_TARGET lane's plugin
// (Tlaloc's own by default, XLA:CPU with xla-cpu), against the in-process interpreter on the
// same inputs. Each test prints what it measured and records it as an XML property; what
// XLA:CPU answers is in docs/PJRT.md ("What XLA:CPU does differently"):
//  - threefry (integer ops only) and stablehlo.rng_bit_generator THREE_FRY: the same bits;
//  - normal and Gumbel draws (erf_inv, log of those bits): how far they move;
//  - whether an f32 -> bf16 -> f32 convert pair is folded, by default and with
//    STRICT_PRECISION (xla_allow_excess_precision = false), which must keep it;
//  - where a bf16 dot rounds, and a bf16 buffer's bytes on the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "pjrt/pjrt_test_util.h"
#include "tlaloc/builder/random.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/support/half.h"

namespace tlaloc::pjrt {
namespace {

class LaneNumerics : public ::testing::Test {
 protected:
  void SetUp() override {
    const testing::Lane lane = testing::TestLane();
    ASSERT_TRUE(lane.error.empty()) << lane.error;
    if (!lane.skip.empty()) GTEST_SKIP() << lane.skip;
    exact_ = lane.is_tlaloc_plugin();
    SessionOptions o;
    o.target = lane.target;
    auto s = PjrtSession::Open(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = std::move(*s);
    platform_ = session_->platform_name() + " (" + lane.target.ToString() + ")";
  }
  void Measured(const std::string& key, const std::string& value) {
    RecordProperty(key, value);
    std::printf("  %s: %s = %s\n", platform_.c_str(), key.c_str(), value.c_str());
  }
  // Runs `module`'s entry on the plugin and on the interpreter.
  void RunBoth(std::shared_ptr<Module> module, const std::vector<Literal>& args,
               std::vector<Literal>* plugin, std::vector<Literal>* interp) {
    auto want = Interpret(*module, module->Entry()->name(), args);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto backend = MakePjrtBackend(std::move(session_));
    auto program = backend->Compile(module);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    auto got = backend->Run(**program, args);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    *plugin = std::move(*got);
    *interp = std::move(*want);
  }
  std::vector<Literal> Run(const std::string& mlir, const std::vector<Literal>& args,
                           const CompileOptions& options = {}) {
    auto exe = session_->Compile(mlir, options);
    EXPECT_TRUE(exe.ok()) << exe.status().ToString();
    if (!exe.ok()) return {};
    auto out = session_->Run(**exe, args);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? std::move(*out) : std::vector<Literal>{};
  }
  std::unique_ptr<PjrtSession> session_;  // RunBoth hands it to a backend
  std::string platform_;
  bool exact_ = true;
};

// Words of two u32 (or u64) literals that differ.
int64_t Differing(const Literal& a, const Literal& b) {
  if (!(a.type() == b.type())) return -1;
  const auto* x = reinterpret_cast<const unsigned char*>(a.data());
  const auto* y = reinterpret_cast<const unsigned char*>(b.data());
  const int64_t width = BitWidth(a.element_type()) / 8;
  int64_t n = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i)
    n += std::memcmp(x + i * width, y + i * width, width) != 0;
  return n;
}

TEST_F(LaneNumerics, ThreefryBitsAndUniformAreExact) {
  auto module = std::make_shared<Module>("threefry_lane");
  FunctionBuilder fb(module.get(), "main");
  Tensor bits = RandomBits(PrngKey(fb.ops(), 20261201), {4096});
  Tensor original = RandomBits(PrngKey(fb.ops(), 3), {4096}, ThreefryMode::kOriginal);
  Tensor uniform = Uniform(PrngKey(fb.ops(), 7), {4096});
  Tensor normal = Normal(PrngKey(fb.ops(), 11), {4096});
  Tensor gumbel = Gumbel(PrngKey(fb.ops(), 13), {4096});
  ASSERT_TRUE(fb.Return({bits, original, uniform, normal, gumbel}).ok());
  std::vector<Literal> got, want;
  RunBoth(module, {}, &got, &want);
  ASSERT_EQ(got.size(), 5u);
  const char* names[] = {"threefry_bits", "threefry_bits_original", "uniform_f32"};
  for (int i = 0; i < 3; ++i) {
    const int64_t n = Differing(got[i], want[i]);
    Measured(std::string(names[i]) + "_differing", std::to_string(n) + " of 4096");
    EXPECT_EQ(n, 0) << names[i] << ": integer ops and an exact bit cast: any difference is a bug";
  }
  // Normal (erf_inv) and Gumbel (log) go through each compiler's transcendental functions. Ulps
  // mislead near zero (a Gumbel draw near 0 has tiny ulps): bounded by a relative 1e-5.
  for (auto [i, name] : {std::pair{3, "normal_f32"}, std::pair{4, "gumbel_f32"}}) {
    const int64_t ulp = testing::MaxUlpDistance(got[i], want[i]);
    auto x = got[i].span<float>(), y = want[i].span<float>();
    double worst = 0;
    for (size_t k = 0; k < x.size(); ++k)
      worst =
          std::max(worst, std::fabs(double{x[k]} - y[k]) / std::max(1.0, std::fabs(double{y[k]})));
    char text[96];
    std::snprintf(text, sizeof text, "%.3g (largest %lld ulp)", worst, static_cast<long long>(ulp));
    Measured(std::string(name) + "_largest_relative_difference", text);
    if (exact_) {
      EXPECT_EQ(ulp, 0) << name;
    } else {
      EXPECT_LE(worst, 1e-5) << name;
    }
  }
}

TEST_F(LaneNumerics, RngBitGeneratorThreeFryIsXlasExpansion) {
  auto module = ParseModule(R"(module @rng_lane {
func.func public @main(%s: tensor<2xui64>) -> (tensor<2xui64>, tensor<1000xui32>, tensor<2xui64>, tensor<7x3xui64>) {
  %0:2 = stablehlo.rng_bit_generator %s, algorithm = THREE_FRY : (tensor<2xui64>) -> (tensor<2xui64>, tensor<1000xui32>)
  %1:2 = stablehlo.rng_bit_generator %0#0, algorithm = THREE_FRY : (tensor<2xui64>) -> (tensor<2xui64>, tensor<7x3xui64>)
  return %0#0, %0#1, %1#0, %1#1 : tensor<2xui64>, tensor<1000xui32>, tensor<2xui64>, tensor<7x3xui64>
}
})");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  std::vector<Literal> got, want;
  RunBoth(std::shared_ptr<Module>(std::move(*module)),
          {Literal::FromVector<uint64_t>({2}, {0x0123456789abcdefull, 42})}, &got, &want);
  ASSERT_EQ(got.size(), 4u);
  int64_t differing = 0;
  for (size_t i = 0; i < 4; ++i) differing += Differing(got[i], want[i]);
  Measured("rng_bit_generator_three_fry_words_differing", std::to_string(differing) + " of 1046");
  EXPECT_EQ(differing, 0) << "the interpreter's THREE_FRY claims XLA's expansion, state included";
}

// 1 + 2^-10 is not a bf16: a kept convert pair gives 1, a folded one gives the input back.
constexpr const char* kConvertPair = R"(module @convert_pair {
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xbf16>
  %1 = stablehlo.convert %0 : (tensor<4xbf16>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
})";

TEST_F(LaneNumerics, ConvertPairFoldingDefaultAndStrict) {
  const float x = 1.0f + 1.0f / 1024.0f;
  Literal in = Literal::FromVector<float>({4}, {x, x, x, x});
  auto folded = [&](const CompileOptions& o) {
    auto out = Run(kConvertPair, {in}, o);
    return !out.empty() && out[0].span<float>()[0] == x;
  };
  const bool by_default = folded(CompileOptions());
  const bool strict = folded(CompileOptions::StrictPrecision());
  Measured("convert_pair_folded_default", by_default ? "yes" : "no");
  Measured("convert_pair_folded_strict_precision", strict ? "yes" : "no");
  EXPECT_FALSE(strict) << "STRICT_PRECISION (xla_allow_excess_precision = false) must keep it";
  if (exact_) {
    EXPECT_FALSE(by_default) << "the interpreter rounds at every convert";
  }
}

// 256 + 1 + 1 in bf16 (8 significant bits: 256..512 in steps of 2): rounding once at the op's
// boundary gives 258, rounding after every addition gives 256 (257 ties to even 256).
constexpr const char* kBf16Dot = R"(module @bf16_dot {
func.func public @main(%a: tensor<1x3xbf16>, %b: tensor<3x1xbf16>) -> tensor<1x1xbf16> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<1x3xbf16>, tensor<3x1xbf16>) -> tensor<1x1xbf16>
  return %0 : tensor<1x1xbf16>
}
})";

TEST_F(LaneNumerics, Bf16DotRoundsWhereAndBufferBytes) {
  auto bf = [](std::vector<float> v) {
    std::vector<bf16> out;
    for (float f : v) out.push_back(bf16(f));
    return out;
  };
  Literal a = Literal::FromVector<bf16>({1, 3}, bf({256, 1, 1}));
  Literal b = Literal::FromVector<bf16>({3, 1}, bf({1, 1, 1}));
  auto out = Run(kBf16Dot, {a, b});
  ASSERT_EQ(out.size(), 1u);
  const float got = static_cast<float>(out[0].span<bf16>()[0]);
  auto interp = Interpret(**ParseModule(kBf16Dot), "main", {a, b});
  ASSERT_TRUE(interp.ok());
  const float want = static_cast<float>((*interp)[0].span<bf16>()[0]);
  auto where = [](float v) {
    return v == 258 ? " (rounds at the op boundary)" : v == 256 ? " (rounds every step)" : " (?)";
  };
  Measured("bf16_dot_256_1_1", std::to_string(got) + where(got));
  Measured("bf16_dot_256_1_1_interpreter", std::to_string(want) + where(want));
  EXPECT_TRUE(got == 258 || got == 256) << got;
  if (exact_) {
    EXPECT_EQ(got, want);
  }

  Literal l = Literal::FromVector<bf16>({3, 5}, std::vector<bf16>(15, bf16(1.0f)));
  auto buffer = session_->ToDevice(l);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  TL_PJRT_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args, q);
  q.buffer = buffer->raw();
  Status s = TL_PJRT_CALL(session_->api(), Buffer_OnDeviceSizeInBytes, &q);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Measured("bf16_3x5_on_device_bytes",
           std::to_string(q.on_device_size_in_bytes) + " (30 unpadded)");
  EXPECT_GE(q.on_device_size_in_bytes, 30u);
}

}  // namespace
}  // namespace tlaloc::pjrt
