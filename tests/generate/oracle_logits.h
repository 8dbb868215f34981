// Shared by the generation oracle tests (llama.cpp, transformers): Tlaloc's logits after every
// prompt position, by full recomputation and by KV-cached decoding, and the differences the tests
// bound.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "tlaloc/generate/generator.h"

namespace tlaloc::testing {

// Tlaloc's logits after every prompt position: all prefixes prefilled as one batch (full
// recomputation), and the KV-cached path (prefill one token, then one decode step per token).
struct TlalocLogits {
  std::vector<std::vector<float>> full, cached;
};

inline TlalocLogits RunTlaloc(generate::Generator& g, const std::vector<int32_t>& prompt) {
  TlalocLogits out;
  std::vector<std::vector<int32_t>> prefixes;
  for (size_t n = 1; n <= prompt.size(); ++n)
    prefixes.emplace_back(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(n));
  const int64_t max_len = g.CacheBucket(static_cast<int64_t>(prompt.size()) + 1);
  auto full = g.Prefill(prefixes, max_len, {}, 0);
  EXPECT_TRUE(full.ok()) << full.status().ToString();
  if (!full.ok()) return out;
  const int64_t vocab = g.config().vocab_size;
  auto all = full->logits.span<float>();
  for (size_t r = 0; r < prefixes.size(); ++r)
    out.full.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(r * vocab),
                          all.begin() + static_cast<std::ptrdiff_t>((r + 1) * vocab));

  auto first = g.Prefill({{prompt[0]}}, max_len, {}, 0);
  EXPECT_TRUE(first.ok()) << first.status().ToString();
  if (!first.ok()) return out;
  auto f = first->logits.span<float>();
  out.cached.emplace_back(f.begin(), f.end());
  for (size_t p = 1; p < prompt.size(); ++p) {
    auto step =
        g.DecodeStep({prompt[p]}, {static_cast<int32_t>(p)}, {}, 0, static_cast<uint32_t>(p));
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (!step.ok()) return out;
    auto s = step->logits.span<float>();
    out.cached.emplace_back(s.begin(), s.end());
  }
  return out;
}

inline double MaxAbsDiff(std::span<const float> a, std::span<const float> b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

inline double MaxAbs(std::span<const float> a) {
  double m = 0;
  for (float x : a) m = std::max(m, std::fabs(double(x)));
  return m;
}

}  // namespace tlaloc::testing
