#include "tlaloc/train/packed_positions.h"

namespace tlaloc::train {

Tensor PackedPositions(const Tensor& input_ids, int32_t document_end_id) {
  OpBuilder& b = *input_ids.builder();
  const int64_t bsz = input_ids.dim(0), t = input_ids.dim(1);
  const Tensor query = Iota(b, {bsz, t, t}, 1), earlier = Iota(b, {bsz, t, t}, 2);
  const Tensor ends =
      BroadcastInDim(Eq(input_ids, FullLike(input_ids, document_end_id)), {bsz, t, t}, {0, 2});
  // Where the query's document starts: one past the last end-of-text before it, else 0.
  const Tensor start =
      ReduceMax(Where(ends & Lt(earlier, query), earlier + 1, FullLike(earlier, 0)), {2});
  return Iota(b, {bsz, t}, 1) - start;
}

}  // namespace tlaloc::train
