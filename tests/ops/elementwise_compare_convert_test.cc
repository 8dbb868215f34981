// compare, select, clamp, convert, bitcast_convert, reduce_precision, iota and the chlo ops.
#include <bit>
#include <numbers>

#include "elementwise_test_util.h"

namespace tlaloc::ewtest {
namespace {

AttrDict CompareAttrs(const std::string& dir, const std::string& type = "") {
  AttrDict a{{"comparison_direction", Attribute::Enum(dir, "comparison_direction")}};
  if (!type.empty()) a["compare_type"] = Attribute::Enum(type, "comparison_type");
  return a;
}

std::vector<bool> Compare(const Literal& a, const Literal& b, const std::string& dir,
                          const std::string& type = "") {
  return Elems<bool>(Run1("stablehlo.compare", {a, b}, CompareAttrs(dir, type)));
}

TEST(ElementwiseCompare, FloatDirectionsWithNaN) {
  for (ElementType et :
       {ElementType::kF16, ElementType::kBF16, ElementType::kF32, ElementType::kF64}) {
    Literal a = Doubles(et, {1, 2, kNaN, -0.0, -kInf});
    Literal b = Doubles(et, {2, 2, kNaN, 0, 1});
    using V = std::vector<bool>;
    EXPECT_EQ(Compare(a, b, "EQ", "FLOAT"), (V{false, true, false, true, false}));
    EXPECT_EQ(Compare(a, b, "NE", "FLOAT"), (V{true, false, true, false, true}));
    EXPECT_EQ(Compare(a, b, "LT", "FLOAT"), (V{true, false, false, false, true}));
    EXPECT_EQ(Compare(a, b, "LE", "FLOAT"), (V{true, true, false, true, true}));
    EXPECT_EQ(Compare(a, b, "GT", "FLOAT"), (V{false, false, false, false, false}));
    EXPECT_EQ(Compare(a, b, "GE"), (V{false, true, false, true, false}));
  }
}

TEST(ElementwiseCompare, TotalOrder) {
  // -NaN < -Inf < -1 < -0 < +0 < denormal < 1 < +Inf < +NaN
  const double neg_nan = -std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> order = {neg_nan, -kInf, -1, -0.0, 0, 4.9e-324, 1, kInf, kNaN};
  Literal a = Doubles(ElementType::kF64, std::vector<double>(order.begin(), order.end() - 1));
  Literal b = Doubles(ElementType::kF64, std::vector<double>(order.begin() + 1, order.end()));
  EXPECT_EQ(Compare(a, b, "LT", "TOTALORDER"), std::vector<bool>(8, true));
  EXPECT_EQ(Compare(a, b, "GE", "TOTALORDER"), std::vector<bool>(8, false));
  EXPECT_EQ(Compare(a, a, "EQ", "TOTALORDER"), std::vector<bool>(8, true));  // NaN == NaN here
  Literal h = Doubles(ElementType::kF16, {-0.0, kNaN, -2});
  Literal k = Doubles(ElementType::kF16, {0, kInf, -1});
  EXPECT_EQ(Compare(h, k, "LT", "TOTALORDER"), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(Compare(Doubles(ElementType::kF32, {-0.0}), Doubles(ElementType::kF32, {0}), "EQ",
                    "TOTALORDER"),
            std::vector<bool>{false});
}

TEST(ElementwiseCompare, IntegersAndPred) {
  Literal a = Literal::FromVector<int32_t>({3}, {-1, 5, 7});
  Literal b = Literal::FromVector<int32_t>({3}, {1, 5, 6});
  EXPECT_EQ(Compare(a, b, "LT", "SIGNED"), (std::vector<bool>{true, false, false}));
  Literal u = Literal::FromVector<uint32_t>({2}, {0xFFFFFFFFu, 1});
  Literal v = Literal::FromVector<uint32_t>({2}, {1, 1});
  EXPECT_EQ(Compare(u, v, "GT", "UNSIGNED"), (std::vector<bool>{true, false}));
  Literal p = Literal::FromVector<bool>({2}, {true, false});
  Literal q = Literal::FromVector<bool>({2}, {false, false});
  EXPECT_EQ(Compare(p, q, "GT", "UNSIGNED"), (std::vector<bool>{true, false}));
  EXPECT_EQ(Compare(p, q, "NE"), (std::vector<bool>{true, false}));
}

TEST(ElementwiseCompare, RejectsBadAttributes) {
  Literal a = Literal::FromVector<int32_t>({1}, {1});
  auto r = RunOp("stablehlo.compare", {a, a}, CompareAttrs("LT", "FLOAT"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("FLOAT"), std::string::npos) << r.status().message();
  r = RunOp("stablehlo.compare", {a, a}, CompareAttrs("XX"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("comparison_direction"), std::string::npos);
  r = RunOp("stablehlo.compare", {a, a});
  EXPECT_FALSE(r.ok());
}

TEST(ElementwiseSelect, ScalarAndElementwisePredicates) {
  Literal t = Literal::FromVector<int64_t>({3}, {1, 2, 3});
  Literal f = Literal::FromVector<int64_t>({3}, {-1, -2, -3});
  Literal p = Literal::FromVector<bool>({3}, {true, false, true});
  EXPECT_EQ(Elems<int64_t>(Run1("stablehlo.select", {p, t, f})), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(Elems<int64_t>(Run1("stablehlo.select", {Literal::Scalar(false), t, f})),
            (std::vector<int64_t>{-1, -2, -3}));
  Literal ht = Doubles(ElementType::kBF16, {1.5, 2.5});
  Literal hf = Doubles(ElementType::kBF16, {-1, kNaN});
  ExpectDoubles(Run1("stablehlo.select", {Literal::FromVector<bool>({2}, {false, true}), ht, hf}),
                {-1, 2.5}, "bf16 select");
  auto r = RunOp("stablehlo.select", {Literal::FromVector<bool>({2}, {true, true}), t, f});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("predicate"), std::string::npos) << r.status().message();
  r = RunOp("stablehlo.select", {Literal::FromVector<int32_t>({3}, {1, 0, 1}), t, f});
  EXPECT_FALSE(r.ok());
}

TEST(ElementwiseClamp, ScalarAndTensorBounds) {
  Literal x = Doubles(ElementType::kF32, {-5, 0.5, 7, kNaN});
  ExpectDoubles(Run1("stablehlo.clamp", {Literal::Scalar(0.0f), x, Literal::Scalar(1.0f)}),
                {0, 0.5, 1, kNaN}, "scalar bounds");
  Literal lo = Doubles(ElementType::kF32, {-6, 1, 0, 0});
  Literal hi = Doubles(ElementType::kF32, {-5.5, 2, 10, 1});
  ExpectDoubles(Run1("stablehlo.clamp", {lo, x, hi}), {-5.5, 1, 7, kNaN}, "tensor bounds");
  Literal u = Literal::FromVector<uint8_t>({3}, {0, 100, 255});
  EXPECT_EQ(Elems<uint8_t>(Run1("stablehlo.clamp",
                                {Literal::Scalar<uint8_t>(10), u, Literal::Scalar<uint8_t>(200)})),
            (std::vector<uint8_t>{10, 100, 200}));
  auto r = RunOp("stablehlo.clamp", {Literal::FromVector<float>({2}, {0, 0}), x, hi});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("min"), std::string::npos) << r.status().message();
}

Literal Convert(const Literal& in, ElementType to) {
  return Run1("stablehlo.convert", {in}, {}, std::vector<Type>{Type(TensorType(to, in.dims()))});
}

TEST(ElementwiseConvert, FloatToIntegerTruncatesAndSaturates) {
  Literal f = Doubles(ElementType::kF32, {1.9, -1.9, 3e9, -3e9, kNaN, kInf, -0.5});
  EXPECT_EQ(Elems<int32_t>(Convert(f, ElementType::kS32)),
            (std::vector<int32_t>{1, -1, std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::min(), 0,
                                  std::numeric_limits<int32_t>::max(), 0}));
  EXPECT_EQ(Elems<uint8_t>(Convert(f, ElementType::kU8)),
            (std::vector<uint8_t>{1, 0, 255, 0, 0, 255, 0}));
  Literal big = Doubles(ElementType::kF64, {9.3e18, -9.3e18});
  EXPECT_EQ(Elems<int64_t>(Convert(big, ElementType::kS64)),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min()}));
}

TEST(ElementwiseConvert, IntegersWrapAndFloatsRound) {
  Literal i = Literal::FromVector<int32_t>({3}, {300, -1, 2049});
  EXPECT_EQ(Elems<uint8_t>(Convert(i, ElementType::kU8)), (std::vector<uint8_t>{44, 255, 1}));
  EXPECT_EQ(Elems<int8_t>(Convert(i, ElementType::kS8)), (std::vector<int8_t>{44, -1, 1}));
  // 2049 is halfway between the f16 values 2048 and 2050: ties to even gives 2048.
  ExpectDoubles(Convert(i, ElementType::kF16), {300, -1, 2048}, "s32 -> f16");
  // f32 -> bf16 rounds to nearest even; f64 -> f16 overflows to infinity.
  Literal f = Doubles(ElementType::kF32, {1.00390625, 1.01171875, 70000});
  ExpectDoubles(Convert(f, ElementType::kBF16), {1, 1.015625, 70144}, "f32 -> bf16");
  ExpectDoubles(Convert(Doubles(ElementType::kF64, {70000, 1e-9}), ElementType::kF16), {kInf, 0},
                "f64 -> f16");
  // f16 subnormals survive a round trip through f32.
  Literal sub = Literal::FromVector<f16>({1}, {f16::FromBits(0x0003)});
  Literal back = Convert(Convert(sub, ElementType::kF32), ElementType::kF16);
  EXPECT_EQ(back.span<f16>()[0].bits, 0x0003);
}

TEST(ElementwiseConvert, PredConversions) {
  Literal f = Doubles(ElementType::kF32, {0, -0.0, 2, kNaN});
  EXPECT_EQ(Elems<bool>(Convert(f, ElementType::kPred)),
            (std::vector<bool>{false, false, true, true}));
  Literal p = Literal::FromVector<bool>({2}, {true, false});
  ExpectDoubles(Convert(p, ElementType::kBF16), {1, 0}, "i1 -> bf16");
  EXPECT_EQ(Elems<int32_t>(Convert(p, ElementType::kS32)), (std::vector<int32_t>{1, 0}));
  auto r = RunOp("stablehlo.convert", {p}, {},
                 std::vector<Type>{Type(TensorType(ElementType::kF32, {3}))});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("shape"), std::string::npos) << r.status().message();
}

TEST(ElementwiseBitcast, SameAndDifferentWidths) {
  Literal f = Literal::FromVector<float>({2}, {1.0f, -0.0f});
  Literal i = Run1("stablehlo.bitcast_convert", {f}, {},
                   std::vector<Type>{Type(TensorType(ElementType::kS32, {2}))});
  EXPECT_EQ(Elems<int32_t>(i),
            (std::vector<int32_t>{0x3F800000, std::bit_cast<int32_t>(0x80000000u)}));
  // u32 -> 4 x u8 (little-endian bytes in the new last dimension) and back.
  Literal u = Literal::FromVector<uint32_t>({2}, {0x04030201u, 0xA0B0C0D0u});
  Literal bytes = Run1("stablehlo.bitcast_convert", {u}, {},
                       std::vector<Type>{Type(TensorType(ElementType::kU8, {2, 4}))});
  EXPECT_EQ(Elems<uint8_t>(bytes), (std::vector<uint8_t>{1, 2, 3, 4, 0xD0, 0xC0, 0xB0, 0xA0}));
  Literal again = Run1("stablehlo.bitcast_convert", {bytes}, {},
                       std::vector<Type>{Type(TensorType(ElementType::kU32, {2}))});
  EXPECT_TRUE(again.BitwiseEquals(u));
  auto r = RunOp("stablehlo.bitcast_convert", {u}, {},
                 std::vector<Type>{Type(TensorType(ElementType::kU8, {2, 2}))});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("2x4"), std::string::npos) << r.status().message();
}

AttrDict Format(int e, int m) {
  return {{"exponent_bits", Attribute::Int(e, ElementType::kS32)},
          {"mantissa_bits", Attribute::Int(m, ElementType::kS32)}};
}

TEST(ElementwiseReducePrecision, F32ToHalfFormatMatchesF16Rounding) {
  // For values in f16's normal range, reducing f32 to e5m10 must equal converting to f16.
  std::vector<float> xs;
  for (uint32_t bits = 0x38800000u; bits < 0x477FE000u; bits += 0x00012345u)
    xs.push_back(std::bit_cast<float>(bits));
  Literal out =
      Run1("stablehlo.reduce_precision",
           {Literal::FromVector<float>({static_cast<int64_t>(xs.size())}, xs)}, Format(5, 10));
  auto s = out.span<float>();
  for (size_t i = 0; i < xs.size(); ++i)
    ASSERT_EQ(s[i], HalfBitsToFloat(FloatToHalfBits(xs[i]))) << xs[i];
}

TEST(ElementwiseReducePrecision, OverflowUnderflowAndNaN) {
  Literal x = Doubles(ElementType::kF32, {70000, -70000, 1e-6, -1e-6, kNaN, 65504, kInf});
  ExpectDoubles(Run1("stablehlo.reduce_precision", {x}, Format(5, 10)),
                {kInf, -kInf, 0, -0.0, kNaN, 65504, kInf}, "e5m10");
  // Mantissa only: f64 -> e11m2 keeps the range, rounds 1.375 (1.011b) to 1.5 (tie to even).
  ExpectDoubles(Run1("stablehlo.reduce_precision", {Doubles(ElementType::kF64, {1.375, 1.125})},
                     Format(11, 2)),
                {1.5, 1.0}, "e11m2");
  // With no mantissa bit left NaN cannot be encoded: it becomes +inf.
  ExpectDoubles(Run1("stablehlo.reduce_precision", {Doubles(ElementType::kF32, {kNaN, 3, 3.5})},
                     Format(8, 0)),
                {kInf, 2, 4}, "e8m0");  // 3 ties to the even exponent (2)
  auto r = RunOp("stablehlo.reduce_precision", {Doubles(ElementType::kF32, {1})}, Format(0, 3));
  EXPECT_FALSE(r.ok());
}

TEST(ElementwiseIota, AlongEachDimension) {
  AttrDict d1{{"iota_dimension", Attribute::Int(1)}};
  Literal a = Run1("stablehlo.iota", {}, d1,
                   std::vector<Type>{Type(TensorType(ElementType::kS32, {2, 3}))});
  EXPECT_EQ(Elems<int32_t>(a), (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  AttrDict d0{{"iota_dimension", Attribute::Int(0)}};
  Literal b = Run1("stablehlo.iota", {}, d0,
                   std::vector<Type>{Type(TensorType(ElementType::kBF16, {3, 2}))});
  ExpectDoubles(b, {0, 0, 1, 1, 2, 2}, "bf16 iota");
  auto r = RunOp("stablehlo.iota", {}, {{"iota_dimension", Attribute::Int(2)}},
                 std::vector<Type>{Type(TensorType(ElementType::kS32, {2, 3}))});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("out of range"), std::string::npos);
}

TEST(Chlo, SpecialFunctionsAgainstKnownValues) {
  const double euler = 0.57721566490153286;
  const double pi = std::numbers::pi;
  auto run = [](const char* op, std::vector<double> x) {
    return AsDoubles(Run1(op, {Doubles(ElementType::kF64, x)}));
  };
  auto dg = run("chlo.digamma", {1, 0.5, 10, -0.5, 0, -3});
  EXPECT_NEAR(dg[0], -euler, 1e-14);
  EXPECT_NEAR(dg[1], -euler - 2 * std::log(2.0), 1e-14);
  EXPECT_NEAR(dg[2], 2.2517525890667211, 1e-14);
  EXPECT_NEAR(dg[3], 0.03648997397857652, 1e-13);  // psi(-1/2) = psi(1/2) + 2
  EXPECT_TRUE(std::isnan(dg[4]) && std::isnan(dg[5]));
  auto lg = run("chlo.lgamma", {0.5, 1, 2, 0, -1, 10});
  EXPECT_NEAR(lg[0], 0.5 * std::log(pi), 1e-15);
  EXPECT_NEAR(lg[1], 0, 1e-15);
  EXPECT_NEAR(lg[2], 0, 1e-15);
  EXPECT_EQ(lg[3], kInf);
  EXPECT_EQ(lg[4], kInf);
  EXPECT_NEAR(lg[5], std::log(362880.0), 1e-13);
  std::vector<double> ys = {-0.999999, -0.7, -1e-300, 0.1, 0.5, 0.9, 0.9999999999};
  auto ei = run("chlo.erf_inv", ys);
  for (size_t i = 0; i < ys.size(); ++i) EXPECT_NEAR(std::erf(ei[i]), ys[i], 4e-16) << ys[i];
  auto ee = run("chlo.erf_inv", {1, -1, 1.5, 0});
  EXPECT_EQ(ee[0], kInf);
  EXPECT_EQ(ee[1], -kInf);
  EXPECT_TRUE(std::isnan(ee[2]));
  EXPECT_EQ(ee[3], 0);
  auto bi = run("chlo.bessel_i1e", {1, -1, 0, 1000, 3000});
  EXPECT_NEAR(bi[0], 0.5651591039924851 * std::exp(-1.0), 1e-15);
  EXPECT_EQ(bi[1], -bi[0]);
  EXPECT_EQ(bi[2], 0);
  // Large x: i1e(x) ~ (1 - 3/(8x)) / sqrt(2 pi x).
  EXPECT_NEAR(bi[3], (1 - 3 / 8000.0 - 15 / 128e6) / std::sqrt(2 * pi * 1000), 1e-11);
  EXPECT_NEAR(bi[4], (1 - 3 / 24000.0) / std::sqrt(2 * pi * 3000), 1e-9);
  auto misc = run("chlo.atanh", {0.5, 1, 2});
  EXPECT_NEAR(misc[0], 0.5493061443340549, 1e-15);
  EXPECT_EQ(misc[1], kInf);
  EXPECT_TRUE(std::isnan(misc[2]));
  auto bf = Run1("chlo.erf", {Doubles(ElementType::kBF16, {0.5})});
  EXPECT_EQ(bf.span<bf16>()[0].bits, bf16(static_cast<float>(std::erf(0.5))).bits);
}

TEST(Chlo, ZetaPolygammaBesselI0e) {
  const double pi = std::numbers::pi;
  auto run2 = [](const char* op, std::vector<double> a, std::vector<double> b) {
    return AsDoubles(Run1(op, {Doubles(ElementType::kF64, a), Doubles(ElementType::kF64, b)}));
  };
  auto z = run2("chlo.zeta", {2, 4, 3, 1, 0.5, 2}, {1, 1, 2.5, 1, 1, -1});
  EXPECT_NEAR(z[0], pi * pi / 6, 1e-14);
  EXPECT_NEAR(z[1], std::pow(pi, 4) / 90, 1e-14);
  // zeta(3, 1/2) = 7 zeta(3), and zeta(3, 2.5) drops its first two terms.
  const double zeta3 = 1.2020569031595942;
  EXPECT_NEAR(z[2], 7 * zeta3 - 8 - 1 / 3.375, 1e-14);
  EXPECT_EQ(z[3], kInf);
  EXPECT_TRUE(std::isnan(z[4]));
  EXPECT_EQ(z[5], kInf);
  auto pg = run2("chlo.polygamma", {0, 1, 2, 1.5}, {1, 1, 1, 1});
  EXPECT_NEAR(pg[0], -0.57721566490153286, 1e-14);
  EXPECT_NEAR(pg[1], pi * pi / 6, 1e-14);
  EXPECT_NEAR(pg[2], -2.4041138063191885, 1e-13);
  EXPECT_TRUE(std::isnan(pg[3]));
  auto i0 = AsDoubles(Run1("chlo.bessel_i0e", {Doubles(ElementType::kF64, {0, 1, -1, 1000})}));
  EXPECT_EQ(i0[0], 1);
  EXPECT_NEAR(i0[1], 1.2660658777520082 * std::exp(-1.0), 1e-15);
  EXPECT_EQ(i0[2], i0[1]);
  EXPECT_NEAR(i0[3], (1 + 1 / 8000.0 + 9 / 128e6) / std::sqrt(2 * pi * 1000), 1e-11);
}

TEST(Chlo, NextAfterOnEveryFloatType) {
  Literal x = Literal::FromVector<float>({4}, {1.0f, 0.0f, -0.0f, 1.0f});
  Literal y = Literal::FromVector<float>({4}, {2.0f, -1.0f, 1.0f, 1.0f});
  auto out = Elems<float>(Run1("chlo.next_after", {x, y}));
  EXPECT_EQ(out[0], std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(out[1], -std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(out[2], std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(out[3], 1.0f);
  Literal hx = Literal::FromVector<f16>({3}, {f16(1.0f), f16(0.0f), f16::FromBits(0x7BFF)});
  Literal hy = Literal::FromVector<f16>({3}, {f16(0.0f), f16(-1.0f), f16::FromBits(0x7C00)});
  auto h = Elems<f16>(Run1("chlo.next_after", {hx, hy}));
  EXPECT_EQ(h[0].bits, 0x3BFF);
  EXPECT_EQ(h[1].bits, 0x8001);
  EXPECT_EQ(h[2].bits, 0x7C00);
  Literal is_inf = Run1("chlo.is_inf", {Doubles(ElementType::kF32, {kInf, -kInf, kNaN, 1})});
  EXPECT_EQ(Elems<bool>(is_inf), (std::vector<bool>{true, true, false, false}));
}

}  // namespace
}  // namespace tlaloc::ewtest
