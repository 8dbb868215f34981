// Positions of rows that pack several documents (train/data.h), derived in the train-step
// program from the tokens themselves: a document ends with its end-of-text token, so the token
// after one starts a new document at position 0.
#pragma once

#include <cstdint>

#include "tlaloc/builder/tensor.h"

namespace tlaloc::train {

// s32 [B, T]: for each token of input_ids s32 [B, T], how many tokens of its document come
// before it in the row. A row starts at 0 (a document cut across rows restarts there), and
// every position after a `document_end_id` token restarts at 0 (padding, which is that id
// too, makes one-token documents of its own).
Tensor PackedPositions(const Tensor& input_ids, int32_t document_end_id);

}  // namespace tlaloc::train
