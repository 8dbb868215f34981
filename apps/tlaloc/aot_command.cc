// tlaloc aot: compiles the programs a session recorded (TLALOC_PROGRAMS_DIR) for a plugin's
// topology, with no client and no device, and writes summary.tsv and errors/ (pjrt/aot.h).
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "tlaloc/pjrt/aot.h"
#include "tlaloc/runtime/target.h"

namespace tlaloc::cli {

namespace {

struct AotArgs {
  std::string plugin;
  std::string topology;
  std::string dir;
  std::string out;
  bool strict_precision = false;
  bool tpu_form = false;
  std::vector<std::string> topology_options;  // KEY=VALUE
  std::string target_config;                  // a file: the create option target_config
};

int RunAotCommand(const AotArgs& args) {
  auto target = ParsePjrtTarget(args.plugin);
  if (!target.ok()) {
    std::fprintf(stderr, "tlaloc aot: --plugin: %s\n", target.status().message().c_str());
    return kExitUsage;
  }
  std::string path = target->path;
  if (target->kind != PjrtTarget::Kind::kPath) {
    PluginResolution r = ResolvePjrtPlugin(*target, ResolveEnvironment::Process());
    if (!r.found()) {
      std::fprintf(stderr, "tlaloc aot: --plugin %s: %s\n", args.plugin.c_str(),
                   r.ToStatus().message().c_str());
      return kExitFailure;
    }
    path = r.path;
  }
  auto api = pjrt::PjrtApi::Load(path);
  if (!api.ok()) {
    std::fprintf(stderr, "tlaloc aot: %s\n", api.status().ToString().c_str());
    return kExitFailure;
  }
  std::string out = args.out;
  if (out.empty()) {
    std::string name = args.topology;
    for (char& c : name) {
      if (c == ':' || c == '/') c = '_';
    }
    out = args.dir + "/aot-" + name;
  }
  std::map<std::string, std::string> options;
  for (const std::string& kv : args.topology_options) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "tlaloc aot: --topology-option '%s': expected KEY=VALUE\n", kv.c_str());
      return kExitUsage;
    }
    options[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!args.target_config.empty()) {
    std::ifstream in(args.target_config, std::ios::binary);
    if (!in) {
      std::fprintf(stderr,
                   "tlaloc aot: --target-config %s: cannot read it (expected a "
                   "GpuTargetConfigProto in text form)\n",
                   args.target_config.c_str());
      return kExitUsage;
    }
    std::stringstream text;
    text << in.rdbuf();
    options["target_config"] = text.str();
  }
  auto report = pjrt::RunAot(*api, args.topology, args.dir, out, args.strict_precision,
                             args.tpu_form, options);
  if (!report.ok()) {
    std::fprintf(stderr, "tlaloc aot: %s\n", report.status().ToString().c_str());
    return kExitFailure;
  }
  for (const pjrt::AotRow& r : report->rows) {
    if (r.ok) {
      std::printf("ok       %-48s %12lld bytes (args %lld, out %lld, alias %lld, temp %lld) %s\n",
                  r.program.c_str(), static_cast<long long>(r.total_bytes()),
                  static_cast<long long>(r.stats.argument_bytes),
                  static_cast<long long>(r.stats.output_bytes),
                  static_cast<long long>(r.stats.alias_bytes),
                  static_cast<long long>(r.stats.temp_bytes), r.collectives.c_str());
    } else {
      std::printf("REFUSED  %-48s %s\n", r.program.c_str(), r.error.substr(0, 200).c_str());
    }
  }
  std::printf(
      "tlaloc aot: %zu program(s) for topology %s (platform %s), %d refused; %s/summary.tsv\n",
      report->rows.size(), args.topology.c_str(), report->platform.c_str(), report->refused(),
      out.c_str());
  return report->refused() == 0 ? kExitOk : kExitFailure;
}

}  // namespace

void RegisterAotCommand(CLI::App& app) {
  auto args = std::make_shared<AotArgs>();
  CLI::App* cmd = app.add_subcommand(
      "aot", "Compile recorded programs (TLALOC_PROGRAMS_DIR) for a plugin's topology, no device");
  cmd->add_option("--plugin", args->plugin, "The plugin: cpu, xla-cpu, cuda, tpu or a plugin path")
      ->required();
  cmd->add_option(
         "--topology", args->topology,
         "The topology to compile for: cpu:N (Tlaloc's plugin), v6e:2x2 (libtpu), 1x1x1 (XLA:CUDA)")
      ->required();
  cmd->add_option("--out", args->out, "Where summary.tsv and errors/ go (default DIR/aot-NAME)");
  cmd->add_flag("--strict-precision", args->strict_precision,
                "Compile every program with xla_allow_excess_precision = false");
  cmd->add_flag("--tpu-form", args->tpu_form,
                "Print every program as a TPU session sends it (f32 dots at precision HIGHEST)");
  cmd->add_option("--topology-option", args->topology_options,
                  "KEY=VALUE, a create option of the topology (repeatable)");
  cmd->add_option("--target-config", args->target_config,
                  "XLA:CUDA: a GpuTargetConfigProto text file (the GPU compiled for, none needed; "
                  "scripts/bringup/cuda_target_config.py extracts the plugin's own)");
  cmd->add_option("DIR", args->dir, "The recorded programs' folder")->required();
  cmd->callback([args] { SetExitCode(RunAotCommand(*args)); });
}

}  // namespace tlaloc::cli
