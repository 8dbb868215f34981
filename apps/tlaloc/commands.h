// Each subcommand lives in its own file and registers itself here.
#pragma once

#include <CLI/CLI.hpp>

namespace tlaloc::cli {

void RegisterCommands(CLI::App& app);

// The exit codes of every command (documented in the README): 0 success, 1 a runtime failure
// (a file that does not load, a program that fails), 2 a usage error (unknown command or flag, a
// missing or conflicting option, a value out of range).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Exit code set by the subcommand that ran.
int ExitCode();
void SetExitCode(int code);

void RegisterExampleCommand(CLI::App& app);    // example_command.cc
void RegisterRunCommand(CLI::App& app);        // run_command.cc: tlaloc run FILE.mlir
void RegisterInspectCommand(CLI::App& app);    // inspect_command.cc: tlaloc inspect DIR
void RegisterTokenizeCommand(CLI::App& app);   // tokenize_command.cc: tlaloc tokenize
void RegisterDoctorCommand(CLI::App& app);     // doctor_command.cc: tlaloc doctor
void RegisterGenerateCommand(CLI::App& app);   // generate_command.cc: tlaloc generate
void RegisterChatCommand(CLI::App& app);       // chat_command.cc: tlaloc chat
void RegisterInitModelCommand(CLI::App& app);  // init_model_command.cc: tlaloc init-model
void RegisterFinetuneCommand(CLI::App& app);   // finetune_command.cc: finetune, finetune-demo
void RegisterExportCommand(CLI::App& app);     // export_command.cc: tlaloc export gguf
void RegisterBenchCommand(CLI::App& app);      // bench_command.cc: tlaloc bench
void RegisterProbeCommand(CLI::App& app);      // probe_command.cc: tlaloc probe
void RegisterKernelsCommand(CLI::App& app);    // kernels_command.cc: tlaloc kernels ...
void RegisterAotCommand(CLI::App& app);        // aot_command.cc: tlaloc aot
void RegisterServeCommand(CLI::App& app);      // serve_command.cc: tlaloc serve
void RegisterQuantizeCommand(CLI::App& app);   // quantize_command.cc: tlaloc quantize

}  // namespace tlaloc::cli
