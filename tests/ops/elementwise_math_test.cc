// Unary math, binary arithmetic and bitwise ops: values at the edges (NaN, +-Inf, -0,
// denormals, integer limits) across element types.
#include <bit>

#include "elementwise_test_util.h"

namespace tlaloc::ewtest {
namespace {

constexpr ElementType kFloatTypes[] = {ElementType::kF16, ElementType::kBF16, ElementType::kF32,
                                       ElementType::kF64};

TEST(ElementwiseMath, UnaryFloatEdgesInEveryFloatType) {
  struct Case {
    const char* op;
    std::vector<double> in, want;
  };
  const std::vector<Case> cases = {
      {"stablehlo.abs", {-2, -0.0, kNaN, -kInf}, {2, 0, kNaN, kInf}},
      {"stablehlo.negate", {1, 0, -kInf, kNaN}, {-1, -0.0, kInf, kNaN}},
      {"stablehlo.sign", {-3, -0.0, 0, 5, kNaN, kInf}, {-1, -0.0, 0, 1, kNaN, 1}},
      {"stablehlo.exponential", {0, -kInf, kInf, kNaN}, {1, 0, kInf, kNaN}},
      {"stablehlo.exponential_minus_one", {0, -0.0, -kInf}, {0, -0.0, -1}},
      {"stablehlo.log", {1, 0, -1, kInf}, {0, -kInf, kNaN, kInf}},
      {"stablehlo.log_plus_one", {0, -1, -2, -0.0}, {0, -kInf, kNaN, -0.0}},
      {"stablehlo.logistic", {0, kInf, -kInf}, {0.5, 1, 0}},
      {"stablehlo.sqrt", {4, -0.0, -1, kInf}, {2, -0.0, kNaN, kInf}},
      {"stablehlo.rsqrt", {4, 0, -0.0, kInf}, {0.5, kInf, -kInf, 0}},
      {"stablehlo.cbrt", {-8, -0.0, kInf}, {-2, -0.0, kInf}},
      {"stablehlo.sine", {0, -0.0, kInf}, {0, -0.0, kNaN}},
      {"stablehlo.cosine", {0, kInf}, {1, kNaN}},
      {"stablehlo.tan", {0, -0.0}, {0, -0.0}},
      {"stablehlo.tanh", {0, kInf, -kInf, -0.0}, {0, 1, -1, -0.0}},
      {"stablehlo.floor", {-0.5, 1.5, -0.0, kInf}, {-1, 1, -0.0, kInf}},
      {"stablehlo.ceil", {-0.5, 1.5, kNaN}, {-0.0, 2, kNaN}},
      {"stablehlo.round_nearest_afz", {2.5, -2.5, 0.5, 1.25}, {3, -3, 1, 1}},
      {"stablehlo.round_nearest_even", {2.5, -2.5, 0.5, 3.5, 1.25}, {2, -2, 0, 4, 1}},
  };
  for (ElementType et : kFloatTypes)
    for (const Case& c : cases) {
      Literal out = Run1(c.op, {Doubles(et, c.in)});
      ASSERT_EQ(out.element_type(), et) << c.op;
      ExpectDoubles(out, c.want, std::string(c.op) + " " + std::string(MlirName(et)));
    }
}

TEST(ElementwiseMath, F32TranscendentalsRoundOnceFromDouble) {
  std::vector<float> xs;
  for (uint32_t bits = 0x3A000000u; bits < 0x42000000u; bits += 0x0001F3A7u)
    xs.push_back(std::bit_cast<float>(bits));
  Literal in = Literal::FromVector<float>({static_cast<int64_t>(xs.size())}, xs);
  struct Case {
    const char* op;
    double (*f)(double);
  };
  const Case cases[] = {
      {"stablehlo.rsqrt", [](double x) { return 1 / std::sqrt(x); }},
      {"stablehlo.tanh", [](double x) { return std::tanh(x); }},
      {"stablehlo.sine", [](double x) { return std::sin(x); }},
      {"stablehlo.log", [](double x) { return std::log(x); }},
      {"stablehlo.exponential_minus_one", [](double x) { return std::expm1(x); }},
  };
  for (const Case& c : cases) {
    auto out = Elems<float>(Run1(c.op, {in}));
    for (size_t i = 0; i < xs.size(); ++i)
      ASSERT_EQ(out[i], static_cast<float>(c.f(xs[i]))) << c.op << "(" << xs[i] << ")";
  }
}

TEST(ElementwiseMath, HalfResultsRoundToNearestEven) {
  // sqrt(2) in f16 is 0x3DA8 (1.4140625); computing in float then rounding must land there.
  Literal out = Run1("stablehlo.sqrt", {Doubles(ElementType::kF16, {2})});
  EXPECT_EQ(out.span<f16>()[0].bits, 0x3DA8);
  // 1 + 2^-11 is halfway between f16 1.0 and the next value: ties to even gives 1.0.
  Literal sum = Run1("stablehlo.add", {Literal::Scalar(f16(1.0f)),
                                       Literal::Scalar(f16::FromBits(0x1000))});  // 2^-11
  EXPECT_EQ(sum.span<f16>()[0].bits, 0x3C00);
  // bf16: 1 + 2^-8 ties to even (1.0); 1 + 3*2^-8 rounds up to 1 + 2^-6.
  Literal bsum = Run1("stablehlo.add", {Doubles(ElementType::kBF16, {1, 1}),
                                        Doubles(ElementType::kBF16, {0.00390625, 0.01171875})});
  EXPECT_EQ(bsum.span<bf16>()[0].bits, 0x3F80);
  EXPECT_EQ(bsum.span<bf16>()[1].bits, 0x3F82);
}

TEST(ElementwiseMath, DenormalsAreKept) {
  const double tiny = std::numeric_limits<float>::denorm_min();
  Literal out = Run1("stablehlo.add",
                     {Doubles(ElementType::kF32, {tiny}), Doubles(ElementType::kF32, {tiny})});
  EXPECT_EQ(out.span<float>()[0], 2 * std::numeric_limits<float>::denorm_min());
  Literal neg = Run1("stablehlo.negate", {Literal::Scalar(f16::FromBits(0x0001))});
  EXPECT_EQ(neg.span<f16>()[0].bits, 0x8001);
}

TEST(ElementwiseMath, IntegerUnaryWraps) {
  const int32_t kMin = std::numeric_limits<int32_t>::min();
  Literal a = Literal::FromVector<int32_t>({4}, {kMin, -5, 0, 7});
  EXPECT_EQ(Elems<int32_t>(Run1("stablehlo.abs", {a})), (std::vector<int32_t>{kMin, 5, 0, 7}));
  EXPECT_EQ(Elems<int32_t>(Run1("stablehlo.negate", {a})), (std::vector<int32_t>{kMin, 5, 0, -7}));
  EXPECT_EQ(Elems<int32_t>(Run1("stablehlo.sign", {a})), (std::vector<int32_t>{-1, -1, 0, 1}));
  Literal u = Literal::FromVector<uint8_t>({3}, {0, 1, 255});
  EXPECT_EQ(Elems<uint8_t>(Run1("stablehlo.negate", {u})), (std::vector<uint8_t>{0, 255, 1}));
  Literal s8 = Literal::FromVector<int8_t>({2}, {-128, 3});
  EXPECT_EQ(Elems<int8_t>(Run1("stablehlo.abs", {s8})), (std::vector<int8_t>{-128, 3}));
}

TEST(ElementwiseMath, IntegerArithmeticWraps) {
  Literal a = Literal::FromVector<uint16_t>({2}, {65535, 300});
  Literal b = Literal::FromVector<uint16_t>({2}, {65535, 300});
  // 65535 * 65535 would overflow int after promotion; wrapped it is 1.
  EXPECT_EQ(Elems<uint16_t>(Run1("stablehlo.multiply", {a, b})),
            (std::vector<uint16_t>{1, static_cast<uint16_t>(90000 % 65536)}));
  EXPECT_EQ(Elems<uint16_t>(Run1("stablehlo.add", {a, b})), (std::vector<uint16_t>{65534, 600}));
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  Literal x = Literal::FromVector<int64_t>({2}, {kMax, kMin});
  Literal one = Literal::FromVector<int64_t>({2}, {1, 1});
  EXPECT_EQ(Elems<int64_t>(Run1("stablehlo.add", {x, one})),
            (std::vector<int64_t>{kMin, kMin + 1}));
  EXPECT_EQ(Elems<int64_t>(Run1("stablehlo.subtract", {x, one})),
            (std::vector<int64_t>{kMax - 1, kMax}));
}

TEST(ElementwiseMath, IntegerDivisionEdges) {
  const int8_t kMin = -128;
  Literal a = Literal::FromVector<int8_t>({5}, {7, -7, kMin, kMin, 5});
  Literal b = Literal::FromVector<int8_t>({5}, {2, 2, -1, 0, 0});
  EXPECT_EQ(Elems<int8_t>(Run1("stablehlo.divide", {a, b})),
            (std::vector<int8_t>{3, -3, kMin, -1, -1}));
  EXPECT_EQ(Elems<int8_t>(Run1("stablehlo.remainder", {a, b})),
            (std::vector<int8_t>{1, -1, 0, kMin, 5}));
  Literal ua = Literal::FromVector<uint32_t>({2}, {9, 9});
  Literal ub = Literal::FromVector<uint32_t>({2}, {4, 0});
  EXPECT_EQ(Elems<uint32_t>(Run1("stablehlo.divide", {ua, ub})),
            (std::vector<uint32_t>{2, 0xFFFFFFFFu}));
  EXPECT_EQ(Elems<uint32_t>(Run1("stablehlo.remainder", {ua, ub})), (std::vector<uint32_t>{1, 9}));
}

TEST(ElementwiseMath, FloatDivisionAndRemainder) {
  Literal a = Doubles(ElementType::kF32, {1, -1, 0, 5.5, -5.5, kInf});
  Literal b = Doubles(ElementType::kF32, {0, 0, 0, 2, 2, 2});
  ExpectDoubles(Run1("stablehlo.divide", {a, b}), {kInf, -kInf, kNaN, 2.75, -2.75, kInf}, "divide");
  // The remainder takes the dividend's sign.
  ExpectDoubles(Run1("stablehlo.remainder", {a, b}), {kNaN, kNaN, kNaN, 1.5, -1.5, kNaN},
                "remainder");
}

TEST(ElementwiseMath, Power) {
  Literal a = Literal::FromVector<int32_t>({6}, {2, 3, -2, 1, -1, 5});
  Literal b = Literal::FromVector<int32_t>({6}, {10, 0, 3, -4, -3, -1});
  EXPECT_EQ(Elems<int32_t>(Run1("stablehlo.power", {a, b})),
            (std::vector<int32_t>{1024, 1, -8, 1, -1, 0}));
  // 3^40 wraps modulo 2^32.
  uint32_t want = 1;
  for (int i = 0; i < 40; ++i) want *= 3u;
  Literal u =
      Run1("stablehlo.power", {Literal::Scalar<uint32_t>(3), Literal::Scalar<uint32_t>(40)});
  EXPECT_EQ(u.span<uint32_t>()[0], want);
  ExpectDoubles(Run1("stablehlo.power", {Doubles(ElementType::kF64, {2, -8, kNaN, 0}),
                                         Doubles(ElementType::kF64, {0.5, 1.0 / 3, 0, -1})}),
                {std::sqrt(2.0), kNaN, 1, kInf}, "power");
}

TEST(ElementwiseMath, MaximumMinimumPropagateNaNAndOrderZeros) {
  for (ElementType et : kFloatTypes) {
    Literal a = Doubles(et, {1, kNaN, 2, -0.0, 0, -kInf});
    Literal b = Doubles(et, {kNaN, 1, 3, 0, -0.0, 4});
    ExpectDoubles(Run1("stablehlo.maximum", {a, b}), {kNaN, kNaN, 3, 0, 0, 4}, "maximum");
    ExpectDoubles(Run1("stablehlo.minimum", {a, b}), {kNaN, kNaN, 2, -0.0, -0.0, -kInf}, "minimum");
  }
  Literal p = Literal::FromVector<bool>({4}, {false, false, true, true});
  Literal q = Literal::FromVector<bool>({4}, {false, true, false, true});
  EXPECT_EQ(Elems<bool>(Run1("stablehlo.maximum", {p, q})),
            (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(Elems<bool>(Run1("stablehlo.minimum", {p, q})),
            (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(Elems<bool>(Run1("stablehlo.add", {p, q})),
            (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(Elems<bool>(Run1("stablehlo.multiply", {p, q})),
            (std::vector<bool>{false, false, false, true}));
  Literal i = Literal::FromVector<int16_t>({2}, {-5, 7});
  Literal j = Literal::FromVector<int16_t>({2}, {3, -9});
  EXPECT_EQ(Elems<int16_t>(Run1("stablehlo.maximum", {i, j})), (std::vector<int16_t>{3, 7}));
  EXPECT_EQ(Elems<int16_t>(Run1("stablehlo.minimum", {i, j})), (std::vector<int16_t>{-5, -9}));
}

TEST(ElementwiseMath, Atan2Quadrants) {
  const double pi = std::acos(-1.0);
  ExpectDoubles(Run1("stablehlo.atan2", {Doubles(ElementType::kF64, {0, -0.0, 1, 0}),
                                         Doubles(ElementType::kF64, {-1, -1, 0, 0})}),
                {pi, -pi, pi / 2, 0}, "atan2");
}

TEST(ElementwiseMath, IsFiniteGivesPred) {
  Literal out = Run1("stablehlo.is_finite", {Doubles(ElementType::kBF16, {1, kNaN, kInf, -0.0})});
  ASSERT_EQ(out.element_type(), ElementType::kPred);
  EXPECT_EQ(Elems<bool>(out), (std::vector<bool>{true, false, false, true}));
}

TEST(ElementwiseBitwise, LogicalOnPredBitwiseOnIntegers) {
  Literal p = Literal::FromVector<bool>({4}, {false, false, true, true});
  Literal q = Literal::FromVector<bool>({4}, {false, true, false, true});
  EXPECT_EQ(Elems<bool>(Run1("stablehlo.and", {p, q})),
            (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(Elems<bool>(Run1("stablehlo.or", {p, q})),
            (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(Elems<bool>(Run1("stablehlo.xor", {p, q})),
            (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(Elems<bool>(Run1("stablehlo.not", {p})), (std::vector<bool>{true, true, false, false}));
  Literal a = Literal::FromVector<uint8_t>({2}, {0xF0, 0x0F});
  Literal b = Literal::FromVector<uint8_t>({2}, {0x3C, 0xFF});
  EXPECT_EQ(Elems<uint8_t>(Run1("stablehlo.and", {a, b})), (std::vector<uint8_t>{0x30, 0x0F}));
  EXPECT_EQ(Elems<uint8_t>(Run1("stablehlo.xor", {a, b})), (std::vector<uint8_t>{0xCC, 0xF0}));
  EXPECT_EQ(Elems<uint8_t>(Run1("stablehlo.not", {a})), (std::vector<uint8_t>{0x0F, 0xF0}));
  Literal s = Literal::FromVector<int32_t>({2}, {0, -1});
  EXPECT_EQ(Elems<int32_t>(Run1("stablehlo.not", {s})), (std::vector<int32_t>{-1, 0}));
}

TEST(ElementwiseBitwise, ShiftCountsOutOfRange) {
  Literal a = Literal::FromVector<int8_t>({6}, {1, -128, -128, 64, -1, 5});
  Literal n = Literal::FromVector<int8_t>({6}, {3, 1, 8, 7, -1, 0});
  EXPECT_EQ(Elems<int8_t>(Run1("stablehlo.shift_left", {a, n})),
            (std::vector<int8_t>{8, 0, 0, 0, 0, 5}));
  EXPECT_EQ(Elems<int8_t>(Run1("stablehlo.shift_right_logical", {a, n})),
            (std::vector<int8_t>{0, 64, 0, 0, 0, 5}));
  EXPECT_EQ(Elems<int8_t>(Run1("stablehlo.shift_right_arithmetic", {a, n})),
            (std::vector<int8_t>{0, -64, -1, 0, -1, 5}));
  // On unsigned types the arithmetic shift still fills with the top bit.
  Literal u = Literal::FromVector<uint64_t>({2}, {0x8000000000000000ull, 0x8000000000000000ull});
  Literal un = Literal::FromVector<uint64_t>({2}, {4, 64});
  EXPECT_EQ(Elems<uint64_t>(Run1("stablehlo.shift_right_arithmetic", {u, un})),
            (std::vector<uint64_t>{0xF800000000000000ull, ~0ull}));
  EXPECT_EQ(Elems<uint64_t>(Run1("stablehlo.shift_right_logical", {u, un})),
            (std::vector<uint64_t>{0x0800000000000000ull, 0}));
}

TEST(ElementwiseBitwise, PopcntAndCountLeadingZeros) {
  Literal a = Literal::FromVector<int16_t>({4}, {0, -1, 1, 0x0F00});
  EXPECT_EQ(Elems<int16_t>(Run1("stablehlo.popcnt", {a})), (std::vector<int16_t>{0, 16, 1, 4}));
  EXPECT_EQ(Elems<int16_t>(Run1("stablehlo.count_leading_zeros", {a})),
            (std::vector<int16_t>{16, 0, 15, 4}));
  Literal u = Literal::FromVector<uint64_t>({2}, {0, 1ull << 40});
  EXPECT_EQ(Elems<uint64_t>(Run1("stablehlo.count_leading_zeros", {u})),
            (std::vector<uint64_t>{64, 23}));
}

TEST(ElementwiseMath, LargeInputsRunInParallelChunks) {
  const int64_t n = 100003;  // several chunks plus a ragged tail
  std::vector<float> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = static_cast<float>(2 * i + 1);
  }
  Literal out = Run1("stablehlo.add",
                     {Literal::FromVector<float>({n}, a), Literal::FromVector<float>({n}, b)});
  auto s = out.span<float>();
  ASSERT_EQ(static_cast<int64_t>(s.size()), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(s[i], static_cast<float>(3 * i + 1)) << i;
}

TEST(ElementwiseMath, DeadOperandsAreUpdatedInPlace) {
  const int64_t n = 1 << 16;
  Module m("t");
  TensorType t(ElementType::kF32, {n});
  Function* fn = m.AddFunction("main", {Type(t)}, {Type(t)});
  OpBuilder b(&fn->entry(), &m);
  Value y = b.CreateOne("stablehlo.negate", {fn->entry().argument(0)});
  y = b.CreateOne("stablehlo.exponential", {y});
  y = b.CreateOne("stablehlo.sqrt", {y});
  b.Create("func.return", {y});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ExecutionStats stats;
  // The argument is donated (unique storage), so each op can write over its dying operand:
  // the result is the argument's own buffer.
  std::vector<Literal> args;
  args.push_back(Literal::FromVector<float>({n}, std::vector<float>(n, 1.0f)));
  const void* donated = args[0].data();
  auto r = Interpret(m, "main", std::move(args), &stats);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].data(), donated);
  // The interpreter places the dying operand in each result's slot before the eval, so no
  // second buffer is ever allocated: one buffer at the peak.
  EXPECT_EQ(stats.peak_live_bytes, n * 4);
  EXPECT_FLOAT_EQ((*r)[0].span<float>()[n - 1], std::exp(-0.5f));
}

TEST(ElementwiseMath, LogisticKeepsTinyResults) {
  ExpectDoubles(Run1("stablehlo.logistic", {Doubles(ElementType::kF64, {-800, -40})}),
                {0, std::exp(-40.0) / (1 + std::exp(-40.0))}, "logistic");
  double tiny = AsDoubles(Run1("stablehlo.logistic", {Doubles(ElementType::kF32, {-100})}))[0];
  EXPECT_GT(tiny, 0);  // 3.7e-44 is an f32 denormal, not 0
}

TEST(ElementwiseShapeRules, ClearErrors) {
  auto r = RunOp("stablehlo.add", {Literal::FromVector<float>({2}, {1, 2}),
                                   Literal::FromVector<float>({3}, {1, 2, 3})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("same type"), std::string::npos) << r.status().message();
  r = RunOp("stablehlo.sqrt", {Literal::FromVector<int32_t>({2}, {1, 2})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("float"), std::string::npos) << r.status().message();
  r = RunOp("stablehlo.abs", {Literal::FromVector<uint8_t>({1}, {1})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor<1xui8>"), std::string::npos) << r.status().message();
  r = RunOp("stablehlo.shift_left",
            {Literal::FromVector<float>({1}, {1}), Literal::FromVector<float>({1}, {1})});
  EXPECT_FALSE(r.ok());
  r = RunOp("stablehlo.subtract",
            {Literal::FromVector<bool>({1}, {true}), Literal::FromVector<bool>({1}, {true})});
  EXPECT_FALSE(r.ok());
  r = RunOp("stablehlo.negate", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expected 1 operand"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace tlaloc::ewtest
