// nn/ layers against straightforward loops in double, run on the interpreter.
#include "tlaloc/nn/layers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/sampling.h"

namespace tlaloc::nn {
namespace {

std::vector<float> RandomVector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Builds main(args...) -> body(args), runs it, returns the single result.
template <typename Body>
Literal RunProgram(const std::vector<Literal>& args, Body body) {
  Module module("t");
  std::vector<Type> types;
  for (const auto& a : args) types.push_back(Type(a.type()));
  FunctionBuilder fb(&module, "main", types);
  std::vector<Tensor> ins;
  for (size_t i = 0; i < args.size(); ++i) ins.push_back(fb.arg(static_cast<int>(i)));
  Tensor out = body(ins);
  Status s = fb.Return({out});
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return Literal();
  auto r = Interpret(module, "main", args);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? (*r)[0] : Literal();
}

TEST(Layers, RotaryIsNonInterleavedRotateHalf) {
  const int64_t B = 2, T = 3, H = 2, D = 8;
  const double theta = 10000.0;
  auto xv = RandomVector(B * T * H * D, 1);
  std::vector<int32_t> pos{0, 5, 9, 2, 3, 40};
  Literal x = Literal::FromVector<float>({B, T, H, D}, xv);
  Literal p = Literal::FromVector<int32_t>({B, T}, pos);
  Literal out = RunProgram({x, p}, [&](std::vector<Tensor>& in) {
    auto [c, s] = RotaryTables(in[1], D, theta);
    return ApplyRotary(in[0], c, s);
  });
  ASSERT_TRUE(out.valid());
  auto o = out.span<float>();
  for (int64_t bt = 0; bt < B * T; ++bt)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < D; ++i) {
        const float* v = &xv[(bt * H + h) * D];
        double angle = pos[bt] * std::pow(theta, -2.0 * (i % (D / 2)) / D);
        double rot = i < D / 2 ? -v[i + D / 2] : v[i - D / 2];
        double want = v[i] * std::cos(angle) + rot * std::sin(angle);
        EXPECT_NEAR(o[(bt * H + h) * D + i], want, 2e-5) << bt << " " << h << " " << i;
      }
}

TEST(Layers, GroupedAttentionMatchesLoops) {
  const int64_t B = 1, T = 3, Hq = 4, Hkv = 2, S = 5, D = 4;
  auto qv = RandomVector(B * T * Hq * D, 2), kv = RandomVector(B * Hkv * S * D, 3),
       vv = RandomVector(B * Hkv * S * D, 4);
  std::vector<bool> mask(B * T * S);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = 0; s < S; ++s) mask[t * S + s] = s <= t + 1 && s != 1;
  Literal out = RunProgram(
      {Literal::FromVector<float>({B, T, Hq, D}, qv),
       Literal::FromVector<float>({B, Hkv, S, D}, kv),
       Literal::FromVector<float>({B, Hkv, S, D}, vv), Literal::FromVector<bool>({B, T, S}, mask)},
      [&](std::vector<Tensor>& in) { return GroupedAttention(in[0], in[1], in[2], in[3], 0.5); });
  ASSERT_TRUE(out.valid());
  auto o = out.span<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t g = h / (Hq / Hkv);
      std::vector<double> w(S, 0.0);
      double mx = -1e300, sum = 0;
      for (int64_t s = 0; s < S; ++s) {
        if (!mask[t * S + s]) continue;
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += qv[(t * Hq + h) * D + d] * kv[(g * S + s) * D + d];
        w[s] = 0.5 * dot;
        mx = std::max(mx, w[s]);
      }
      for (int64_t s = 0; s < S; ++s)
        sum += mask[t * S + s] ? (w[s] = std::exp(w[s] - mx)) : (w[s] = 0);
      for (int64_t d = 0; d < D; ++d) {
        double want = 0;
        for (int64_t s = 0; s < S; ++s) want += w[s] / sum * vv[(g * S + s) * D + d];
        EXPECT_NEAR(o[(t * Hq + h) * D + d], want, 1e-5) << t << " " << h << " " << d;
      }
    }
}

TEST(Layers, RmsNormLinearAndMlp) {
  auto xv = RandomVector(2 * 6, 5), wn = RandomVector(6, 6), g = RandomVector(4 * 6, 7),
       u = RandomVector(4 * 6, 8), dn = RandomVector(6 * 4, 9);
  Literal out =
      RunProgram({Literal::FromVector<float>({2, 6}, xv), Literal::FromVector<float>({6}, wn),
                  Literal::FromVector<float>({4, 6}, g), Literal::FromVector<float>({4, 6}, u),
                  Literal::FromVector<float>({6, 4}, dn)},
                 [&](std::vector<Tensor>& in) {
                   return SwiGluMlp(RmsNormLayer(in[0], in[1], 1e-6), in[2], in[3], in[4]);
                 });
  ASSERT_TRUE(out.valid());
  for (int r = 0; r < 2; ++r) {
    double ss = 0;
    for (int i = 0; i < 6; ++i) ss += xv[r * 6 + i] * xv[r * 6 + i];
    std::vector<double> n(6), a(4);
    for (int i = 0; i < 6; ++i) n[i] = xv[r * 6 + i] / std::sqrt(ss / 6 + 1e-6) * wn[i];
    for (int j = 0; j < 4; ++j) {
      double gg = 0, uu = 0;
      for (int i = 0; i < 6; ++i) gg += g[j * 6 + i] * n[i], uu += u[j * 6 + i] * n[i];
      a[j] = gg / (1 + std::exp(-gg)) * uu;
    }
    for (int o = 0; o < 6; ++o) {
      double want = 0;
      for (int j = 0; j < 4; ++j) want += dn[o * 4 + j] * a[j];
      EXPECT_NEAR(out.span<float>()[r * 6 + o], want, 1e-4);
    }
  }
}

TEST(Sampling, PrefixSumAndTopKSupport) {
  std::vector<float> v{1, 2, 3, 4, 5, 6, 7};
  Literal cs = RunProgram({Literal::FromVector<float>({1, 7}, v)},
                          [](std::vector<Tensor>& in) { return PrefixSumLastAxis(in[0]); });
  ASSERT_TRUE(cs.valid());
  float acc = 0;
  for (int i = 0; i < 7; ++i) EXPECT_FLOAT_EQ(cs.span<float>()[i], acc += v[i]);
  // With top_k = 2 only the two largest logits are ever drawn.
  std::vector<float> logits{0.1f, 3.0f, -1.0f, 2.9f, 0.5f, 2.8f};
  for (uint32_t step = 0; step < 16; ++step) {
    Literal tok =
        RunProgram({Literal::FromVector<float>({1, 6}, logits),
                    Literal::FromVector<uint32_t>({2}, {0, 42}), Literal::Scalar<uint32_t>(step)},
                   [](std::vector<Tensor>& in) {
                     return SampleTokens(in[0], in[1], in[2], SamplingParams{1.0, 2, 1.0});
                   });
    ASSERT_TRUE(tok.valid());
    int32_t id = tok.span<int32_t>()[0];
    EXPECT_TRUE(id == 1 || id == 3) << "drew " << id;
  }
}

}  // namespace
}  // namespace tlaloc::nn
