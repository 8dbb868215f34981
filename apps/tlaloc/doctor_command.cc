// tlaloc doctor: what each PJRT target resolves to and why, and (with --load) what the plugin
// reports when a session opens: API version, platform, devices, attributes.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "commands.h"
#include "tlaloc/interp/multi_device.h"
#include "tlaloc/pjrt/session.h"
#include "tlaloc/runtime/target.h"

namespace tlaloc::cli {

namespace {

struct DoctorArgs {
  bool load = false;
  std::string target;  // empty: cpu, cuda and tpu
};

void PrintEnv(const char* name) {
  const char* v = std::getenv(name);
  std::printf("  %-28s %s\n", name, v ? v : "(unset)");
}

// Prints what `target` resolves to (and, with `load`, what its session reports); false when
// no plugin resolves or its session does not open.
bool Probe(const PjrtTarget& target, bool load) {
  PluginResolution r = ResolvePjrtPlugin(target, ResolveEnvironment::Process());
  std::printf("\ntarget %s: %s\n", target.ToString().c_str(),
              r.found() ? r.path.c_str() : "NOT FOUND");
  for (const std::string& line : r.trace) std::printf("  - %s\n", line.c_str());
  if (!r.found()) return false;
  if (!load) return true;
  pjrt::SessionOptions options;
  options.target = target;
  options.plugin_path = r.path;
  auto session = pjrt::PjrtSession::Open(options);
  if (!session.ok()) {
    std::printf("  session: FAILED: %s\n", session.status().ToString().c_str());
    return false;
  }
  const auto& s = **session;
  std::printf("  PJRT C API %d.%d, platform '%s' %s\n", s.api().major_version(),
              s.api().minor_version(), s.platform_name().c_str(), s.platform_version().c_str());
  for (const auto& o : s.create_options()) std::printf("  create option %s\n", o.name.c_str());
  for (const auto& [k, v] : s.attributes())
    std::printf("  attribute %s = %s\n", k.c_str(), v.c_str());
  std::printf("  %zu device(s)\n", s.devices().size());
  for (const auto& d : s.devices()) std::printf("  device %d: %s\n", d.id, d.kind.c_str());
  return true;
}

// The interpreter's devices: threads of this process, as many as TLALOC_CPU_DEVICES says.
void ProbeInterpreter() {
  auto n = CpuDevicesFromEnvironment();
  if (!n.ok()) {
    std::printf("\ntarget interp: %s\n", n.status().message().c_str());
    return;
  }
  std::printf(
      "\ntarget interp: %d device(s) (TLALOC_CPU_DEVICES; finetune --mesh without it "
      "gets the mesh's size)\n",
      *n);
  for (int d = 0; d < *n; ++d) std::printf("  device %d: interpreter\n", d);
}

int RunDoctor(const DoctorArgs& args) {
  std::printf("environment:\n");
  for (const char* name :
       {"TLALOC_TARGET", "TLALOC_PJRT_PLUGIN_PATH", "TLALOC_TEST_PJRT_TARGET", "TLALOC_CPU_DEVICES",
        "TPU_PREMAPPED_BUFFER_SIZE", "VIRTUAL_ENV", "HOME"}) {
    PrintEnv(name);
  }
  auto choice = DefaultBackendChoice();
  std::printf("default backend: %s\n",
              choice.ok() ? choice->ToString().c_str() : choice.status().ToString().c_str());
  if (!args.target.empty()) {
    auto t = ParsePjrtTarget(args.target);
    if (!t.ok()) {
      std::fprintf(stderr, "tlaloc doctor: %s\n", t.status().ToString().c_str());
      return kExitUsage;
    }
    // One target asked for by name: a plugin that does not resolve or open is a failure (the
    // listing of all targets below is a report, where missing accelerators are normal).
    if (Probe(*t, args.load)) return kExitOk;
    std::fprintf(stderr, "tlaloc doctor: target %s %s\n", t->ToString().c_str(),
                 args.load ? "did not resolve to a plugin that opens" : "resolves to no plugin");
    return kExitFailure;
  }
  ProbeInterpreter();
  for (const PjrtTarget& t :
       {PjrtTarget::Cpu(), PjrtTarget::XlaCpu(), PjrtTarget::Cuda(), PjrtTarget::Tpu()}) {
    Probe(t, args.load);
  }
  return 0;
}

}  // namespace

void RegisterDoctorCommand(CLI::App& app) {
  auto args = std::make_shared<DoctorArgs>();
  CLI::App* cmd = app.add_subcommand(
      "doctor", "Show what each PJRT target (cpu, xla-cpu, cuda, tpu) resolves to");
  cmd->add_flag("--load", args->load, "Open a session on each plugin found and report it");
  cmd->add_option("--target", args->target,
                  "Only this target: cpu, xla-cpu, cuda, tpu or a plugin path");
  cmd->callback([args] { SetExitCode(RunDoctor(*args)); });
}

}  // namespace tlaloc::cli
