// Token selection computed inside a program: greedy, or sampling with temperature, top-k and
// top-p from the threefry PRNG, so one seed gives the same tokens on every backend.
#pragma once

#include <cstdint>
#include <string_view>
#include <tuple>

#include "tlaloc/builder/tensor.h"

namespace tlaloc::nn {

inline constexpr std::string_view kSamplerLayer = "Sampler";

struct SamplingParams {
  // 0 (or less): greedy argmax; otherwise logits are divided by it before sampling.
  double temperature = 0.0;
  // Keep the k most likely tokens (0: all).
  int64_t top_k = 0;
  // Keep the smallest prefix of the sorted distribution whose mass reaches top_p (1: all).
  double top_p = 1.0;

  bool greedy() const { return temperature <= 0.0; }
  bool operator<(const SamplingParams& o) const {
    return std::tie(temperature, top_k, top_p) < std::tie(o.temperature, o.top_k, o.top_p);
  }
};

// Inclusive prefix sum along the last axis in log2(n) shifted adds (Hillis-Steele), so its cost
// is n log n rather than a window reduction's n^2.
Tensor PrefixSumLastAxis(const Tensor& x);

// logits f32 [B, V] -> token ids s32 [B]. `key` u32[2] (a threefry key) and `step` u32[] (folded
// into the key, so every decode step draws fresh numbers); unused when greedy.
Tensor SampleTokens(const Tensor& logits, const Tensor& key, const Tensor& step,
                    const SamplingParams& params);

}  // namespace tlaloc::nn
