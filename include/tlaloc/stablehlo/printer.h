// Prints Tlaloc IR as StableHLO MLIR text: the text JAX hands to PJRT and that ParseModule
// reads back. Ops with a pretty `print` hook print through it; every other op prints in the
// generic form `%0 = "stablehlo.op"(%a) {attrs} ({regions}) : (types) -> types`. Output is
// deterministic: the same module always prints the same text.
#pragma once

#include <string>

#include "tlaloc/ir/ir.h"

namespace tlaloc {

std::string PrintModule(const Module& module);
// One function as it appears inside a module (values numbered as PrintModule does).
std::string PrintFunction(const Function& function);

// Attribute text in the generic dictionary form: `array<i64: 1, 2>`, `#stablehlo<kind V>`,
// `#stablehlo.dot<field = [1], ...>`, `dense<...> : tensor<...>`, `3 : i64`, ...
std::string PrintAttribute(const Attribute& attr);
std::string PrintType(const Type& type);
// `dense<...> : tensor<...>`: splat when all elements are equal, nested lists for small
// tensors, little-endian hex for more than 64 elements; floats as the shortest decimal that
// round-trips, non-finite floats as their bit pattern (0x7FC00000).
std::string PrintDenseElements(const Literal& literal);
// One element of a dense literal as PrintDenseElements writes it.
std::string FormatDenseElement(const Literal& literal, int64_t index);

}  // namespace tlaloc
