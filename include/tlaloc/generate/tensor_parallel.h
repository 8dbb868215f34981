// Greedy generation with the weights split over a `model` mesh axis (the tp plan of
// shard/plan.h): every device holds its attention heads and MLP columns, and runs one forward
// program with an all_reduce after each row-parallel product. This first form has no KV cache:
// each token re-runs the causal forward over the sequence so far (padded to a fixed length, so
// one program serves every step), the forward the training step uses. It is the correctness
// reference for tensor-parallel decoding; the engine's cached step programs are to take the
// same hooks (docs/SHARDING.md).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/sharding.h"
#include "tlaloc/runtime/backend.h"

namespace tlaloc::generate {

class TensorParallelGreedy {
 public:
  // `weights` in models::WeightSpecs order (any float type, computed in f32); `mesh` must be
  // one `model` axis that divides the heads, KV heads and intermediate size; `max_len` bounds
  // prompt + generated tokens. Ids at or past `sample_vocab` are never produced (0: no limit;
  // the LM-head rows past the tokenizer's ids, as the engine masks them). The backend needs the
  // mesh's devices.
  static StatusOr<std::unique_ptr<TensorParallelGreedy>> Create(const io::ModelConfig& config,
                                                                std::vector<Literal> weights,
                                                                Backend& backend, const Mesh& mesh,
                                                                int64_t max_len,
                                                                int64_t sample_vocab = 0);
  ~TensorParallelGreedy();

  // Up to `max_new_tokens` argmax tokens after `prompt`, stopping after one of `eos` (included).
  StatusOr<std::vector<int32_t>> Generate(const std::vector<int32_t>& prompt,
                                          int64_t max_new_tokens,
                                          const std::vector<int64_t>& eos = {});

  struct Impl;

 private:
  explicit TensorParallelGreedy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tlaloc::generate
