#include "op_areas.h"

namespace tlaloc::ops {

void RegisterElementwiseOps(OpRegistry& r) { (void)r; }

}  // namespace tlaloc::ops
