// Cross-entropy and the chunked LM-head loss (see loss.h).
#include "tlaloc/train/loss.h"

#include <algorithm>

#include "tlaloc/nn/layers.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

namespace {

// x[i, index[i]] for each row i of x [N, V]: one gather, whose gradient is a scatter of N values
// (cheaper than comparing every [N, V] element with its row's label).
Tensor PickPerRow(const Tensor& x, const Tensor& index) {
  OpBuilder& b = *x.builder();
  const int64_t n = x.dim(0);
  Tensor rows = Iota(b, {n, 1}, 0);
  Tensor starts = Concat({rows, Reshape(index, {n, 1})}, 1);  // [N, 2]: (row, column)
  AttrDict dn{{"offset_dims", Attribute::IntArray({})},
              {"collapsed_slice_dims", Attribute::IntArray({0, 1})},
              {"operand_batching_dims", Attribute::IntArray({})},
              {"start_indices_batching_dims", Attribute::IntArray({})},
              {"start_index_map", Attribute::IntArray({0, 1})},
              {"index_vector_dim", Attribute::Int(1, ElementType::kS64)}};
  Value picked = b.CreateOne("stablehlo.gather", {x.value(), starts.value()},
                             {{"dimension_numbers", Attribute::Struct("stablehlo.gather", dn)},
                              {"slice_sizes", Attribute::IntArray({1, 1})},
                              {"indices_are_sorted", Attribute::Bool(true)}},
                             std::vector<Type>{TensorType(x.element_type(), {n})});
  return Tensor(picked, &b);
}

}  // namespace

LossTerms CrossEntropy(const Tensor& logits_in, const Tensor& labels, autodiff::Marks* marks) {
  OpBuilder& b = *logits_in.builder();
  Tensor logits = logits_in.element_type() == ElementType::kF32
                      ? logits_in
                      : Convert(logits_in, ElementType::kF32);
  const int64_t n = logits.dim(0);
  // Shifting by the row maximum changes nothing mathematically, so no gradient flows through it.
  Tensor shifted = logits - autodiff::StopGradient(ReduceMax(logits, {1}, true), marks);
  Tensor lse = Log(Sum(Exp(shifted), {1}));
  Tensor valid = Ne(labels, Full(b, {n}, kIgnoreLabel, ElementType::kS32));
  Tensor picked = PickPerRow(shifted, Where(valid, labels, FullLike(labels, 0)));
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
