// nn::SparseMoe on int8 experts (s8 stacks with f16 block scales): every form equals the same
// form on the dequantised f32 experts (the int8 programs compute x . (q * scale) in f32), and
// scales that are missing for some projections or misshapen are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "testing/int8_form.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/moe.h"
#include "tlaloc/support/half.h"

namespace tlaloc::nn {
namespace {

// An s8 stack [e, out, in] with f16 scales [e, out, in / 32], and its dequantised f32 value.
struct Int8Stack {
  Literal q, scale, dequantised;
};

Int8Stack RandomInt8Stack(int64_t e, int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> qd(-127, 127);
  std::uniform_real_distribution<float> sd(0.001f, 0.02f);
  Int8Stack s{Literal(TensorType(ElementType::kS8, {e, out, in})),
              Literal(TensorType(ElementType::kF16, {e, out, in / 32})),
              Literal(TensorType(ElementType::kF32, {e, out, in}))};
  auto q = s.q.span<int8_t>();
  auto sc = s.scale.span<uint16_t>();
  for (auto& v : q) v = static_cast<int8_t>(qd(rng));
  for (auto& v : sc) v = FloatToHalfBits(sd(rng));
  for (size_t i = 0; i < q.size(); ++i)
    s.dequantised.span<float>()[i] = q[i] * HalfBitsToFloat(sc[i / 32]);
  return s;
}

std::vector<Literal> RunMoe(const std::vector<Literal>& args, MoeForm form, bool int8) {
  Module module("t");
  std::vector<Type> types;
  for (const auto& a : args) types.push_back(Type(a.type()));
  FunctionBuilder fb(&module, "main", types);
  MoeWeights w{fb.arg(1), fb.arg(2), fb.arg(3), fb.arg(4)};
  if (int8) {
    w.gate_scale = fb.arg(5);
    w.up_scale = fb.arg(6);
    w.down_scale = fb.arg(7);
  }
  Status s = fb.Return({SparseMoe(fb.arg(0), w, 2, true, form)});
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return {};
  auto r = Interpret(module, "main", args);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<Literal>{};
}

TEST(MoeInt8, EveryFormEqualsTheDequantisedExperts) {
  // The dense form's products go through nn::Linear: its exact int8 form is what equals them.
  testing::ScopedInt8Form exact(Int8Form::kExact);
  const int64_t e = 4, h = 64, width = 32;
  const Int8Stack gate = RandomInt8Stack(e, width, h, 1), up = RandomInt8Stack(e, width, h, 2),
                  down = RandomInt8Stack(e, h, width, 3);
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t n : {1, 3, 24}) {
    std::vector<float> xv(static_cast<size_t>(n * h)), rv(static_cast<size_t>(e * h));
    for (float& v : xv) v = nd(rng);
    for (float& v : rv) v = nd(rng);
    const Literal x = Literal::FromVector<float>({n, h}, xv);
    const Literal router = Literal::FromVector<float>({e, h}, rv);
    for (MoeForm form : {MoeForm::kRaggedDot, MoeForm::kOneHotPermute, MoeForm::kPairGather,
                         MoeForm::kDenseMasked}) {
      auto int8 =
          RunMoe({x, router, gate.q, up.q, down.q, gate.scale, up.scale, down.scale}, form, true);
      auto f32 =
          RunMoe({x, router, gate.dequantised, up.dequantised, down.dequantised}, form, false);
      ASSERT_EQ(int8.size(), 1u);
      ASSERT_EQ(f32.size(), 1u);
      ASSERT_EQ(int8[0].type(), f32[0].type());
      double worst = 0, scale = 0;
      for (int64_t i = 0; i < n * h; ++i) {
        worst =
            std::max(worst, std::fabs(double(int8[0].span<float>()[i]) - f32[0].span<float>()[i]));
        scale = std::max(scale, std::fabs(double(f32[0].span<float>()[i])));
      }
      EXPECT_GT(scale, 0.0);
      EXPECT_LE(worst, 1e-6 * scale) << MoeFormName(form) << ", " << n << " tokens";
    }
  }
}

TEST(MoeInt8, PartialOrMisshapenScalesAreRefused) {
  auto check = [](std::vector<int64_t> up_scale_dims, bool down_scale) {
    Module module("t");
    std::vector<Type> types{Type(TensorType(ElementType::kF32, {2, 64})),
                            Type(TensorType(ElementType::kF32, {4, 64})),
                            Type(TensorType(ElementType::kS8, {4, 32, 64})),
                            Type(TensorType(ElementType::kS8, {4, 32, 64})),
                            Type(TensorType(ElementType::kS8, {4, 64, 32})),
                            Type(TensorType(ElementType::kF16, {4, 32, 2})),
                            Type(TensorType(ElementType::kF16, up_scale_dims)),
                            Type(TensorType(ElementType::kF16, {4, 64, 1}))};
    FunctionBuilder fb(&module, "main", types);
    MoeWeights w{fb.arg(1), fb.arg(2), fb.arg(3), fb.arg(4)};
    w.gate_scale = fb.arg(5);
    w.up_scale = fb.arg(6);
    if (down_scale) w.down_scale = fb.arg(7);
    EXPECT_FALSE(SparseMoe(fb.arg(0), w, 2, true).valid());
    ASSERT_FALSE(fb.status().ok());
    EXPECT_NE(fb.status().message().find("SparseMoe: int8 experts need"), std::string::npos)
        << fb.status().ToString();
  };
  check({4, 32, 2}, false);  // down's scales missing
  check({4, 32, 4}, true);   // up's scales for blocks of 16
}

}  // namespace
}  // namespace tlaloc::nn
