// `tlaloc inspect DIR [--json]`: architecture, config summary, parameter count, tensors by
// dtype, and the tensors the architecture expects but the checkpoint lacks (or has with another
// shape), and the other way round. Exit status: 0 when the checkpoint fits its config, 2 when
// it does not, 1 when the folder or a file in it cannot be read.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "tlaloc/io/inspect.h"

namespace tlaloc::cli {

namespace {

struct InspectOptions {
  std::string path;
  bool json = false;
  size_t max_listed = 20;
};

int RunInspect(const InspectOptions& options) {
  auto report = io::InspectCheckpoint(options.path);
  if (!report.ok()) {
    std::fprintf(stderr, "tlaloc inspect: %s\n", report.status().ToString().c_str());
    return 1;
  }
  std::string text = options.json ? io::FormatInspectJson(*report)
                                  : io::FormatInspectText(*report, options.max_listed);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return report->matches() ? 0 : 2;
}

}  // namespace

void RegisterInspectCommand(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  auto* cmd = app.add_subcommand(
      "inspect", "Summarise a Hugging Face checkpoint folder and check it against its config");
  cmd->add_option("DIR", options->path,
                  "Checkpoint folder (config.json, *.safetensors), or one .safetensors file")
      ->required();
  cmd->add_flag("--json", options->json, "Print a machine-readable JSON report");
  cmd->add_option("--max-listed", options->max_listed,
                  "How many missing/unexpected names to list in the text report")
      ->check(CLI::PositiveNumber);
  cmd->callback([options] { SetExitCode(RunInspect(*options)); });
}

}  // namespace tlaloc::cli
