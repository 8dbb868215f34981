// The in-tree oracle of the CPU kernel layer: every op with a fast kernel (cpu::KernelOpNames)
// runs on random inputs through its kernel and through its reference evaluation (the op's
// OpDef::eval, TLALOC_CPU_KERNELS=0), and the two agree:
//  - bit for bit where the kernel's arithmetic is the reference's: integer products (the kernel
//    hands them to the reference), reduce's row folds (sequential in index order, like the
//    reference), and the bulk math loops the elementwise references run (checked below);
//  - within a stated tolerance for float products, whose kernels sum in another order (the
//    matrix-vector kernel in lanes, OpenBLAS and oneDNN in blocks; the ragged_dot reference sums
//    in double): |kernel - reference| <= tol * sum_k |a_k b_k| per element, tol 1e-5 for f32 and
//    f64 accumulation seen through an f32 result, 1e-12 for f64, and one bf16 rounding step
//    (2^-8 relative, plus the f32 tolerance) where the result is bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/vector_math.h"
#include "tlaloc/cpu/kernels.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc {
namespace {

// Sets TLALOC_CPU_KERNELS for the scope (the interpreter reads it when it plans a function).
class ReferenceOnly {
 public:
  explicit ReferenceOnly(bool on) {
    if (on) setenv("TLALOC_CPU_KERNELS", "0", 1);
  }
  ~ReferenceOnly() { unsetenv("TLALOC_CPU_KERNELS"); }
};

std::vector<Literal> Run(const Module& m, const std::vector<Literal>& args, bool reference) {
  ReferenceOnly env(reference);
  InterpreterOptions options;
  options.fuse = false;  // the op itself, not a fused chain around it
  auto out = Interpret(m, "main", args, nullptr, options);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(*out) : std::vector<Literal>{};
}

Literal Random(ElementType et, std::vector<int64_t> dims, std::mt19937& rng, double lo = -1,
               double hi = 1) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = IsFloat(et) ? u(rng) : std::floor(u(rng) * 50);
  return Literal::FromDoubles(et, std::move(dims), v);
}

// An oracle case: a one-op program, its arguments, and the tolerance of the comparison (0: bit
// for bit). `scale` is sum_k |a_k b_k| for each result element, computed from |operands| by the
// same program run on absolute values (a product's error bound), or empty for bitwise cases.
struct Case {
  std::string name, op, program;
  std::vector<Literal> args;
  double tol = 0;
  bool bf16_result = false;
};

Literal Abs(const Literal& l) {
  if (!IsFloat(l.element_type())) return l;
  std::vector<double> v(l.num_elements());
  for (int64_t i = 0; i < l.num_elements(); ++i) v[i] = std::fabs(l.GetAsDouble(i));
  return Literal::FromDoubles(l.element_type(), l.dims(), v);
}

// Returns whether the kernel's bits differ from the reference's (within the tolerance).
bool CheckCase(const Case& c) {
  SCOPED_TRACE(c.name);
  auto m = ParseModule(c.program);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return false;
  std::vector<Literal> fast = Run(**m, c.args, /*reference=*/false);
  std::vector<Literal> ref = Run(**m, c.args, /*reference=*/true);
  EXPECT_EQ(fast.size(), 1u);
  EXPECT_EQ(ref.size(), 1u);
  if (fast.size() != 1 || ref.size() != 1) return false;
  EXPECT_EQ(fast[0].type(), ref[0].type());
  const bool same = fast[0].BitwiseEquals(ref[0]);
  if (c.tol == 0) {
    EXPECT_TRUE(same) << "kernel " << fast[0].ToString() << "\nreference " << ref[0].ToString();
    return !same;
  }
  std::vector<Literal> abs_args;
  for (const Literal& a : c.args) abs_args.push_back(Abs(a));
  std::vector<Literal> scale = Run(**m, abs_args, /*reference=*/true);
  EXPECT_EQ(scale.size(), 1u);
  if (scale.size() != 1) return false;
  int64_t bad = 0;
  for (int64_t i = 0; i < ref[0].num_elements(); ++i) {
    const double f = fast[0].GetAsDouble(i), r = ref[0].GetAsDouble(i);
    const double s = scale[0].GetAsDouble(i);
    double bound = c.tol * s;
    if (c.bf16_result) bound += std::ldexp(std::fabs(r), -8) + c.tol * s;
    if (!(std::fabs(f - r) <= bound) && ++bad <= 5)
      ADD_FAILURE() << "element " << i << ": kernel " << f << ", reference " << r << ", bound "
                    << bound;
  }
  EXPECT_EQ(bad, 0);
  return !same;
}

std::string DotProgram(const std::string& lhs, const std::string& rhs, const std::string& out,
                       const std::string& dims) {
  return "module {\n  func.func @main(%arg0: " + lhs + ", %arg1: " + rhs + ") -> " + out +
         " {\n    %0 = stablehlo.dot_general %arg0, %arg1, " + dims + " : (" + lhs + ", " + rhs +
         ") -> " + out + "\n    return %0 : " + out + "\n  }\n}\n";
}

std::string RaggedProgram(const std::string& lhs, const std::string& rhs, const std::string& out,
                          const std::string& groups, const std::string& dims) {
  return "module {\n  func.func @main(%arg0: " + lhs + ", %arg1: " + rhs + ", %arg2: " + groups +
         ") -> " + out + " {\n    %0 = \"chlo.ragged_dot\"(%arg0, %arg1, %arg2) " +
         "{ragged_dot_dimension_numbers = #chlo.ragged_dot<" + dims + ">} : (" + lhs + ", " + rhs +
         ", " + groups + ") -> " + out + "\n    return %0 : " + out + "\n  }\n}\n";
}

std::string ReduceProgram(const std::string& in, const std::string& out, const std::string& body,
                          const std::string& dims) {
  return "module {\n  func.func @main(%arg0: " + in + ", %arg1: tensor<f32>) -> " + out +
         " {\n    %0 = stablehlo.reduce(%arg0 init: %arg1) applies " + body +
         " across dimensions = " + dims + " : (" + in + ", tensor<f32>) -> " + out +
         "\n    return %0 : " + out + "\n  }\n}\n";
}

Literal Groups(const std::vector<int32_t>& sizes) {
  return Literal::FromVector<int32_t>({static_cast<int64_t>(sizes.size())}, sizes);
}

std::vector<Case> Cases() {
  std::mt19937 rng(37);
  const ElementType f32 = ElementType::kF32, bf16 = ElementType::kBF16;
  std::vector<Case> cases;
  auto dot = [&](std::string name, std::string lhs, std::vector<int64_t> ld, ElementType lt,
                 std::string rhs, std::vector<int64_t> rd, ElementType rt, std::string out,
                 std::string dims, double tol, bool bf16_result = false) {
    cases.push_back({name,
                     "stablehlo.dot_general",
                     DotProgram(lhs, rhs, out, dims),
                     {Random(lt, ld, rng), Random(rt, rd, rng)},
                     tol,
                     bf16_result});
  };
  // Batched blocks (OpenBLAS or oneDNN), the matrix-vector kernel (one row, four rows), a
  // transposed operand read in place, an operand that must be packed, bf16 (oneDNN where the CPU
  // has bf16 arithmetic), a bf16 result, f64 (OpenBLAS dgemm) and integers (the reference).
  dot("batched f32", "tensor<2x9x64xf32>", {2, 9, 64}, f32, "tensor<2x64x33xf32>", {2, 64, 33}, f32,
      "tensor<2x9x33xf32>", "batching_dims = [0] x [0], contracting_dims = [2] x [1]", 1e-5);
  dot("matrix-vector f32", "tensor<1x300xf32>", {1, 300}, f32, "tensor<300x40xf32>", {300, 40}, f32,
      "tensor<1x40xf32>", "contracting_dims = [1] x [0]", 1e-5);
  dot("four rows, transposed rhs", "tensor<4x96xf32>", {4, 96}, f32, "tensor<70x96xf32>", {70, 96},
      f32, "tensor<4x70xf32>", "contracting_dims = [1] x [1]", 1e-5);
  dot("packed lhs", "tensor<16x3x8xf32>", {16, 3, 8}, f32, "tensor<3x16x5xf32>", {3, 16, 5}, f32,
      "tensor<3x8x5xf32>", "batching_dims = [1] x [0], contracting_dims = [0] x [1]", 1e-5);
  dot("bf16 operands", "tensor<24x64xbf16>", {24, 64}, bf16, "tensor<64x40xbf16>", {64, 40}, bf16,
      "tensor<24x40xf32>", "contracting_dims = [1] x [0]", 1e-5);
  dot("bf16 matrix-vector", "tensor<2x128xbf16>", {2, 128}, bf16, "tensor<50x128xbf16>", {50, 128},
      bf16, "tensor<2x50xf32>", "contracting_dims = [1] x [1]", 1e-5);
  dot("bf16 result", "tensor<12x32xbf16>", {12, 32}, bf16, "tensor<32x20xbf16>", {32, 20}, bf16,
      "tensor<12x20xbf16>", "contracting_dims = [1] x [0]", 1e-5, /*bf16_result=*/true);
  dot("f64", "tensor<7x30xf64>", {7, 30}, ElementType::kF64, "tensor<30x9xf64>", {30, 9},
      ElementType::kF64, "tensor<7x9xf64>", "contracting_dims = [1] x [0]", 1e-12);
  dot("i32", "tensor<6x10xi32>", {6, 10}, ElementType::kS32, "tensor<10x4xi32>", {10, 4},
      ElementType::kS32, "tensor<6x4xi32>", "contracting_dims = [1] x [0]", 0);
  cases.push_back({"dot (matrix times vector)",
                   "stablehlo.dot",
                   "module {\n  func.func @main(%arg0: tensor<6x20xf32>, %arg1: tensor<20xf32>) "
                   "-> tensor<6xf32> {\n    %0 = stablehlo.dot %arg0, %arg1 : (tensor<6x20xf32>, "
                   "tensor<20xf32>) -> tensor<6xf32>\n    return %0 : tensor<6xf32>\n  }\n}\n",
                   {Random(f32, {6, 20}, rng), Random(f32, {20}, rng)},
                   1e-5});

  // chlo.ragged_dot: grouped rows against [G, K, N] and [G, N, K] weights (f32 and bf16; groups
  // of one row, several, none), and the ragged contraction (the weight gradient).
  const std::string rows =
      "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [%], "
      "lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]";
  auto rows_dims = [&](int rc) {
    std::string d = rows;
    d.replace(d.find('%'), 1, std::to_string(rc));
    return d;
  };
  cases.push_back({"ragged grouped rows f32 [G, K, N]",
                   "chlo.ragged_dot",
                   RaggedProgram("tensor<12x32xf32>", "tensor<3x32x16xf32>", "tensor<12x16xf32>",
                                 "tensor<3xi32>", rows_dims(1)),
                   {Random(f32, {12, 32}, rng), Random(f32, {3, 32, 16}, rng), Groups({4, 1, 5})},
                   1e-5});
  cases.push_back(
      {"ragged grouped rows f32 [G, N, K]",
       "chlo.ragged_dot",
       RaggedProgram("tensor<40x64xf32>", "tensor<4x24x64xf32>", "tensor<40x24xf32>",
                     "tensor<4xi32>", rows_dims(2)),
       {Random(f32, {40, 64}, rng), Random(f32, {4, 24, 64}, rng), Groups({2, 0, 30, 8})},
       1e-5});
  cases.push_back(
      {"ragged grouped rows bf16 [G, N, K]",
       "chlo.ragged_dot",
       RaggedProgram("tensor<20x64xbf16>", "tensor<3x32x64xbf16>", "tensor<20x32xf32>",
                     "tensor<3xi32>", rows_dims(2)),
       {Random(bf16, {20, 64}, rng), Random(bf16, {3, 32, 64}, rng), Groups({1, 16, 3})},
       1e-5});
  cases.push_back(
      {"ragged contraction f32",
       "chlo.ragged_dot",
       RaggedProgram("tensor<10x8xf32>", "tensor<10x6xf32>", "tensor<3x8x6xf32>", "tensor<3xi32>",
                     "lhs_contracting_dimensions = [0], rhs_contracting_dimensions = "
                     "[0], lhs_ragged_dimensions = [0]"),
       {Random(f32, {10, 8}, rng), Random(f32, {10, 6}, rng), Groups({3, 0, 7})},
       1e-5});

  // stablehlo.reduce over trailing dimensions (the row folds), with a NaN and signed zeros in
  // some rows (where order decides the bits), and over a leading one (the kernel hands it to the
  // reference).
  Literal rows_in = Random(f32, {37, 100}, rng, -100, 100);
  float* p = rows_in.span<float>().data();
  p[5 * 100 + 17] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t j = 0; j < 100; ++j) p[9 * 100 + j] = (j % 2) ? 0.0f : -0.0f;
  for (const char* body : {"stablehlo.add", "stablehlo.maximum", "stablehlo.minimum"})
    cases.push_back(
        {std::string("reduce trailing ") + body,
         "stablehlo.reduce",
         ReduceProgram("tensor<37x100xf32>", "tensor<37xf32>", body, "[1]"),
         {rows_in, Literal::Scalar<float>(std::string(body) == "stablehlo.add" ? 0.0f : -1e30f)},
         0});
  cases.push_back(
      {"reduce trailing multiply over two dimensions",
       "stablehlo.reduce",
       ReduceProgram("tensor<4x5x33xf32>", "tensor<4xf32>", "stablehlo.multiply", "[1, 2]"),
       {Random(f32, {4, 5, 33}, rng, 0.5, 1.5), Literal::Scalar<float>(1.0f)},
       0});
  cases.push_back({"reduce leading add",
                   "stablehlo.reduce",
                   ReduceProgram("tensor<37x100xf32>", "tensor<100xf32>", "stablehlo.add", "[0]"),
                   {rows_in, Literal::Scalar<float>(0.0f)},
                   0});
  return cases;
}

TEST(CpuKernelOracle, KernelsAgreeWithTheReferences) {
  int differing = 0;
  for (const Case& c : Cases()) differing += CheckCase(c);
  // The float kernels sum in another order than the references, so some of their bits differ:
  // were none to, TLALOC_CPU_KERNELS would not be choosing between two implementations.
  EXPECT_GT(differing, 0);
}

TEST(CpuKernelOracle, EveryKernelHasACase) {
  std::set<std::string> covered;
  for (const Case& c : Cases()) covered.insert(c.op);
  for (const std::string& name : cpu::KernelOpNames())
    EXPECT_TRUE(covered.count(name)) << name << " has a fast kernel but no oracle case";
}

TEST(CpuKernelOracle, KernelForFallsBackToTheReference) {
  const OpDef* add = OpRegistry::Global().Find("stablehlo.add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(cpu::FindKernel("stablehlo.add"), nullptr);
  EXPECT_EQ(&cpu::KernelFor(*add), &add->eval);
  const OpDef* dot = OpRegistry::Global().Find("stablehlo.dot_general");
  ASSERT_NE(dot, nullptr);
  EXPECT_NE(&cpu::KernelFor(*dot), &dot->eval);
  EXPECT_EQ(&cpu::KernelFor(*dot, /*reference_only=*/true), &dot->eval);
}

// The elementwise references run the installed bulk loops: after RegisterKernels, the vector
// kernels where the CPU has them, with the scalar loops' bits on random and special inputs.
TEST(CpuKernelOracle, InstalledBulkLoopsMatchTheScalarReference) {
  cpu::RegisterKernels();
  const ops::vmath::BulkKernels& bulk = ops::vmath::Bulk();
  EXPECT_EQ(bulk.exp, &cpu::vmath::ExpF32);
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> x(100000);
  for (float& v : x) {
    const uint32_t b = bits(rng);
    std::memcpy(&v, &b, sizeof v);
  }
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            88.7f,
                            -103.9f,
                            1e-40f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  std::copy(std::begin(specials), std::end(specials), x.begin());
  const int64_t n = static_cast<int64_t>(x.size());
  auto same_bits = [](const void* a, const void* b, size_t bytes) {
    return std::memcmp(a, b, bytes) == 0;
  };
  std::vector<float> got(n), want(n);
  for (auto [kernel, scalar, name] :
       {std::tuple{bulk.exp, &ops::vmath::ExpF32Scalar, "exp"},
        std::tuple{bulk.logistic, &ops::vmath::LogisticF32Scalar, "logistic"},
        std::tuple{bulk.rsqrt, &ops::vmath::RsqrtF32Scalar, "rsqrt"}}) {
    kernel(x.data(), got.data(), n);
    scalar(x.data(), want.data(), n);
    EXPECT_TRUE(same_bits(got.data(), want.data(), n * sizeof(float))) << name;
  }
  std::vector<uint16_t> h(n), h_want(n);
  bulk.f32_to_bf16(x.data(), h.data(), n);
  ops::vmath::F32ToBf16Scalar(x.data(), h_want.data(), n);
  EXPECT_TRUE(same_bits(h.data(), h_want.data(), n * sizeof(uint16_t))) << "f32 -> bf16";
  bulk.bf16_to_f32(h.data(), got.data(), n);
  ops::vmath::Bf16ToF32Scalar(h.data(), want.data(), n);
  EXPECT_TRUE(same_bits(got.data(), want.data(), n * sizeof(float))) << "bf16 -> f32";
}

}  // namespace
}  // namespace tlaloc
