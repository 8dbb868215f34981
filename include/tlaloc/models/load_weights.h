// A checkpoint's weights for a config's family: each name and shape checked against the
// family's weight specs, converted to the compute type when stored otherwise.
#pragma once

#include <span>
#include <vector>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/io/safetensors.h"
#include "tlaloc/ir/literal.h"

namespace tlaloc::models {

// In WeightSpecs(config) order (a tied head's stored copy is ignored); tensors already of
// `dtype` are zero-copy views of the mapping. A stacked spec (an MoE layer's experts) is a view
// too when its checkpoint tensors lie one after another in expert order and in `dtype` (written
// with ExpertsInOrder), and is otherwise copied together from them (transformers' files).
StatusOr<std::vector<Literal>> LoadWeights(const io::ModelConfig& config,
                                           const io::Checkpoint& checkpoint, ElementType dtype);

// How to write CheckpointTensors' output: each stacked weight's experts one after another in
// expert order (still transformers' per-expert tensors), so that LoadWeights views them in the
// mapped file instead of copying them.
inline io::CheckpointWriteOptions ExpertsInOrder() {
  io::CheckpointWriteOptions options;
  options.layout = io::SafetensorsLayout::kGivenOrder;
  return options;
}

// The checkpoint's tensors for weights named as WeightSpecs(config) names them: stacked specs
// split back into their checkpoint tensors (each spec's experts in expert order), the rest
// passed through.
std::vector<io::NamedTensor> CheckpointTensors(const io::ModelConfig& config,
                                               std::span<const io::NamedTensor> weights);

}  // namespace tlaloc::models
