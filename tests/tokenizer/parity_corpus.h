#pragma once

#include <string>
#include <vector>

namespace tlaloc::testing {

// Hand-written samples plus `random_count` deterministic random mixtures (same on every run).
std::vector<std::string> ParityCorpus(size_t random_count);

}  // namespace tlaloc::testing
