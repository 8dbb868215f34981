// Cross-entropy and the LM-head loss as the composite tlaloc.linear_cross_entropy (see loss.h).
#include "tlaloc/train/loss.h"

#include <algorithm>
#include <string>

#include "tlaloc/builder/composite.h"
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

// The cross-entropy's pieces over logits [N, V] (f32): what the loss and its gradient share.
struct RowSoftmax {
  Tensor exps;   // exp(logits - row max) [N, V]
  Tensor sums;   // their row sums [N]
  Tensor valid;  // labels != kIgnoreLabel (pred [N])
  Tensor safe;   // the labels, ignored ones as 0 [N]
  LossTerms terms;
};

RowSoftmax CrossEntropyRows(const Tensor& logits, const Tensor& labels, autodiff::Marks* marks) {
  OpBuilder& b = *logits.builder();
  const int64_t n = logits.dim(0);
  RowSoftmax r;
  // Shifting by the row maximum changes nothing mathematically, so no gradient flows through it.
  Tensor shifted = logits - autodiff::StopGradient(ReduceMax(logits, {1}, true), marks);
  r.exps = Exp(shifted);
  r.sums = Sum(r.exps, {1});
  Tensor lse = Log(r.sums);
  r.valid = Ne(labels, Full(b, {n}, kIgnoreLabel, ElementType::kS32));
  r.safe = Where(r.valid, labels, FullLike(labels, 0));
  Tensor picked = PickPerRow(shifted, r.safe);
  Tensor per_token = Where(r.valid, lse - picked, FullLike(lse, 0));
  r.terms = {Sum(per_token, {0}), Sum(Convert(r.valid, ElementType::kF32), {0})};
  return r;
}

// The composite's decomposition: the loss of each chunk of rows in turn, and with `gradients`
// the gradients of the loss sum (cotangent 1) with respect to hidden and head, formed from each
// chunk's softmax while its logits exist: (softmax - onehot) on counted rows, 0 on the others,
// times head (d hidden) and, summed over chunks, times hidden (d head).
std::vector<Tensor> LinearCrossEntropyBody(const Tensor& hidden, const Tensor& head,
                                           const Tensor& labels, int64_t chunk, bool gradients) {
  OpBuilder& b = *hidden.builder();
  const int64_t n = hidden.dim(0), v = head.dim(0);
  const ElementType et = hidden.element_type();
  Tensor loss = Full(b, {}, 0.0), count = Full(b, {}, 0.0), d_head;
  std::vector<Tensor> d_hidden;
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk), rows = end - begin;
    Tensor h = SliceAxis(hidden, 0, begin, end);
    Tensor logits = nn::Linear(h, head);
    if (logits.element_type() != ElementType::kF32) logits = Convert(logits, ElementType::kF32);
    RowSoftmax r = CrossEntropyRows(logits, SliceAxis(labels, 0, begin, end), nullptr);
    loss = loss + r.terms.loss_sum;
    count = count + r.terms.count;
    if (!gradients) continue;
    Tensor p = r.exps / Reshape(r.sums, {rows, 1});
    // The label's column as gather picks it (indices clamped into the row).
    Tensor column =
        Clamp(FullLike(r.safe, 0), r.safe, FullLike(r.safe, static_cast<double>(v - 1)));
    Tensor hot = Eq(Iota(b, {rows, v}, 1), BroadcastTo(Reshape(column, {rows, 1}), {rows, v}));
    Tensor g = Where(hot, p - 1.0, p);
    g = Where(BroadcastTo(Reshape(r.valid, {rows, 1}), {rows, v}), g, FullLike(g, 0));
    if (et != ElementType::kF32) g = Convert(g, et);
    d_hidden.push_back(DotGeneral(g, head, {}, {}, {1}, {0}));
    Tensor dw = DotGeneral(g, h, {}, {}, {0}, {0});
    d_head = d_head.valid() ? d_head + dw : dw;
  }
  if (!gradients) return {loss, count};
  return {loss, count, d_hidden.size() == 1 ? d_hidden[0] : Concat(d_hidden, 0), d_head};
}

}  // namespace

LossTerms CrossEntropy(const Tensor& logits_in, const Tensor& labels, autodiff::Marks* marks) {
  Tensor logits = logits_in.element_type() == ElementType::kF32
                      ? logits_in
                      : Convert(logits_in, ElementType::kF32);
  return CrossEntropyRows(logits, labels, marks).terms;
}

LossTerms LmHeadCrossEntropy(const Tensor& hidden, const Tensor& head, const Tensor& labels,
                             int64_t chunk, autodiff::Marks* marks) {
  if (!hidden.valid() || !head.valid() || !labels.valid()) return {Tensor(), Tensor()};
  const int64_t n = hidden.dim(0);
  if (chunk <= 0 || chunk > n) chunk = n;
  // Differentiated (marks given): the composite also returns the loss sum's gradients, which its
  // gradient rule (autodiff) scales by the loss sum's cotangent.
  const bool gradients = marks != nullptr;
  AttrDict attributes{{"chunk", Attribute::Int(chunk, ElementType::kS64)},
                      {"ignore_index", Attribute::Int(kIgnoreLabel, ElementType::kS64)},
                      {"gradients", Attribute::Bool(gradients)}};
  const std::string function = std::string("tlaloc_linear_cross_entropy_") +
                               (gradients ? "grad_" : "") + CompositeTypeName(hidden.type()) + "_" +
                               CompositeTypeName(head.type()) + "_c" + std::to_string(chunk);
  std::vector<Tensor> r =
      EmitComposite(kLinearCrossEntropyComposite, {hidden, head, labels}, std::move(attributes),
                    function, [&](const std::vector<Tensor>& a) {
                      return LinearCrossEntropyBody(a[0], a[1], a[2], chunk, gradients);
                    });
  if (r.size() < 2) return {Tensor(), Tensor()};  // the error is the builder's
  return {r[0], r[1]};
}

}  // namespace tlaloc::train
