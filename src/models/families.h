// Where families register (see families.cc).
#pragma once

#include <vector>

#include "tlaloc/models/family.h"

namespace tlaloc::models {

void RegisterFamilies(std::vector<ModelFamily>& registry);
// The registry, filled once from RegisterFamilies and sorted by model_type.
const std::vector<ModelFamily>& Registry();

}  // namespace tlaloc::models
