// Token selection computed inside a program: greedy, or sampling with temperature, top-k and
// top-p from the threefry PRNG, so one seed gives the same tokens on every backend.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <tuple>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/nn/token_constraint.h"

namespace tlaloc::nn {

inline constexpr std::string_view kSamplerLayer = "Sampler";

struct SamplingParams {
  // 0 (or less): greedy argmax; otherwise logits are divided by it before sampling.
  double temperature = 0.0;
  // Keep the k most likely tokens (0: all).
  int64_t top_k = 0;
  // Keep the smallest prefix of the sorted distribution whose mass reaches top_p (1: all).
  double top_p = 1.0;
  // The controls below are applied by SampleRows' callers (the step programs), in vLLM's order:
  // logit_bias, repetition_penalty, frequency and presence penalties, temperature, min_p, top_k,
  // top_p. Keep tokens whose probability (after temperature) is >= min_p times the largest
  // (transformers' MinPLogitsWarper; 0: all).
  double min_p = 0.0;
  // Over the prompt's and the generated ids: a positive logit is divided by it, a negative one
  // multiplied (transformers' RepetitionPenaltyLogitsProcessor; 1: none).
  double repetition_penalty = 1.0;
  // Over the generated ids only (OpenAI, as vLLM applies them): logit -= presence * (count > 0)
  // + frequency * count.
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  // Added to the logits of these ids before everything else.
  std::map<int32_t, float> logit_bias = {};
  // Structured output: the ids it refuses get kRefusedTokenBias in this row's logit_bias input
  // (the engine asks it before each draw and catches it up with the row's tokens). Shared by the
  // copies of these settings: one object per request.
  std::shared_ptr<TokenConstraint> constraint = nullptr;

  bool greedy() const { return temperature <= 0.0; }
  // Whether the step needs the penalty inputs (dense [rows, vocab] tensors) for this row.
  bool penalized() const {
    return repetition_penalty != 1.0 || presence_penalty != 0.0 || frequency_penalty != 0.0 ||
           !logit_bias.empty() || constraint != nullptr;
  }
  bool operator<(const SamplingParams& o) const {
    return std::tie(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                    frequency_penalty, logit_bias, constraint) <
           std::tie(o.temperature, o.top_k, o.top_p, o.min_p, o.repetition_penalty,
                    o.presence_penalty, o.frequency_penalty, o.logit_bias, o.constraint);
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
  Tensor min_p;        // f32 [B], optional (absent: 0); <= 0: no cut
};

// The penalties of each row as dense [B, V] f32 inputs, filled by the host from the row's
// settings and token history (see PenalizeLogits).
struct RowPenaltyInputs {
  Tensor bias;    // logit_bias, 0 elsewhere
  Tensor scale;   // repetition_penalty at ids in the prompt or generated, 1 elsewhere
  Tensor offset;  // presence * (count > 0) + frequency * count of the generated ids
};

// logits f32 [B, V] -> the logits after logit_bias, the repetition penalty and the
// frequency/presence penalties, in that order (vLLM's): x = logits + bias; x = x > 0 ? x / scale
// : x * scale; x - offset.
Tensor PenalizeLogits(const Tensor& logits, const RowPenaltyInputs& in);

// Fills one row of the RowPenaltyInputs (each span `vocab` long; bias zeroed, scale ones, offset
// zeroed first) from a row's settings, its prompt ids and the ids generated so far.
void FillPenaltyRow(const SamplingParams& params, std::span<const int32_t> prompt,
                    std::span<const int32_t> generated, std::span<float> bias,
                    std::span<float> scale, std::span<float> offset);

// scaled f32 [B, V] (logits after temperature), min_p f32 [B] -> the logits with those below
// max + log(min_p) (probability below min_p times the largest) at -1e30.
Tensor ApplyMinP(const Tensor& scaled, const Tensor& min_p);

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
// temperature, min-p, top-k and top-p (min_p before top-k/top-p, as vLLM applies it; min-p and
// top-k both keep a prefix of the sorted ids, so only top-p's place matters). Only the sampled rows
// go through the candidate selection: they are gathered into the smallest power-of-two bucket of
// rows that holds them (one branch per bucket, chosen at run time, so shapes stay static), drawn
// and taken back; when no row samples, the selection is skipped.
Tensor SampleRows(const Tensor& logits, const RowSamplingInputs& in,
                  int64_t max_candidates = kDefaultMaxCandidates,
                  CandidateSelection selection = CandidateSelection::kTopK);

}  // namespace tlaloc::nn
