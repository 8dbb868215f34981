// Reads StableHLO MLIR text (as JAX and Tlaloc's printer write it) into a verified Module.
//
// Pretty forms are parsed by each op's own `parse` hook (op_registry.h); the generic form
// `"stablehlo.op"(%a) <{props}> {attrs} ({regions}) : (t) -> t` works for every registered op.
//
// Conventions the op hooks can rely on (see OpParser):
// - ParseIdentifier() also accepts a value name and returns it with its sigil ("%iterArg"), so
//   forms that define region arguments outside the region (`while(%iterArg = %0)`, `reducer(%a:
//   t)`) can read the name; pass it on to ParseRegion's implicit_args (with or without '%').
// - ParsePunct("x") also accepts the bare identifier `x` (as in `[0] x [1]`).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "tlaloc/ir/ir.h"
#include "tlaloc/ir/op_registry.h"
#include "tlaloc/support/status.h"

namespace tlaloc {

struct ParseOptions {
  // Registry the op names are looked up in; null: OpRegistry::Global().
  const OpRegistry* registry = nullptr;
  // Run Verify(module) on the result.
  bool verify = true;
  // Limits that keep malformed input from exhausting the stack or memory.
  int max_nesting_depth = 128;
  int64_t max_literal_bytes = int64_t{1} << 30;
};

// Parses a module (`module @name attributes {...} { func.func ... }`) or bare functions.
// Errors read "<source_name>:LINE:COL: expected X, found Y".
StatusOr<std::unique_ptr<Module>> ParseModule(std::string_view text,
                                              std::string_view source_name = "<input>",
                                              const ParseOptions& options = {});

// Parses one attribute or one type on its own (for tests and tools).
StatusOr<Attribute> ParseAttributeText(std::string_view text);
StatusOr<Type> ParseTypeText(std::string_view text);

}  // namespace tlaloc
