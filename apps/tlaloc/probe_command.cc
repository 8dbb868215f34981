// `tlaloc probe [-t N] [--json]`: what this machine can do, as the benchmarks measure it: its
// read bandwidth and the multiply-add peak of the units Tlaloc's products use for f32, bf16 and
// int8 (support/machine_probe.h), on N pinned threads. Scripts that time a peer (the fine-tune
// against PyTorch) take their shares of the machine from it.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_options.h"
#include "commands.h"
#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/machine_probe.h"
#include "tlaloc/support/thread_pool.h"

namespace tlaloc::cli {

namespace {

struct ProbeArgs {
  std::optional<int> threads;
  bool json = false;
};

int RunProbe(const ProbeArgs& a) {
  if (Status s = ApplyThreads(a.threads); !s.ok()) {
    std::fprintf(stderr, "tlaloc probe: %s\n", s.message().c_str());
    return ExitCodeForFlagError(s);
  }
  const int threads = DefaultThreadPool().size();
  const ProbeFigure read = ProbeReadBandwidth(threads);
  struct Peak {
    const char* dtype;
    ProbeFigure figure;
  };
  const Peak peaks[] = {{"f32", ProbePeakFlops(threads, PeakKind::kF32)},
                        {"bf16", ProbePeakFlops(threads, PeakKind::kBf16)},
                        {"int8", ProbePeakFlops(threads, PeakKind::kInt8)}};
  const CpuFeatures& cpu = KernelCpuFeatures();
  if (a.json) {
    auto figure = [](const ProbeFigure& f) {
      return nlohmann::json{{"median", f.median},
                            {"low", f.low},
                            {"high", f.high},
                            {"passes", f.passes},
                            {"what", f.what}};
    };
    nlohmann::json j;
    j["threads"] = threads;
    j["cpu"] = {{"avx2", cpu.avx2},
                {"avx512_core", cpu.avx512_core},
                {"avx512_bf16", cpu.avx512_bf16},
                {"amx", cpu.amx}};
    j["read_bytes_per_s"] = figure(read);
    for (const Peak& p : peaks) j["peak_flops_per_s"][p.dtype] = figure(p.figure);
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  std::printf("threads      %d (pinned one per CPU)\n", threads);
  std::printf("read         %.2f GB/s (median of %d passes, %.2f to %.2f; %s)\n", read.median / 1e9,
              read.passes, read.low / 1e9, read.high / 1e9, read.what.c_str());
  for (const Peak& p : peaks)
    std::printf("peak %-7s %.1f GFLOP/s (median of %d passes, %.1f to %.1f; %s)\n", p.dtype,
                p.figure.median / 1e9, p.figure.passes, p.figure.low / 1e9, p.figure.high / 1e9,
                p.figure.what.c_str());
  return kExitOk;
}

}  // namespace

void RegisterProbeCommand(CLI::App& app) {
  auto args = std::make_shared<ProbeArgs>();
  auto* cmd = app.add_subcommand(
      "probe", "Measure this machine: read bandwidth and multiply-add peaks (f32, bf16, int8)");
  AddThreadsOption(cmd, &args->threads);
  cmd->add_flag("--json", args->json, "print one JSON object");
  cmd->callback([args] { SetExitCode(RunProbe(*args)); });
}

}  // namespace tlaloc::cli
