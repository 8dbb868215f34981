// The MPI world (process_world.h), the one place Tlaloc calls MPI.
#pragma once

#include "tlaloc/interp/process_world.h"

namespace tlaloc::internal {

// MPI_COMM_WORLD, initialized on the first call; an error where this build has no MPI or MPI
// cannot start.
StatusOr<ProcessWorld*> MpiWorld();

}  // namespace tlaloc::internal
