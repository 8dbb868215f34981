// Each subcommand lives in its own file and registers itself here.
#pragma once

#include <CLI/CLI.hpp>

namespace tlaloc::cli {

void RegisterCommands(CLI::App& app);
// Exit code set by the subcommand that ran.
int ExitCode();
void SetExitCode(int code);

void RegisterExampleCommand(CLI::App& app);

}  // namespace tlaloc::cli
