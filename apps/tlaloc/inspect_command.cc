// Placeholder until `tlaloc inspect` lands.
#include "commands.h"

namespace tlaloc::cli {

void RegisterInspectCommand(CLI::App& app) { (void)app; }

}  // namespace tlaloc::cli
