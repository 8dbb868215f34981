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

// The LM head and cross-entropy together: hidden [N, H] (after the final norm), head [V, H],
// labels s32 [N]. With chunk > 0 the tokens are split in chunks of `chunk` rows, each chunk's
// projection and loss a remat region of `marks`, so at most one chunk's [chunk, V] logits are
// alive at a time, forward or backward. chunk == 0 (or >= N): all rows at once.
LossTerms LmHeadCrossEntropy(const Tensor& hidden, const Tensor& head, const Tensor& labels,
                             int64_t chunk, autodiff::Marks* marks);

}  // namespace tlaloc::train
