// Shardy's sharding syntax inside op pretty forms (sdy.sharding_constraint,
// sdy.manual_computation), shared by the two op files.
#pragma once

#include <string>
#include <vector>

#include "tlaloc/ir/op_registry.h"
#include "tlaloc/ir/sharding.h"

namespace tlaloc::ops {

// `{"a", "b"}` (also `{}`).
Status ParseSdyAxisSet(OpParser& p, std::vector<std::string>& axes);
// `<@mesh, [{"a"}, {}], replicated={"b"}>`
StatusOr<Sharding> ParseSdyShardingBody(OpParser& p);

}  // namespace tlaloc::ops
