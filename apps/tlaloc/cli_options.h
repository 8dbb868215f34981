// Options several subcommands share, parsed one way: where programs run (--target) and the
// floating-point type a model runs or is stored in (--dtype).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/ir/element_type.h"
#include "tlaloc/runtime/target.h"
#include "tlaloc/support/status.h"

namespace tlaloc::cli {

// Adds --target with the help text every command shares.
void AddTargetOption(CLI::App* cmd, std::string* target);

// The backend a --target value names; an empty value means $TLALOC_TARGET, else the interpreter.
StatusOr<BackendChoice> BackendChoiceFromFlag(const std::string& target);

// "f32"/"float32", "f16"/"float16" (when allowed), "bf16"/"bfloat16"; empty gives nullopt. The
// error names --dtype, the value and the accepted spellings.
StatusOr<std::optional<ElementType>> ParseDtypeFlag(const std::string& text,
                                                    const std::vector<ElementType>& allowed = {
                                                        ElementType::kF32, ElementType::kBF16});

}  // namespace tlaloc::cli
