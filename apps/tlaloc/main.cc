// The tlaloc command line: one binary, one subcommand per job.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "blas_core.h"
#include "commands.h"

int main(int argc, char** argv) {
  tlaloc::cli::ReexecWithFittingBlasCore();
  CLI::App app{"tlaloc: train and serve transformer models on the CPU or any PJRT device"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tlaloc 0.1.0"));
  tlaloc::cli::RegisterCommands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return tlaloc::cli::ExitCode();
}
