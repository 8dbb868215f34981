// The program forms of int8 products (nn/int8_linear.h), both the composite tlaloc.int8_linear:
// the q8_0 form's decomposition is llama.cpp's Q8_0 arithmetic, the exact form's the dequantising
// chain, and the interpreter's kernel for each (interp/fusion_int8.cc) returns the
// decomposition's bits, on decode rows and prefill tiles.
#include "tlaloc/nn/int8_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <tuple>

#include "nn/q8_0_reference.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/support/half.h"

namespace tlaloc::nn {
namespace {

struct Case {
  std::vector<int64_t> x_dims;
  int64_t n;
};

struct Inputs {
  Literal x, q, scale;
};

Inputs RandomInputs(const std::vector<int64_t>& x_dims, int64_t n, uint32_t seed) {
  const int64_t k = x_dims.back();
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> qd(-127, 127);
  std::uniform_real_distribution<float> sd(0.001f, 0.02f);
  Inputs in{Literal(TensorType(ElementType::kF32, x_dims)),
            Literal(TensorType(ElementType::kS8, {n, k})),
            Literal(TensorType(ElementType::kF16, {n, k / 32}))};
  auto x = in.x.span<float>();
  for (size_t i = 0; i < x.size(); ++i) x[i] = nd(rng) * (i % 97 == 0 ? 20.0f : 1.0f);
  // A block of zeros (amax 0: scale 0, quants 0) and one with a value on a rounding tie.
  if (x.size() >= 64) {
    std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
    x[0] = 127.0f;
    x[1] = 2.5f;
  }
  for (auto& v : in.q.span<int8_t>()) v = static_cast<int8_t>(qd(rng));
  for (auto& v : in.scale.span<uint16_t>()) v = FloatToHalfBits(sd(rng));
  return in;
}

// main(x, q, scale) = Linear(x, q, scale) in the current int8 form.
std::unique_ptr<Module> LinearModule(const Inputs& in) {
  auto module = std::make_unique<Module>("t");
  FunctionBuilder fb(module.get(), "main",
                     {Type(in.x.type()), Type(in.q.type()), Type(in.scale.type())});
  Status s = fb.Return({Linear(fb.arg(0), fb.arg(1), nullptr, "", fb.arg(2))});
  EXPECT_TRUE(s.ok()) << s.ToString();
  return module;
}

Literal RunLinear(const Module& m, const Inputs& in, bool fuse, int64_t* ops = nullptr) {
  InterpreterOptions options;
  options.fuse = fuse;
  ExecutionStats stats;
  auto out = Interpret(m, "main", {in.x, in.q, in.scale}, &stats, options);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (ops) *ops = stats.ops_executed;
  return out.ok() ? (*out)[0] : Literal();
}

bool SameBits(const Literal& a, const Literal& b) {
  return a.type() == b.type() && a.num_elements() > 0 &&
         std::memcmp(a.span<float>().data(), b.span<float>().data(),
                     a.num_elements() * sizeof(float)) == 0;
}

// llama.cpp's arithmetic written out (q8_0_reference.h) for every row of x and of w.
std::vector<float> Reference(const Inputs& in) {
  const int64_t k = in.q.dims()[1], n = in.q.dims()[0], m = in.x.num_elements() / k;
  auto x = in.x.span<float>();
  auto w = in.q.span<int8_t>();
  auto sc = in.scale.span<uint16_t>();
  std::vector<float> out(m * n);
  for (int64_t i = 0; i < m; ++i) {
    const q8test::Q8Row row = q8test::QuantizeRow(&x[i * k], k);
    for (int64_t j = 0; j < n; ++j)
      out[i * n + j] = q8test::Dot(row, &w[j * k], &sc[j * k / 32], k);
  }
  return out;
}

class Int8LinearTest : public ::testing::Test {
 protected:
  void SetUp() override { SetInt8Form(std::nullopt); }
  void TearDown() override { SetInt8Form(std::nullopt); }
};

TEST_F(Int8LinearTest, KernelHasTheDecompositionsBits) {
  ASSERT_EQ(std::getenv("TLALOC_INT8_ACTIVATIONS"), nullptr) << "run without the alias set";
  // Decode rows (1, 2), a prefill tile and its tail (13 rows, 70 columns: a partial 32-column
  // tile), a rank-3 x, and a k of one block.
  const std::vector<Case> cases = {{{1, 1024}, 96},   {{2, 64}, 33}, {{13, 256}, 70},
                                   {{2, 7, 128}, 64}, {{6, 32}, 40}, {{1, 2048}, 160}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "x [" << c.x_dims.front() << ".." << c.x_dims.back() << "], n " << c.n);
    const Inputs in = RandomInputs(c.x_dims, c.n, seed++);
    auto m = LinearModule(in);
    int64_t fused_ops = 0, plain_ops = 0;
    const Literal fused = RunLinear(*m, in, true, &fused_ops);
    const Literal plain = RunLinear(*m, in, false, &plain_ops);
    EXPECT_LT(fused_ops, plain_ops) << "the composite ran its decomposition, not the kernel";
    EXPECT_TRUE(SameBits(fused, plain));
    const std::vector<float> want = Reference(in);
    ASSERT_EQ(static_cast<size_t>(plain.num_elements()), want.size());
    EXPECT_EQ(std::memcmp(plain.span<float>().data(), want.data(), want.size() * sizeof(float)), 0);
  }
}

// main(x, q, scales) = Int8LinearExact(x * 2, q, scales) on x f32 [rows, k], q s8 [n, k],
// scales f16 [n, k / 32]. x is doubled first: an intermediate that dies at the product (with
// n == k its buffer has the result's type, and must not be taken over while the kernel reads it).
struct ExactRun {
  Literal out;
  int64_t ops = 0;
  int composites = 0;  // tlaloc.int8_linear {mode = "exact"} in main
};

ExactRun RunExact(const Literal& x, const Literal& q, const Literal& scales, bool fuse) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor xin = fb.AddArg(x.type()), qin = fb.AddArg(q.type()), sin = fb.AddArg(scales.type());
  EXPECT_TRUE(fb.Return({Int8LinearExact(xin * 2.0, qin, sin)}).ok()) << fb.status().ToString();
  ExactRun r;
  for (const auto& op : fb.function()->entry().operations()) {
    if (op->name() != "stablehlo.composite") continue;
    const Attribute* a = FindAttr(op->attrs(), "composite_attributes");
    r.composites += GetStringAttr(op->attrs(), "name") == kInt8LinearComposite && a &&
                    GetStringAttr(a->as_dict(), "mode") == "exact";
  }
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto out = (*exe)->Execute({x, q, scales}, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  r.out = out.ok() ? (*out)[0] : Literal();
  r.ops = stats.ops_executed;
  return r;
}

// The exact form's composite: decode's 1-4 rows (the int8 matrix-vector kernel) and prefill's
// more (dequantise, then the f32 product) return the decomposition's exact bits; both agree with
// a double-precision reference.
TEST_F(Int8LinearTest, ExactKernelHasTheDecompositionsBits) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> qdist(-128, 127);  // every int8
  for (const auto& [rows, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 37, 96},
                                   {2, 64, 1024},
                                   {3, 9, 32},
                                   {4, 130, 160},
                                   {5, 33, 64},
                                   {17, 70, 128},
                                   {1, 96, 96},
                                   {3, 64, 64},
                                   {6, 64, 64},
                                   // Over 4 rows and 1024 columns: dequantised and multiplied
                                   // 256 rows of the matrix at a time.
                                   {6, 1100, 64},
                                   {9, 1024, 96}}) {
    std::vector<float> xv(static_cast<size_t>(rows * k));
    for (float& v : xv) v = dist(rng);
    std::vector<int8_t> qv(static_cast<size_t>(n * k));
    for (int8_t& v : qv) v = static_cast<int8_t>(qdist(rng));
    std::vector<uint16_t> sv(static_cast<size_t>(n * k / 32));
    for (uint16_t& v : sv) v = FloatToHalfBits(std::fabs(dist(rng)) * 0.01f);
    const Literal x = Literal::FromVector<float>({rows, k}, xv);
    const Literal q = Literal::FromVector<int8_t>({n, k}, qv);
    Literal s(TensorType(ElementType::kF16, {n, k / 32}));
    std::memcpy(s.data(), sv.data(), sv.size() * 2);
    ExactRun fused = RunExact(x, q, s, true), plain = RunExact(x, q, s, false);
    ASSERT_EQ(fused.out.byte_size(), plain.out.byte_size());
    EXPECT_EQ(std::memcmp(fused.out.data(), plain.out.data(), plain.out.byte_size()), 0)
        << "rows " << rows << ", n " << n << ", k " << k;
    EXPECT_EQ(fused.composites, 1);
    // The composite ran as its kernel (none of its decomposition's seven ops ran), and x * 2's
    // scalar broadcast was read in place.
    EXPECT_EQ(fused.ops, plain.ops - 8) << "the decomposition ran";
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < k; ++i) {
          const double w =
              qv[j * k + i] * static_cast<double>(HalfBitsToFloat(sv[(j * k + i) / 32]));
          ref += 2.0 * xv[r * k + i] * w;
          mag += std::fabs(2.0 * xv[r * k + i] * w);
        }
        worst =
            std::max(worst, std::fabs(fused.out.span<float>()[r * n + j] - ref) / (mag + 1e-30));
      }
    EXPECT_LT(worst, 1e-5) << "rows " << rows;
  }
}

TEST_F(Int8LinearTest, ExactFormIsTheDequantisedProduct) {
  const Inputs in = RandomInputs({3, 128}, 48, 7);
  // The choice also sets the interpreter's mode for the exact chain (SetInt8Form), so each
  // module runs under the form it was built in.
  SetInt8Form(Int8Form::kExact);
  auto exact = LinearModule(in);
  const Literal y = RunLinear(*exact, in, true);
  SetInt8Form(Int8Form::kQ8_0);
  auto q8 = LinearModule(in);
  const Literal z = RunLinear(*q8, in, true);
  auto has_composite = [](const Module& m) {
    for (const auto& op : m.Find("main")->entry().operations())
      if (op->name() == "stablehlo.composite") return true;
    return false;
  };
  // Both forms are the composite tlaloc.int8_linear (modes "exact" and "q8_0"), each with its
  // decomposition.
  EXPECT_TRUE(has_composite(*exact));
  EXPECT_TRUE(has_composite(*q8));
  EXPECT_EQ(exact->functions().size(), 2u);
  EXPECT_EQ(q8->functions().size(), 2u);
  // The exact form: f32 x times the dequantised matrix, compared within f32 sum reordering.
  const int64_t k = 128, n = 48;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t e = 0; e < k; ++e)
        want += double{in.x.span<float>()[i * k + e]} * in.q.span<int8_t>()[j * k + e] *
                HalfBitsToFloat(in.scale.span<uint16_t>()[j * (k / 32) + e / 32]);
      EXPECT_NEAR(y.span<float>()[i * n + j], want, 1e-4 * (1 + std::fabs(want)));
    }
  // q8_0 differs from exact (activations lose bits), by at most what rounding each activation
  // to its block's step moves: half a step (amax / 127, its f16 rounding aside) per element.
  EXPECT_FALSE(SameBits(y, z));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double bound = 1e-5;
      for (int64_t b = 0; b < k / 32; ++b) {
        double amax = 0, wsum = 0;
        for (int64_t e = b * 32; e < b * 32 + 32; ++e) {
          amax = std::max(amax, double{std::fabs(in.x.span<float>()[i * k + e])});
          wsum += std::fabs(in.q.span<int8_t>()[j * k + e] *
                            HalfBitsToFloat(in.scale.span<uint16_t>()[j * (k / 32) + b]));
        }
        bound += (0.5 + 0.1) * amax / 127 * wsum;
      }
      EXPECT_NEAR(z.span<float>()[i * n + j], y.span<float>()[i * n + j], bound);
    }
}

TEST_F(Int8LinearTest, FormsParseAndTheAliasIsRead) {
  EXPECT_EQ(*ParseInt8Form("exact", "--int8-form"), Int8Form::kExact);
  EXPECT_EQ(*ParseInt8Form("q8_0", "--int8-form"), Int8Form::kQ8_0);
  auto bad = ParseInt8Form("q4", "--int8-form");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("--int8-form"), std::string::npos);
  EXPECT_EQ(*CurrentInt8Form(), Int8Form::kQ8_0);  // the default
  ::setenv("TLALOC_INT8_ACTIVATIONS", "exact", 1);
  EXPECT_EQ(*CurrentInt8Form(), Int8Form::kExact);
  SetInt8Form(Int8Form::kQ8_0);  // a choice wins over the environment
  EXPECT_EQ(*CurrentInt8Form(), Int8Form::kQ8_0);
  SetInt8Form(std::nullopt);
  ::setenv("TLALOC_INT8_ACTIVATIONS", "q4", 1);
  EXPECT_FALSE(CurrentInt8Form().ok());
  ::unsetenv("TLALOC_INT8_ACTIVATIONS");
}

}  // namespace
}  // namespace tlaloc::nn
