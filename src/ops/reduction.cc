#include "op_areas.h"

namespace tlaloc::ops {

void RegisterReductionOps(OpRegistry& r) { (void)r; }

}  // namespace tlaloc::ops
