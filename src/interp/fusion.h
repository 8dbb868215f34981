// Chains of ops the interpreter runs as one fused kernel, found when a function is planned.
// Each fused kernel returns bit for bit what the ops would, so fusion changes speed only;
// InterpreterOptions::fuse (TLALOC_FUSION=0 in the environment) turns it off.
//
// softmax over the last axis, as builder::Softmax emits it:
//   m = reduce(x, max) ; bm = broadcast(reshape?(m)) ; d = x - bm ; e = exp(d)
//   s = reduce(e, add) ; bs = broadcast(reshape?(s)) ; p = e / bs
// with every intermediate used only inside the chain: one pass per row instead of seven
// passes over the whole tensor and five full-size temporaries (attention's [heads, T, S]
// scores).
#pragma once

#include <functional>

#include "plan.h"
#include "tlaloc/ir/liveness.h"

namespace tlaloc::interp {

// Rewrites `plan` (the plan of `block`, whose uses are `uses`) so fused kernels replace the
// chains they match. `slot_of` gives a value's slot.
void FuseChains(const Block& block, const BlockUses& uses, BlockPlan& plan,
                const std::function<int(const ValueImpl*)>& slot_of);

}  // namespace tlaloc::interp
