#include "commands.h"

namespace tlaloc::cli {

namespace {
int g_exit_code = 0;
}

int ExitCode() { return g_exit_code; }
void SetExitCode(int code) { g_exit_code = code; }

void RegisterCommands(CLI::App& app) {
  RegisterExampleCommand(app);
  RegisterRunCommand(app);
  RegisterInspectCommand(app);
  RegisterTokenizeCommand(app);
  RegisterDoctorCommand(app);
  RegisterGenerateCommand(app);
  RegisterChatCommand(app);
  RegisterInitModelCommand(app);
  RegisterFinetuneCommand(app);
  RegisterExportCommand(app);
  RegisterQuantizeCommand(app);
  RegisterBenchCommand(app);
  RegisterProbeCommand(app);
  RegisterKernelsCommand(app);
  RegisterAotCommand(app);
  RegisterServeCommand(app);
}

}  // namespace tlaloc::cli
