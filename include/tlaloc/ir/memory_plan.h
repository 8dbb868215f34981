// A program's memory, predicted from its IR before it runs: the temporaries the interpreter's
// plan keeps live at once (the interpreter backend's and Tlaloc's PJRT plugin's compiled memory
// statistics) and the argument bytes that alias an output. Used to refuse programs that cannot
// fit (tlaloc/runtime/memory_budget.h).
#pragma once

#include <cstdint>

#include "tlaloc/ir/ir.h"

namespace tlaloc {

// The largest sum of temporaries live at once while `function` of `module` runs, replayed on
// sizes as the interpreter plans it: an op's results are allocated before it runs, its regions'
// or callee's temporaries sit on top of everything live then, and a value is freed after its last
// use. Arguments and the function's outputs are not temporaries. An upper bound: fused chains
// and in-place reuse of dying operands only make real runs smaller.
int64_t TemporaryPeakBytes(const Module& module, const Function& function);

// Bytes of the arguments whose tf.aliasing_output names a result of the same type: a donated
// argument and the output it becomes are one buffer.
int64_t AliasedArgumentBytes(const Function& function);

// The most bytes one op of `function`'s body makes of outputs that alias an argument. The
// interpreter allocates an op's results before it runs and only then lets a dying donated
// operand take their place, so for a moment such an output and its argument both exist: a host
// budget adds this to the temporaries.
int64_t LargestAliasedResultBytes(const Function& function);

}  // namespace tlaloc
