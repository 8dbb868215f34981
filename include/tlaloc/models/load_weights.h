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
// `dtype` are zero-copy views of the mapping. A stacked spec (an MoE layer's experts) is
// copied together from its checkpoint tensors.
StatusOr<std::vector<Literal>> LoadWeights(const io::ModelConfig& config,
                                           const io::Checkpoint& checkpoint, ElementType dtype);

// The checkpoint's tensors for weights named as WeightSpecs(config) names them: stacked specs
// split back into their checkpoint tensors, the rest passed through.
std::vector<io::NamedTensor> CheckpointTensors(const io::ModelConfig& config,
                                               std::span<const io::NamedTensor> weights);

}  // namespace tlaloc::models
