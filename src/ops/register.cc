#include "op_areas.h"

namespace tlaloc {

void RegisterBuiltinOps(OpRegistry& registry) {
  ops::RegisterCoreOps(registry);
  ops::RegisterElementwiseOps(registry);
  ops::RegisterDataMovementOps(registry);
  ops::RegisterReductionOps(registry);
  ops::RegisterControlFlowOps(registry);
  ops::RegisterCollectiveOps(registry);
}

}  // namespace tlaloc
