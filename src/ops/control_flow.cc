#include "op_areas.h"

namespace tlaloc::ops {

void RegisterControlFlowOps(OpRegistry& r) { (void)r; }

}  // namespace tlaloc::ops
