// In-program sampling: temperature, top-k (a sort; per-row sampling takes its candidates with
// chlo.top_k, a partial selection), top-p (a prefix sum over the sorted probabilities), then a
// Gumbel-max draw (jax.random.categorical) over the kept candidates. SampleRows runs the
// selection on the sampled rows only (gathered), since it costs far more than a greedy argmax.
#include "tlaloc/nn/sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <tuple>

#include "tlaloc/builder/random.h"

namespace tlaloc::nn {

Tensor PrefixSumLastAxis(const Tensor& x) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  int64_t n = x.dim(-1), r = x.rank();
  Tensor acc = x;
  Tensor zero = Scalar(*b, 0.0, x.element_type());
  for (int64_t shift = 1; shift < n; shift *= 2) {
    // acc[i] += acc[i - shift] (zero before the start).
    std::vector<int64_t> low(r, 0), high(r, 0);
    low[r - 1] = shift;
    Tensor shifted = Pad(SliceAxis(acc, -1, 0, n - shift), zero, low, high);
    acc = acc + shifted;
  }
  return acc;
}

Tensor SampleTokens(const Tensor& logits, const Tensor& key, const Tensor& step,
                    const SamplingParams& params) {
  OpBuilder* b = logits.builder();
  if (!b || !logits.valid()) return Tensor();
  if (params.greedy()) return Argmax(logits, -1);
  int64_t vocab = logits.dim(-1);
  int64_t k = params.top_k > 0 && params.top_k < vocab ? params.top_k : vocab;
  Tensor scaled = logits * (1.0 / params.temperature);
  auto [vals, idx] = TopK(scaled, k);  // sorted descending, [B, k]
  if (params.top_p < 1.0) {
    Tensor probs = Softmax(vals, -1);
    // Keep a candidate while the mass before it is below top_p (the first is always kept).
    Tensor before = PrefixSumLastAxis(probs) - probs;
    Tensor keep = Lt(before, FullLike(before, params.top_p));
    vals = Where(keep, vals, FullLike(vals, -1e30));
  }
  Tensor draw_key = FoldIn(key, step);
  Tensor choice = Categorical(draw_key, vals, -1);  // [B] index into the candidates
  Tensor hit = Convert(OneHot(choice, k, ElementType::kS32), ElementType::kS32);
  return Sum(hit * idx, {-1});
}

namespace {

// The k largest of each row, descending, ties to the lower index.
std::pair<Tensor, Tensor> Candidates(const Tensor& x, int64_t k, CandidateSelection selection) {
  if (selection == CandidateSelection::kFullSort) return TopK(x, k);
  OpBuilder* b = x.builder();
  std::vector<Value> r =
      b->Create("chlo.top_k", {x.value()}, {{"k", Attribute::Int(k, ElementType::kS64)}});
  if (r.size() != 2) return {};
  return {Tensor(r[0], b), Tensor(r[1], b)};
}

// Draws one token per row of `logits` [S, V] among its k most likely ids, with the rows' own
// settings (inputs gathered to the same S rows). Greedy rows divide by 1; their draw is unused.
Tensor DrawRows(const Tensor& logits, const RowSamplingInputs& in, int64_t k,
                CandidateSelection selection) {
  OpBuilder* b = logits.builder();
  const int64_t rows = logits.dim(0);
  Tensor sampled_rows = Gt(in.temperature, FullLike(in.temperature, 0.0));
  Tensor t = Where(sampled_rows, in.temperature, FullLike(in.temperature, 1.0));
  Tensor scaled = logits / ExpandDims(t, 1);
  auto [vals, idx] = Candidates(scaled, k, selection);  // [S, k], descending
  Tensor rank = Iota(*b, {rows, k}, 1, ElementType::kS32);
  Tensor top_k = ExpandDims(in.top_k, 1);
  Tensor within_k = Le(top_k, FullLike(top_k, 0)) | Lt(rank, top_k);
  vals = Where(within_k, vals, FullLike(vals, -1e30));
  if (in.min_p.valid()) vals = ApplyMinP(vals, in.min_p);
  // Keep a candidate while the mass before it is below top_p (the first is always kept).
  Tensor probs = Softmax(vals, -1);
  Tensor before = PrefixSumLastAxis(probs) - probs;
  Tensor top_p = ExpandDims(in.top_p, 1);
  Tensor keep = Ge(top_p, FullLike(top_p, 1.0)) | Lt(before, top_p);
  vals = Where(keep, vals, FullLike(vals, -1e30));
  Tensor noise = RowGumbel(RowFoldIn(in.keys, in.steps), k);
  Tensor choice = Argmax(noise + vals, -1);  // [S] index into the candidates
  Tensor hit = Convert(OneHot(choice, k, ElementType::kS32), ElementType::kS32);
  return Sum(hit * idx, {-1});
}

RowSamplingInputs TakeRows(const RowSamplingInputs& in, const Tensor& rows) {
  RowSamplingInputs out;
  out.temperature = Take(in.temperature, rows);
  out.top_k = Take(in.top_k, rows);
  out.top_p = Take(in.top_p, rows);
  out.keys = Take(in.keys, rows);
  out.steps = Take(in.steps, rows);
  if (in.min_p.valid()) out.min_p = Take(in.min_p, rows);
  return out;
}

}  // namespace

Tensor ApplyMinP(const Tensor& scaled, const Tensor& min_p) {
  if (!scaled.valid()) return Tensor();
  // p_i >= min_p * p_max  <=>  x_i >= x_max + log(min_p): the softmax's normaliser cancels, so
  // the cut needs no softmax (and, on candidates, no pass over the whole vocabulary). min_p 0
  // gives log 0 = -inf: everything is kept.
  Tensor floor = ReduceMax(scaled, {1}, true) + ExpandDims(Log(min_p), 1);
  return Where(Ge(scaled, floor), scaled, FullLike(scaled, -1e30));
}

void FillPenaltyRow(const SamplingParams& p, std::span<const int32_t> prompt,
                    std::span<const int32_t> generated, std::span<float> bias,
                    std::span<float> scale, std::span<float> offset) {
  std::fill(bias.begin(), bias.end(), 0.f);
  std::fill(scale.begin(), scale.end(), 1.f);
  std::fill(offset.begin(), offset.end(), 0.f);
  const int64_t v = static_cast<int64_t>(bias.size());
  auto in_vocab = [v](int32_t id) { return id >= 0 && id < v; };
  for (const auto& [id, x] : p.logit_bias)
    if (in_vocab(id)) bias[id] += x;
  if (p.repetition_penalty != 1.0) {
    const float r = static_cast<float>(p.repetition_penalty);
    for (int32_t id : prompt)
      if (in_vocab(id)) scale[id] = r;
    for (int32_t id : generated)
      if (in_vocab(id)) scale[id] = r;
  }
  if (p.presence_penalty != 0.0 || p.frequency_penalty != 0.0) {
    std::map<int32_t, int64_t> counts;
    for (int32_t id : generated)
      if (in_vocab(id)) ++counts[id];
    for (const auto& [id, count] : counts)
      offset[id] =
          static_cast<float>(p.presence_penalty + p.frequency_penalty * static_cast<double>(count));
  }
}

Tensor PenalizeLogits(const Tensor& logits, const RowPenaltyInputs& in) {
  if (!logits.valid()) return Tensor();
  Tensor x = logits + in.bias;
  Tensor positive = Gt(x, FullLike(x, 0.0));
  x = Where(positive, x / in.scale, x * in.scale);
  return x - in.offset;
}

Tensor SampleRows(const Tensor& logits, const RowSamplingInputs& in, int64_t max_candidates,
                  CandidateSelection selection) {
  OpBuilder* b = logits.builder();
  if (!b || !logits.valid()) return Tensor();
  const int64_t rows = logits.dim(0), vocab = logits.dim(-1);
  const int64_t k = max_candidates > 0 && max_candidates < vocab ? max_candidates : vocab;
  Tensor greedy = Argmax(logits, -1);
  Tensor sampled_rows = Gt(in.temperature, FullLike(in.temperature, 0.0));
  Tensor flags = Convert(sampled_rows, ElementType::kS32);
  Tensor count = Sum(flags, {0});
  Tensor any_sampled = Gt(count, FullLike(count, 0));
  // The sampled rows packed first: order[j] is the row of the (j+1)-th sampled row (the number
  // of rows whose inclusive count is at most j), clamped to the last row past `count`; a sampled
  // row's place in that order is its exclusive count.
  Tensor inclusive = PrefixSumLastAxis(flags);
  Tensor place = inclusive - flags;
  Tensor j = Iota(*b, {rows, rows}, 0, ElementType::kS32);
  Tensor counted =
      Convert(Le(BroadcastTo(ExpandDims(inclusive, 0), {rows, rows}), j), ElementType::kS32);
  Tensor below = Sum(counted, {1});
  Tensor order = Min(below, FullLike(below, static_cast<double>(rows - 1)));
  // Only the sampled rows go through the candidate selection: they are gathered into the
  // smallest power-of-two bucket that holds them (one branch per bucket, so every shape stays
  // static), drawn there and taken back; greedy rows keep the argmax.
  auto draw_gathered = [&](int64_t bucket) -> std::vector<Tensor> {
    if (bucket >= rows) return {Where(sampled_rows, DrawRows(logits, in, k, selection), greedy)};
    Tensor picked = SliceAxis(order, 0, 0, bucket);
    Tensor drawn = DrawRows(Take(logits, picked), TakeRows(in, picked), k, selection);  // [bucket]
    Tensor back = Take(drawn, Min(place, FullLike(place, static_cast<double>(bucket - 1))));
    return {Where(sampled_rows, back, greedy)};
  };
  std::function<std::vector<Tensor>(int64_t)> draw_in_bucket =
      [&](int64_t bucket) -> std::vector<Tensor> {
    if (bucket >= rows) return draw_gathered(bucket);
    return Cond(
        Le(count, FullLike(count, static_cast<double>(bucket))),
        [&]() { return draw_gathered(bucket); }, [&]() { return draw_in_bucket(bucket * 2); });
  };
  auto keep_greedy = [&]() -> std::vector<Tensor> { return {greedy}; };
  std::vector<Tensor> out = Cond(
      any_sampled, [&]() { return draw_in_bucket(1); }, keep_greedy);
  return out.empty() ? Tensor() : out[0];
}

}  // namespace tlaloc::nn
