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

// Sampling settings per row, as program inputs (changing them compiles nothing).
struct RowSamplingInputs {
  Tensor temperature;  // f32 [B]; <= 0: greedy
  Tensor top_k;        // s32 [B]; <= 0: no limit below the candidate cap
  Tensor top_p;        // f32 [B]; >= 1: no nucleus cut
  Tensor keys;         // u32 [B, 2]: each row's threefry key (from its request's seed)
  Tensor steps;        // u32 [B]: each row's draw counter, folded into its key
};

// The candidate cap of SampleRows when none is given: a sampled row draws among at most this
// many of its most likely ids (before top-k and top-p), so no step sorts the whole vocabulary.
inline constexpr int64_t kDefaultMaxCandidates = 4096;

// How SampleRows finds a row's max_candidates most likely ids: chlo.top_k (a partial selection,
// O(V log k)), or a stable sort of the whole row then a slice (O(V log V); what it did before,
// kept for bench/sampling_bench.cc). Both give the same ids in the same order.
enum class CandidateSelection { kTopK, kFullSort };

// logits f32 [B, V] -> s32 [B], each row by its own settings. A row's token depends only on its
// own logits and inputs, so a batch gives every row the token it gives alone. Greedy rows take
// the argmax; sampled rows draw (Gumbel-max) among the max_candidates most likely ids after
// temperature, top-k and top-p. Only the sampled rows go through the candidate selection: they
// are gathered into the smallest power-of-two bucket of rows that holds them (one branch per
// bucket, chosen at run time, so shapes stay static), drawn and taken back; when no row samples,
// the selection is skipped.
Tensor SampleRows(const Tensor& logits, const RowSamplingInputs& in,
                  int64_t max_candidates = kDefaultMaxCandidates,
                  CandidateSelection selection = CandidateSelection::kTopK);

}  // namespace tlaloc::nn
