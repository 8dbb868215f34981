// Language-model losses built from builder ops. Both return the SUM of per-token losses and the
// number of counted tokens (f32 scalars), so callers can average over a whole batch, or over
// several batches, exactly. Labels equal to kIgnoreLabel (prompt tokens, padding) take no loss.
#pragma once

#include <cstdint>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/builder/tensor.h"

namespace tlaloc::train {

struct LossTerms {
  Tensor loss_sum;  // f32 scalar: sum of -log softmax(logits)[label] over counted tokens
  Tensor count;     // f32 scalar: number of counted tokens
};

// Cross-entropy of logits [N, V] (any float type; computed in f32) against labels s32 [N].
// The row maximum is subtracted under StopGradient (recorded in `marks`, may be null).
LossTerms CrossEntropy(const Tensor& logits, const Tensor& labels, autodiff::Marks* marks);

// The LM head and cross-entropy together, as one stablehlo.composite tlaloc.linear_cross_entropy
// {chunk, ignore_index, gradients} on hidden [N, H] (after the final norm), head [V, H] and
// labels s32 [N]. Its decomposition takes the tokens in chunks of `chunk` rows (0 or >= N: all at
// once), so at most one chunk's [chunk, V] logits exist at a time. With `marks` (a program to be
// differentiated) the composite also returns d(loss sum)/d(hidden) and d(loss sum)/d(head),
// formed from each chunk's softmax in the forward pass, and autodiff's rule for the composite
// scales them by the loss sum's cotangent: the backward pass never recomputes the logits. The
// interpreter runs the composite as one kernel (interp/fusion_xent.cc); XLA runs the
// decomposition.
LossTerms LmHeadCrossEntropy(const Tensor& hidden, const Tensor& head, const Tensor& labels,
                             int64_t chunk, autodiff::Marks* marks);

}  // namespace tlaloc::train
