// Placeholder until `tlaloc run` lands.
#include "commands.h"

namespace tlaloc::cli {

void RegisterRunCommand(CLI::App& app) { (void)app; }

}  // namespace tlaloc::cli
