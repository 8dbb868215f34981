// A checkpoint's weights for a config's family: each name and shape checked against the
// family's weight specs, converted to the compute type when stored otherwise.
#pragma once

#include <vector>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/literal.h"

namespace tlaloc::models {

// In WeightSpecs(config) order (a tied head's stored copy is ignored); tensors already of
// `dtype` are zero-copy views of the mapping.
StatusOr<std::vector<Literal>> LoadWeights(const io::ModelConfig& config,
                                           const io::Checkpoint& checkpoint, ElementType dtype);

}  // namespace tlaloc::models
