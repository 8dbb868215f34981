// Placeholder until `tlaloc tokenize` lands.
#include "commands.h"

namespace tlaloc::cli {

void RegisterTokenizeCommand(CLI::App& app) { (void)app; }

}  // namespace tlaloc::cli
