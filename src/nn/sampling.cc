// In-program sampling: temperature, top-k (a sort; per-row sampling takes its candidates with
// chlo.top_k, a partial selection), top-p (a prefix sum over the sorted probabilities), then a
// Gumbel-max draw (jax.random.categorical) over the kept candidates.
#include "tlaloc/nn/sampling.h"

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

}  // namespace

Tensor SampleRows(const Tensor& logits, const RowSamplingInputs& in, int64_t max_candidates,
                  CandidateSelection selection) {
  OpBuilder* b = logits.builder();
  if (!b || !logits.valid()) return Tensor();
  const int64_t rows = logits.dim(0), vocab = logits.dim(-1);
  const int64_t k = max_candidates > 0 && max_candidates < vocab ? max_candidates : vocab;
  Tensor greedy = Argmax(logits, -1);
  Tensor sampled_rows = Gt(in.temperature, FullLike(in.temperature, 0.0));
  Tensor count = Sum(Convert(sampled_rows, ElementType::kS32), {0});
  Tensor any_sampled = Gt(count, FullLike(count, 0));
  auto draw = [&]() -> std::vector<Tensor> {
    // Greedy rows divide by 1 here; their draw is discarded below.
    Tensor t = Where(sampled_rows, in.temperature, FullLike(in.temperature, 1.0));
    Tensor scaled = logits / ExpandDims(t, 1);
    auto [vals, idx] = Candidates(scaled, k, selection);  // [B, k], descending
    Tensor rank = Iota(*b, {rows, k}, 1, ElementType::kS32);
    Tensor top_k = ExpandDims(in.top_k, 1);
    Tensor within_k = Le(top_k, FullLike(top_k, 0)) | Lt(rank, top_k);
    vals = Where(within_k, vals, FullLike(vals, -1e30));
    // Keep a candidate while the mass before it is below top_p (the first is always kept).
    Tensor probs = Softmax(vals, -1);
    Tensor before = PrefixSumLastAxis(probs) - probs;
    Tensor top_p = ExpandDims(in.top_p, 1);
    Tensor keep = Ge(top_p, FullLike(top_p, 1.0)) | Lt(before, top_p);
    vals = Where(keep, vals, FullLike(vals, -1e30));
    Tensor noise = RowGumbel(RowFoldIn(in.keys, in.steps), k);
    Tensor choice = Argmax(noise + vals, -1);  // [B] index into the candidates
    Tensor hit = Convert(OneHot(choice, k, ElementType::kS32), ElementType::kS32);
    Tensor token = Sum(hit * idx, {-1});
    return {Where(sampled_rows, token, greedy)};
  };
  auto keep_greedy = [&]() -> std::vector<Tensor> { return {greedy}; };
  std::vector<Tensor> out = Cond(any_sampled, draw, keep_greedy);
  return out.empty() ? Tensor() : out[0];
}

}  // namespace tlaloc::nn
