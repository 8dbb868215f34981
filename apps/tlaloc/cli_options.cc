#include "cli_options.h"

namespace tlaloc::cli {

void AddTargetOption(CLI::App* cmd, std::string* target) {
  cmd->add_option("--target", *target,
                  "where programs run: interp, cpu, cuda, tpu or a PJRT plugin path "
                  "(default: $TLALOC_TARGET, else interp)");
}

StatusOr<BackendChoice> BackendChoiceFromFlag(const std::string& target) {
  auto choice = target.empty() ? DefaultBackendChoice() : ParseBackendChoice(target);
  if (!choice.ok()) return choice.status().WithContext("--target");
  return choice;
}

StatusOr<std::optional<ElementType>> ParseDtypeFlag(const std::string& text,
                                                    const std::vector<ElementType>& allowed) {
  if (text.empty()) return std::optional<ElementType>();
  struct Spelling {
    const char* short_name;
    const char* long_name;
    ElementType type;
  };
  static const Spelling kSpellings[] = {{"f32", "float32", ElementType::kF32},
                                        {"f16", "float16", ElementType::kF16},
                                        {"bf16", "bfloat16", ElementType::kBF16}};
  std::string expected;
  for (const Spelling& s : kSpellings) {
    bool ok = false;
    for (ElementType t : allowed) ok = ok || t == s.type;
    if (!ok) continue;
    if (text == s.short_name || text == s.long_name) return std::optional<ElementType>(s.type);
    expected += std::string(expected.empty() ? "" : ", ") + s.short_name;
  }
  return InvalidArgument("--dtype \"" + text + "\": expected one of " + expected);
}

}  // namespace tlaloc::cli
