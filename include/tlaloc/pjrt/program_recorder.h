// The programs recorder: with TLALOC_PROGRAMS_DIR (or the runbook's TLALOC_TPU_PROGRAMS_DIR) set,
// every PjrtSession::Compile writes the program text exactly as it is sent to the plugin, its
// serialized compile options, and a line in the folder's index.tsv, so that `tlaloc aot` can
// compile the same programs for a target's topology without the hardware.
//
// Folder layout: <module>-<hash>.mlir, <module>-<hash>.options.pb (the CompileOptionsProto bytes)
// and index.tsv, one line a program: file, module, platform, num_replicas, num_partitions,
// strict_precision (0|1), bytes of text. The hash covers the text and the options, so a program
// compiled many times (or by several processes into one folder) is recorded once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/pjrt/compile_options.h"
#include "tlaloc/support/status.h"

namespace tlaloc::pjrt {

inline constexpr const char* kProgramsIndexFile = "index.tsv";

// TLALOC_PROGRAMS_DIR when set and non-empty, else TLALOC_TPU_PROGRAMS_DIR, else nothing.
std::optional<std::string> ProgramsDirFromEnvironment();

struct RecordedProgram {
  std::string file;      // the .mlir file's name inside the folder
  std::string module;    // the module's name (@name), or "program"
  std::string platform;  // the platform of the session that compiled it
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  bool strict_precision = false;
  int64_t bytes = 0;
  // The options file's name ("" when the index names none).
  std::string options_file;
};

// Records one compile under `dir` (created when missing). Errors name the file they could not
// write.
Status RecordProgram(const std::string& dir, const std::string& platform, const std::string& mlir,
                     const CompileOptions& options);

// The index of `dir`, each program once, in the order first recorded. Errors name
// index.tsv:LINE and what was expected.
StatusOr<std::vector<RecordedProgram>> ReadProgramIndex(const std::string& dir);
// The same over index text; `origin` names it in errors. options_file stays empty.
StatusOr<std::vector<RecordedProgram>> ParseProgramIndex(std::string_view text,
                                                         const std::string& origin);

// The name after `module @` in StableHLO text, or "program".
std::string ModuleNameOf(const std::string& mlir);

}  // namespace tlaloc::pjrt
