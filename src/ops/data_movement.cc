#include "op_areas.h"

namespace tlaloc::ops {

void RegisterDataMovementOps(OpRegistry& r) { (void)r; }

}  // namespace tlaloc::ops
