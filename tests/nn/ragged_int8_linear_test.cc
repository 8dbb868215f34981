// The int8 expert product (nn::SparseMoe's int8 experts) as the composite
// tlaloc.ragged_int8_linear (nn/int8_linear.h), run by the interpreter as one kernel by its name
// (interp/fusion_int8.cc, cpu/ragged_dot_int8.cc):
// - mode "exact": the bits of the chain nn::SparseMoe emitted before the composite
//   (DequantizeInt8 of the s8 stack, then chlo.ragged_dot's grouped rows, run op by op) and of
//   the composite's decomposition, and close to a double-precision reference;
// - mode "q8_0": the bits of its decomposition run op by op and of llama.cpp's Q8_0 arithmetic
//   written out in plain C++;
// empty groups, rows past the last group and a group larger than the rows included; the module
// prints and parses back to the same composite and the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cpu/reduction_matmul_q8.h"
#include "cpu/reduction_matmul_q8_packed.h"
#include "nn/q8_0_reference.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/cpu/blas_kernels.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/int8_linear.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/moe.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"
#include "tlaloc/support/half.h"

namespace tlaloc::nn {
namespace {

// x f32 [M, K] grouped by `sizes` (s32 [G]), q s8 [G, N, K], scales f16 [G, N, K / 32].
struct Inputs {
  Literal x, q, scales, sizes;
  std::vector<int32_t> group_sizes;
};

Inputs RandomInputs(int64_t rows, int64_t n, int64_t k, std::vector<int32_t> sizes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> qdist(-127, 127);
  const int64_t g = static_cast<int64_t>(sizes.size());
  Inputs in{Literal(TensorType(ElementType::kF32, {rows, k})),
            Literal(TensorType(ElementType::kS8, {g, n, k})),
            Literal(TensorType(ElementType::kF16, {g, n, k / 32})),
            Literal::FromVector<int32_t>({g}, sizes), sizes};
  auto x = in.x.span<float>();
  for (size_t i = 0; i < x.size(); ++i) x[i] = dist(rng) * (i % 97 == 0 ? 20.0f : 1.0f);
  // A block of zeros (amax 0: scale 0, quants 0) and a value on a rounding tie.
  if (x.size() >= 64) {
    std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
    x[0] = 127.0f;
    x[1] = 2.5f;
  }
  for (auto& v : in.q.span<int8_t>()) v = static_cast<int8_t>(qdist(rng));
  for (auto& v : in.scales.span<uint16_t>()) v = FloatToHalfBits(std::fabs(dist(rng)) * 0.01f);
  return in;
}

enum class Program { kOldChain, kExact, kQ8_0 };

// main(x, q, scales, sizes): the old chain (ops), or the composite in one of its modes.
std::shared_ptr<Module> BuildModule(const Inputs& in, Program program) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor x = fb.AddArg(in.x.type()), q = fb.AddArg(in.q.type());
  Tensor s = fb.AddArg(in.scales.type()), sizes = fb.AddArg(in.sizes.type());
  Tensor y = program == Program::kOldChain
                 ? RaggedDot(x, DequantizeInt8(q, s), sizes, 2, ElementType::kF32)
             : program == Program::kExact ? RaggedInt8LinearExact(x, q, s, sizes)
                                          : RaggedInt8LinearQ8_0(x, q, s, sizes);
  EXPECT_TRUE(fb.Return({y}).ok()) << fb.status().ToString();
  return module;
}

struct Result {
  Literal out;
  int64_t ops = 0;
};

Result Execute(std::shared_ptr<Module> module, const Inputs& in, bool fuse) {
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  if (!exe.ok()) return {};
  ExecutionStats stats;
  auto out = (*exe)->Execute({in.x, in.q, in.scales, in.sizes}, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {out.ok() ? (*out)[0] : Literal(), stats.ops_executed};
}

bool SameBits(const Literal& a, const Literal& b) {
  return a.type() == b.type() && a.num_elements() > 0 &&
         std::memcmp(a.data(), b.data(), a.byte_size()) == 0;
}

// Each row's group, -1 past the last group.
std::vector<int64_t> GroupOfRows(const Inputs& in) {
  const int64_t rows = in.x.dims()[0];
  std::vector<int64_t> group_of(static_cast<size_t>(rows), -1);
  for (int64_t e = 0, start = 0; e < static_cast<int64_t>(in.group_sizes.size());
       start += in.group_sizes[e], ++e)
    for (int64_t r = start; r < std::min<int64_t>(start + in.group_sizes[e], rows); ++r)
      group_of[r] = e;
  return group_of;
}

// llama.cpp's Q8_0 arithmetic (q8_0_reference.h) per row with its group's matrix; rows in no
// group zero.
std::vector<float> Q8Reference(const Inputs& in) {
  const int64_t m = in.x.dims()[0], k = in.x.dims()[1], n = in.q.dims()[1];
  auto x = in.x.span<float>();
  auto w = in.q.span<int8_t>();
  auto sc = in.scales.span<uint16_t>();
  const std::vector<int64_t> group_of = GroupOfRows(in);
  std::vector<float> out(static_cast<size_t>(m * n), 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    if (group_of[i] < 0) continue;
    const q8test::Q8Row row = q8test::QuantizeRow(&x[i * k], k);
    const int64_t base = group_of[i] * n;
    for (int64_t j = 0; j < n; ++j)
      out[i * n + j] = q8test::Dot(row, &w[(base + j) * k], &sc[(base + j) * (k / 32)], k);
  }
  return out;
}

struct Case {
  int64_t rows, n, k;
  std::vector<int32_t> sizes;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {1, 48, 64, {0, 1, 0}},         // decode: one token, one expert
      {4, 64, 96, {1, 0, 2, 1}},      // decode rows, an empty group
      {6, 33, 32, {0, 4, 0}},         // rows past the last group: zero; a partial tile
      {40, 70, 128, {17, 0, 9, 14}},  // prefill groups
      {40, 96, 128, {17, 0, 9, 14}},  // prefill groups, whole 32-row tiles (packed experts)
      {12, 300, 64, {3, 20}},         // a group larger than the rows
      {64, 1100, 64, {30, 2, 32}},    // over 1024 outputs
      {9, 64, 2048, {2, 1, 6}}};      // K of a Qwen3-MoE hidden row
  return cases;
}

TEST(RaggedInt8Linear, ExactHasTheOldChainsBitsAndIsCloseToADoubleReference) {
  uint32_t seed = 11;
  for (const Case& c : Cases()) {
    const std::string what = "rows " + std::to_string(c.rows) + ", n " + std::to_string(c.n) +
                             ", k " + std::to_string(c.k);
    const Inputs in = RandomInputs(c.rows, c.n, c.k, c.sizes, seed++);
    const Result fused = Execute(BuildModule(in, Program::kExact), in, true);
    const Result decomposed = Execute(BuildModule(in, Program::kExact), in, false);
    const Result old_chain = Execute(BuildModule(in, Program::kOldChain), in, false);
    EXPECT_LT(fused.ops, decomposed.ops) << what << ": the decomposition ran, not the kernel";
    EXPECT_TRUE(SameBits(decomposed.out, old_chain.out)) << what;
    // Decode's groups: the matrix-vector kernel on both paths; prefill's: the same kernel on the
    // same dequantised block (sgemm's groups need OpenBLAS's kernels to fit the CPU).
    bool small_groups = true;
    for (int32_t size : c.sizes) small_groups = small_groups && size <= 4;
    if (small_groups || cpu::OpenBlasCoreFitsCpu()) {
      EXPECT_TRUE(SameBits(fused.out, old_chain.out)) << what;
    }
    const std::vector<int64_t> group_of = GroupOfRows(in);
    auto x = in.x.span<float>();
    auto q = in.q.span<int8_t>();
    auto sc = in.scales.span<uint16_t>();
    double worst = 0;
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = 0, mag = 0;
        if (group_of[r] >= 0) {
          const int64_t base = (group_of[r] * c.n + j) * c.k;
          for (int64_t i = 0; i < c.k; ++i) {
            const double w = q[base + i] * double(HalfBitsToFloat(sc[(base + i) / 32]));
            ref += x[r * c.k + i] * w;
            mag += std::fabs(x[r * c.k + i] * w);
          }
        }
        const double got = fused.out.span<float>()[r * c.n + j];
        if (group_of[r] < 0) {
          EXPECT_EQ(got, 0.0) << what << ": row " << r << " is in no group";
        }
        worst = std::max(worst, std::fabs(got - ref) / (mag + 1e-30));
      }
    EXPECT_LT(worst, 1e-5) << what;
  }
}

TEST(RaggedInt8Linear, Q8_0HasItsDecompositionsAndThePlainArithmeticsBits) {
  uint32_t seed = 21;
  for (const Case& c : Cases()) {
    const std::string what = "rows " + std::to_string(c.rows) + ", n " + std::to_string(c.n) +
                             ", k " + std::to_string(c.k);
    const Inputs in = RandomInputs(c.rows, c.n, c.k, c.sizes, seed++);
    auto module = BuildModule(in, Program::kQ8_0);
    // Twice: the second call finds the experts packed (cpu::CachedQ8Weights), where the CPU
    // has a packed layout (AVX512-VNNI or AVX2) and the experts are whole 32-row tiles.
    const int64_t packs = cpu::GetQ8CacheStats().packs;
    const Result fused = Execute(module, in, true), again = Execute(module, in, true);
    if (cpu::Q8PackingAvailable() && c.n % 32 == 0) {
      EXPECT_EQ(cpu::GetQ8CacheStats().packs, packs + 1) << what << ": the stack was not packed";
    }
    const Result decomposed = Execute(module, in, false);
    EXPECT_LT(fused.ops, decomposed.ops) << what << ": the decomposition ran, not the kernel";
    EXPECT_TRUE(SameBits(fused.out, decomposed.out)) << what;
    EXPECT_TRUE(SameBits(again.out, decomposed.out)) << what;
    const std::vector<float> want = Q8Reference(in);
    ASSERT_EQ(static_cast<size_t>(decomposed.out.num_elements()), want.size());
    EXPECT_EQ(std::memcmp(decomposed.out.data(), want.data(), want.size() * sizeof(float)), 0)
        << what;
  }
}

TEST(RaggedInt8Linear, CompositePrintsAndParsesBack) {
  const Inputs in = RandomInputs(10, 64, 64, {3, 0, 5}, 31);
  for (Program program : {Program::kExact, Program::kQ8_0}) {
    auto module = BuildModule(in, program);
    const std::string text = PrintModule(*module);
    const std::string mode = program == Program::kExact ? "exact" : "q8_0";
    EXPECT_NE(text.find("tlaloc.ragged_int8_linear"), std::string::npos) << text;
    EXPECT_NE(text.find("mode = \"" + mode + "\""), std::string::npos) << text;
    auto parsed = ParseModule(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(PrintModule(**parsed), text);
    const Result before = Execute(module, in, true);
    const Result after = Execute(std::shared_ptr<Module>(std::move(*parsed)), in, true);
    EXPECT_LT(after.ops, Execute(module, in, false).ops) << mode << ": parsed, it ran its ops";
    EXPECT_TRUE(SameBits(before.out, after.out)) << mode;
  }
}

TEST(RaggedInt8Linear, NegativeGroupSizeIsAnError) {
  Inputs in = RandomInputs(2, 3, 32, {1, -1}, 41);
  for (Program program : {Program::kExact, Program::kQ8_0}) {
    auto exe = Executable::Prepare(BuildModule(in, program), "main", InterpreterOptions{});
    ASSERT_TRUE(exe.ok()) << exe.status().ToString();
    auto out = (*exe)->Execute({in.x, in.q, in.scales, in.sizes});
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().ToString().find("group_sizes[1] = -1 is negative"), std::string::npos)
        << out.status().ToString();
  }
}

TEST(RaggedInt8Linear, SparseMoeEmitsTheCompositeInTheChosenForm) {
  for (Int8Form form : {Int8Form::kExact, Int8Form::kQ8_0}) {
    SetInt8Form(form);
    Module module("t");
    FunctionBuilder fb(
        &module, "main",
        {Type(TensorType(ElementType::kF32, {3, 64})), Type(TensorType(ElementType::kF32, {4, 64})),
         Type(TensorType(ElementType::kS8, {4, 32, 64})),
         Type(TensorType(ElementType::kS8, {4, 32, 64})),
         Type(TensorType(ElementType::kS8, {4, 64, 32})),
         Type(TensorType(ElementType::kF16, {4, 32, 2})),
         Type(TensorType(ElementType::kF16, {4, 32, 2})),
         Type(TensorType(ElementType::kF16, {4, 64, 1}))});
    MoeWeights w{fb.arg(1), fb.arg(2), fb.arg(3), fb.arg(4)};
    w.gate_scale = fb.arg(5);
    w.up_scale = fb.arg(6);
    w.down_scale = fb.arg(7);
    ASSERT_TRUE(fb.Return({SparseMoe(fb.arg(0), w, 2, true, MoeForm::kRaggedDot)}).ok())
        << fb.status().ToString();
    int composites = 0, ragged_dots = 0;
    for (const auto& op : fb.function()->entry().operations()) {
      ragged_dots += op->name() == "chlo.ragged_dot";
      if (op->name() != "stablehlo.composite" ||
          GetStringAttr(op->attrs(), "name") != kRaggedInt8LinearComposite)
        continue;
      const Attribute* a = FindAttr(op->attrs(), "composite_attributes");
      ASSERT_NE(a, nullptr);
      EXPECT_EQ(GetStringAttr(a->as_dict(), "mode"), Int8FormName(form));
      EXPECT_EQ(GetIntAttr(a->as_dict(), "block", 0), 32);
      ++composites;
    }
    EXPECT_EQ(composites, 3) << Int8FormName(form);  // gate, up, down
    EXPECT_EQ(ragged_dots, 0) << "the experts' products are the composites'";
  }
  SetInt8Form(std::nullopt);
}

}  // namespace
}  // namespace tlaloc::nn
