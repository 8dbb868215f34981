// Cross-entropy and the chunked LM-head loss (see loss.h).
#include "tlaloc/train/loss.h"

#include <algorithm>

#include "tlaloc/nn/layers.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

LossTerms CrossEntropy(const Tensor& logits_in, const Tensor& labels, autodiff::Marks* marks) {
  OpBuilder& b = *logits_in.builder();
  Tensor logits = logits_in.element_type() == ElementType::kF32
                      ? logits_in
                      : Convert(logits_in, ElementType::kF32);
  const int64_t n = logits.dim(0), v = logits.dim(1);
  // Shifting by the row maximum changes nothing mathematically, so no gradient flows through it.
  Tensor shifted = logits - autodiff::StopGradient(ReduceMax(logits, {1}, true), marks);
  Tensor lse = Log(Sum(Exp(shifted), {1}));
  Tensor hit = Eq(Iota(b, {n, v}, 1), BroadcastInDim(labels, {n, v}, {0}));
  Tensor picked = Sum(Where(hit, shifted, FullLike(shifted, 0)), {1});
  Tensor valid = Ne(labels, Full(b, {n}, kIgnoreLabel, ElementType::kS32));
  Tensor per_token = Where(valid, lse - picked, FullLike(lse, 0));
  return {Sum(per_token, {0}), Sum(Convert(valid, ElementType::kF32), {0})};
}

LossTerms LmHeadCrossEntropy(const Tensor& hidden, const Tensor& head, const Tensor& labels,
                             int64_t chunk, autodiff::Marks* marks) {
  const int64_t n = hidden.dim(0);
  if (chunk <= 0 || chunk >= n) return CrossEntropy(nn::Linear(hidden, head), labels, marks);
  OpBuilder& b = *hidden.builder();
  LossTerms total{Full(b, {}, 0.0), Full(b, {}, 0.0)};
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk);
    autodiff::RematScope scope(marks, b);
    LossTerms part = CrossEntropy(nn::Linear(SliceAxis(hidden, 0, begin, end), head),
                                  SliceAxis(labels, 0, begin, end), marks);
    total.loss_sum = total.loss_sum + part.loss_sum;
    total.count = total.count + part.count;
  }
  return total;
}

}  // namespace tlaloc::train
