// The CPU kernel layer: the fast implementations of ops, apart from what the ops mean.
//
// An op's registry entry (ir/op_registry.h, defined under src/ops/) holds its meaning, with a
// plain reference evaluation (OpDef::eval) kept as the in-tree oracle. This layer holds the fast
// code: OpenBLAS and oneDNN products, the AVX-512 matrix-vector, int8, q8_0, gguf4 and
// ragged-dot tile kernels, the vector math loops and the row folds. It registers them here, by
// op name, and installs its bulk loops under the elementwise references; the interpreter asks
// KernelFor for each op when it plans a function. A fast kernel returns the bits its op's
// reference returns wherever the reference rounds the same way (tests/cpu/oracle_test.cc states
// which ops agree bit for bit and which within a tolerance).
#pragma once

#include <string_view>
#include <vector>

#include "tlaloc/ir/op_registry.h"

namespace tlaloc::cpu {

// Registers the layer's kernels: the per-op kernel table and the elementwise ops' bulk loops
// (ops::vmath::InstallBulkKernels). Idempotent and thread-safe; the interpreter calls it before
// it plans a function.
void RegisterKernels();

// The fast implementation of op `name`, or null when the op runs its reference. A kernel may
// hand cases it does not take to the reference itself (op.def().eval).
const EvalFn* FindKernel(std::string_view name);

// What the interpreter runs for `def`: FindKernel's kernel unless `reference_only` or none is
// registered, else the reference (def.eval, null when the interpreter cannot run the op).
const EvalFn& KernelFor(const OpDef& def, bool reference_only = false);

// Whether TLALOC_CPU_KERNELS=0 asks for the references only (for the oracle and for comparing
// speeds); read each time it is asked. The interpreter's fused chains (TLALOC_FUSION=0 turns
// them off) and the elementwise bulk loops are not affected.
bool ReferenceOnlyFromEnvironment();

// The names of the ops that have a fast kernel (for the oracle test and documentation).
std::vector<std::string> KernelOpNames();

}  // namespace tlaloc::cpu
