// Where families register (see families.cc).
#pragma once

#include <vector>

#include "tlaloc/models/family.h"

namespace tlaloc::models {

void RegisterFamilies(std::vector<ModelFamily>& registry);

}  // namespace tlaloc::models
