// The StableHLO text a PJRT plugin receives for a module: Tlaloc's printer's output, adjusted
// where XLA's frontend is stricter than Tlaloc's parser. Each adjustment is a difference
// between the two recorded in docs/PJRT.md ("What XLA:CPU does differently").
#pragma once

#include <string>

#include "tlaloc/ir/ir.h"
#include "tlaloc/support/status.h"

namespace tlaloc::pjrt {

// Prints `module` for compilation with `entry` as the program:
//  - XLA compiles the function named "main" ("conversion requires module with `main`
//    function"); Tlaloc's entry may have another name (the first public function), so the
//    entry is renamed main (a function already called main that is not the entry is renamed
//    too) and every call updated.
StatusOr<std::string> PrintProgramText(const Module& module, const Function& entry);

}  // namespace tlaloc::pjrt
