// A plain C++ Qwen3 forward in double, straight from the definitions (transformers'
// modeling_qwen3.py), used as the oracle for the programs. Also a random tiny-model factory.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/qwen3.h"
#include "tlaloc/support/half.h"

namespace tlaloc::testing {

using Mat = std::vector<double>;  // row-major

struct RefModel {
  io::ModelConfig config;
  std::map<std::string, std::vector<double>> w;  // values as rounded to f32
  std::vector<Literal> literals;                 // f32, in models::WeightSpecs order
};

// The argument list of a step program, bound by port: the weights, one sampling setting for
// every row (key from `seed`, draw counter `step`), the `inputs` given, and zeroed caches (or
// `caches`, moved in, when given).
inline std::vector<Literal> StepArgs(const models::ModelProgram& program,
                                     const std::vector<Literal>& weights,
                                     std::map<models::Port, Literal> inputs,
                                     const nn::SamplingParams& sampling = {}, uint64_t seed = 0,
                                     uint32_t step = 0, std::vector<Literal> caches = {}) {
  const models::ProgramSignature& sig = program.signature;
  const int64_t b = sig.inputs[sig.Input(models::Port::kTemperature)].type.dims[0];
  using models::Port;
  inputs.emplace(Port::kTemperature,
                 Literal::FromVector<float>({b}, std::vector<float>(b, sampling.temperature)));
  inputs.emplace(Port::kTopK,
                 Literal::FromVector<int32_t>(
                     {b}, std::vector<int32_t>(b, static_cast<int32_t>(sampling.top_k))));
  inputs.emplace(Port::kTopP,
                 Literal::FromVector<float>({b}, std::vector<float>(b, sampling.top_p)));
  inputs.emplace(Port::kMinP,
                 Literal::FromVector<float>({b}, std::vector<float>(b, sampling.min_p)));
  std::vector<uint32_t> keys;
  for (int64_t r = 0; r < b; ++r) {
    keys.push_back(static_cast<uint32_t>(seed >> 32));
    keys.push_back(static_cast<uint32_t>(seed));
  }
  inputs.emplace(Port::kKeys, Literal::FromVector<uint32_t>({b, 2}, keys));
  inputs.emplace(Port::kSteps, Literal::FromVector<uint32_t>({b}, std::vector<uint32_t>(b, step)));
  std::vector<Literal> args;
  size_t next_weight = 0, next_cache = 0;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const models::PortSpec& p = sig.inputs[i];
    if (p.port == Port::kWeight) {
      args.push_back(weights.at(next_weight++));
    } else if (sig.IsCacheInput(static_cast<int>(i))) {
      args.push_back(caches.empty() ? Literal(p.type) : std::move(caches.at(next_cache++)));
    } else {
      args.push_back(std::move(inputs.at(p.port)));
    }
  }
  return args;
}

inline io::ModelConfig TinyConfig(bool tied, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  io::ModelConfig c = io::DefaultModelConfig(models::qwen3::kQwen3);
  c.vocab_size = 96;
  c.hidden_size = 32;
  c.intermediate_size = 40;
  c.num_hidden_layers = 2;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = head_dim;
  c.max_position_embeddings = 256;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = tied;
  c.eos_token_ids = {1};
  models::qwen3::MutableSlidingWindow(c).max_window_layers = c.num_hidden_layers;
  c.layer_types.assign(c.num_hidden_layers, "full_attention");
  return c;
}

inline RefModel RandomModel(const io::ModelConfig& c, uint32_t seed) {
  RefModel m;
  m.config = c;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto& spec : models::WeightSpecs(c)) {
    int64_t n = NumElements(spec.shape);
    bool is_norm = spec.name.find("norm") != std::string::npos;
    // Large enough that attention is far from uniform and mistakes show in the logits.
    float scale = is_norm ? 0.2f : 0.3f;
    std::vector<float> v(n);
    for (auto& x : v) x = (is_norm ? 1.0f : 0.0f) + scale * normal(rng);
    m.w[spec.name] = std::vector<double>(v.begin(), v.end());
    // Stacked experts: each expert's checkpoint tensor too, which the reference reads.
    const int64_t part = spec.stacked.empty() ? 0 : n / static_cast<int64_t>(spec.stacked.size());
    for (size_t e = 0; e < spec.stacked.size(); ++e)
      m.w[spec.stacked[e]] = std::vector<double>(v.begin() + e * part, v.begin() + (e + 1) * part);
    m.literals.push_back(Literal::FromVector<float>(spec.shape, v));
  }
  return m;
}

// y[o] = sum_i W[o, i] x[i]; W [out, in].
inline std::vector<double> RefLinear(const std::vector<double>& W, const std::vector<double>& x,
                                     int64_t out) {
  int64_t in = static_cast<int64_t>(x.size());
  std::vector<double> y(out, 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) y[o] += W[o * in + i] * x[i];
  return y;
}

inline std::vector<double> RefRmsNorm(const std::vector<double>& x, const double* w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  double r = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
  return y;
}

inline void RefRotary(double* x, int64_t d, int64_t pos, double theta) {
  int64_t half = d / 2;
  std::vector<double> out(d);
  for (int64_t i = 0; i < d; ++i) {
    int64_t f = i % half;
    double angle = pos * std::pow(theta, -2.0 * f / d);
    double rot = i < half ? -x[i + half] : x[i - half];
    out[i] = x[i] * std::cos(angle) + rot * std::sin(angle);
  }
  std::copy(out.begin(), out.end(), x);
}

inline std::vector<double> RefSwiGlu(const std::map<std::string, std::vector<double>>& w,
                                     const std::string& p, const std::vector<double>& x,
                                     int64_t width, int64_t hidden) {
  auto g = RefLinear(w.at(p + "gate_proj.weight"), x, width);
  auto u = RefLinear(w.at(p + "up_proj.weight"), x, width);
  for (int64_t i = 0; i < width; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return RefLinear(w.at(p + "down_proj.weight"), g, hidden);
}

// Logits [T][V] for every position of one sequence (full causal recomputation).
// `bf16_attention`: attention as an f32 model with a bf16 KV cache computes it: queries, keys,
// values and the softmax's probabilities rounded to bf16 before their products.
inline std::vector<std::vector<double>> RefForward(const RefModel& m,
                                                   const std::vector<int32_t>& tokens,
                                                   bool bf16_attention = false) {
  auto round = [&](double x) {
    return bf16_attention ? static_cast<double>(bf16(static_cast<float>(x)).f()) : x;
  };
  const auto& c = m.config;
  const auto& w = m.w;
  const int64_t T = tokens.size(), H = c.hidden_size, D = c.head_dim;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, G = Hq / Hkv;
  std::vector<std::vector<double>> x(T, std::vector<double>(H));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i) x[t][i] = w.at("model.embed_tokens.weight")[tokens[t] * H + i];
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (int64_t t = 0; t < T; ++t) {
      auto h = RefRmsNorm(x[t], w.at(p + "input_layernorm.weight").data(), c.rms_norm_eps);
      q[t] = RefLinear(w.at(p + "self_attn.q_proj.weight"), h, Hq * D);
      k[t] = RefLinear(w.at(p + "self_attn.k_proj.weight"), h, Hkv * D);
      v[t] = RefLinear(w.at(p + "self_attn.v_proj.weight"), h, Hkv * D);
      for (int64_t hh = 0; hh < Hq; ++hh) {
        std::vector<double> seg(q[t].begin() + hh * D, q[t].begin() + (hh + 1) * D);
        seg = RefRmsNorm(seg, w.at(p + "self_attn.q_norm.weight").data(), c.rms_norm_eps);
        RefRotary(seg.data(), D, t, c.rope_theta);
        std::copy(seg.begin(), seg.end(), q[t].begin() + hh * D);
      }
      for (int64_t hh = 0; hh < Hkv; ++hh) {
        std::vector<double> seg(k[t].begin() + hh * D, k[t].begin() + (hh + 1) * D);
        seg = RefRmsNorm(seg, w.at(p + "self_attn.k_norm.weight").data(), c.rms_norm_eps);
        RefRotary(seg.data(), D, t, c.rope_theta);
        std::copy(seg.begin(), seg.end(), k[t].begin() + hh * D);
      }
      for (auto* row : {&q[t], &k[t], &v[t]})
        for (double& e : *row) e = round(e);
    }
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> attn(Hq * D, 0.0);
      for (int64_t hh = 0; hh < Hq; ++hh) {
        int64_t kvh = hh / G;
        std::vector<double> s(t + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64_t dd = 0; dd < D; ++dd) dot += q[t][hh * D + dd] * k[j][kvh * D + dd];
          s[j] = dot / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t dd = 0; dd < D; ++dd)
            attn[hh * D + dd] += round(s[j] / sum) * v[j][kvh * D + dd];
      }
      auto o = RefLinear(w.at(p + "self_attn.o_proj.weight"), attn, H);
      for (int64_t i = 0; i < H; ++i) x[t][i] += o[i];
      auto n = RefRmsNorm(x[t], w.at(p + "post_attention_layernorm.weight").data(), c.rms_norm_eps);
      std::vector<double> mlp(H, 0.0);
      if (c.IsMoeLayer(l)) {
        const models::qwen3::MoeConfig& moe = models::qwen3::Moe(c);
        auto logits = RefLinear(w.at(p + "mlp.gate.weight"), n, moe.num_experts);
        double mx = *std::max_element(logits.begin(), logits.end()), sum = 0;
        for (auto& e : logits) sum += (e = std::exp(e - mx));
        for (auto& e : logits) e /= sum;
        std::vector<int64_t> order(moe.num_experts);
        for (int64_t e = 0; e < moe.num_experts; ++e) order[e] = e;
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
        double topsum = 0;
        for (int64_t j = 0; j < moe.num_experts_per_tok; ++j) topsum += logits[order[j]];
        for (int64_t j = 0; j < moe.num_experts_per_tok; ++j) {
          int64_t e = order[j];
          double weight = logits[e] / (moe.norm_topk_prob ? topsum : 1.0);
          auto y = RefSwiGlu(w, p + "mlp.experts." + std::to_string(e) + ".", n,
                             moe.moe_intermediate_size, H);
          for (int64_t i = 0; i < H; ++i) mlp[i] += weight * y[i];
        }
      } else {
        mlp = RefSwiGlu(w, p + "mlp.", n, c.intermediate_size, H);
      }
      for (int64_t i = 0; i < H; ++i) x[t][i] += mlp[i];
    }
  }
  const auto& head =
      c.tie_word_embeddings ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight");
  std::vector<std::vector<double>> logits(T);
  for (int64_t t = 0; t < T; ++t) {
    auto n = RefRmsNorm(x[t], w.at("model.norm.weight").data(), c.rms_norm_eps);
    logits[t] = RefLinear(head, n, c.vocab_size);
  }
  return logits;
}

}  // namespace tlaloc::testing
