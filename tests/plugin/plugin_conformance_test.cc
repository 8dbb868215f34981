// StableHLO's conformance programs through Tlaloc's plugin, over the real C ABI, against the
// in-process interpreter: the same text must give bit-identical results (or fail on both).
// TLALOC_TEST_PJRT_TARGET=cuda|tpu|PATH runs them through that plugin instead: its check calls
// are stripped (only Tlaloc knows check.expect_*), and floating results may differ within a
// small tolerance ("CLOSE": a relative 1e-3, or 2 ulp of bf16 and f16). On Tlaloc's plugin each
// program runs in a forked child, so a crash or hang is reported, not fatal; another plugin runs
// them in process (a CUDA context does not survive fork).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "pjrt/pjrt_test_util.h"
#include "testing/oracle.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/pjrt/session.h"
#include "tlaloc/stablehlo/conformance.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc {
namespace {

constexpr double kTimeLimitSeconds = 60;
// Another compiler may fuse and reorder float arithmetic; Tlaloc's plugin may not.
constexpr double kForeignTolerance = 1e-3;

// Drops the check.expect_* calls (they have no results), for plugins that do not know them.
std::string StripChecks(const std::string& text) {
  std::stringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find("stablehlo.custom_call @check.") == std::string::npos) out += line + "\n";
  }
  return out;
}

// A foreign compiler's tolerance for one float type: a relative 1e-3, or two units in the last
// place where the type is coarser (bf16's 8-bit significand cannot hold 1e-3).
double ForeignTolerance(ElementType et) {
  int digits = 24;  // significand bits, the implicit one included
  if (et == ElementType::kBF16) digits = 8;
  if (et == ElementType::kF16) digits = 11;
  if (et == ElementType::kF64) digits = 53;
  return std::max(kForeignTolerance, 2 * std::ldexp(1.0, 1 - digits));
}

// The largest relative difference between two same-typed float literals (NaN matching NaN), or
// -1 when they differ in type, NaN-ness or by more than `tolerance`.
double RelativeDifference(const Literal& a, const Literal& b, double tolerance) {
  if (!(a.type() == b.type()) || !IsFloat(a.element_type())) return -1;
  double worst = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    double x = a.GetAsDouble(i), y = b.GetAsDouble(i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return -1;
      continue;
    }
    if (x == y) continue;
    double d = std::fabs(x - y) / std::max(1.0, std::max(std::fabs(x), std::fabs(y)));
    if (!(d <= tolerance)) return -1;
    worst = std::max(worst, d);
  }
  return worst;
}

// The largest relative difference seen per float type among CLOSE programs.
std::map<std::string, double>& WorstCloseByType() {
  static std::map<std::string, double> worst;
  return worst;
}

// One program: "SAME", "CLOSE", "BOTH_FAIL", or "DIFF <why>" / "ONE_SIDED <why>".
std::string Compare(pjrt::PjrtSession& session, const std::filesystem::path& file, bool foreign) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();

  StatusOr<std::vector<Literal>> local = Internal("not run");
  auto module = ParseModule(text, file.filename().string());
  if (module.ok()) {
    InterpreterOptions options;
    auto recorder = std::make_shared<CheckRecorder>();
    AddConformanceChecks(options, recorder);
    local = Interpret(**module, "", {}, nullptr, options);
    if (local.ok() && recorder->failed() > 0) local = Internal("a check failed");
  } else {
    local = module.status();
  }
  StatusOr<std::vector<Literal>> remote = Internal("not run");
  auto exe = session.Compile(foreign ? StripChecks(text) : text);
  remote = exe.ok() ? session.Run(**exe, {}) : StatusOr<std::vector<Literal>>(exe.status());

  if (!local.ok() && !remote.ok()) return "BOTH_FAIL";
  if (local.ok() != remote.ok()) {
    return "ONE_SIDED " + (local.ok() ? "plugin: " + remote.status().ToString()
                                      : "in-process: " + local.status().ToString());
  }
  if (local->size() != remote->size()) return "DIFF output count";
  bool close = false;
  for (size_t i = 0; i < local->size(); ++i) {
    if ((*local)[i].BitwiseEquals((*remote)[i])) continue;
    const ElementType et = (*local)[i].element_type();
    const double d = foreign && IsFloat(et)
                         ? RelativeDifference((*local)[i], (*remote)[i], ForeignTolerance(et))
                         : -1;
    if (d < 0) return "DIFF output " + std::to_string(i);
    double& worst = WorstCloseByType()[std::string(ShortName(et))];
    worst = std::max(worst, d);
    close = true;
  }
  return close ? "CLOSE" : "SAME";
}

TEST(PluginConformance, SameResultsAsInProcess) {
  // TLALOC_CONFORMANCE_DIR for a checkout without the shared folder beside it (device runs).
  const char* dir_env = std::getenv("TLALOC_CONFORMANCE_DIR");
  const std::filesystem::path dir = dir_env && *dir_env
                                        ? std::filesystem::path(dir_env)
                                        : std::filesystem::path(TLALOC_SOURCE_DIR) / ".." /
                                              "shared" / "conformance" / "stablehlo-testdata";
  if (!std::filesystem::is_directory(dir)) {
    TL_ORACLE_MISSING("conformance programs not found at " << dir.string());
  }
  const char* filter = std::getenv("TLALOC_CONFORMANCE_FILTER");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".mlir" &&
        (!filter || e.path().filename().string().find(filter) != std::string::npos)) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());

  const pjrt::testing::Lane lane = pjrt::testing::TestLane();
  ASSERT_TRUE(lane.error.empty()) << lane.error;
  if (!lane.skip.empty()) GTEST_SKIP() << lane.skip;
  const bool foreign = !lane.is_tlaloc_plugin();
  pjrt::SessionOptions options;
  options.target = lane.target;
  auto session = pjrt::PjrtSession::Open(options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();

  std::map<std::string, int> counts;
  std::vector<std::string> problems, close_programs;
  std::fflush(nullptr);
  for (const auto& file : files) {
    // A GPU plugin's device context does not survive fork(): other plugins run in process.
    if (foreign) {
      const std::string out = Compare(**session, file, foreign);
      const std::string kind = out.substr(0, out.find(' '));
      ++counts[kind];
      if (kind == "DIFF" || kind == "ONE_SIDED") {
        problems.push_back(file.filename().string() + ": " + out);
      }
      if (kind == "CLOSE") close_programs.push_back(file.stem().string());
      continue;
    }
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      alarm(static_cast<unsigned>(kTimeLimitSeconds) + 5);
      std::string line = Compare(**session, file, foreign);
      ssize_t w = write(fds[1], line.data(), line.size());
      (void)w;
      _exit(0);
    }
    close(fds[1]);
    std::string out;
    auto start = std::chrono::steady_clock::now();
    bool timed_out = false;
    for (;;) {
      pollfd p{fds[0], POLLIN, 0};
      poll(&p, 1, 200);
      if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t r = read(fds[0], buf, sizeof(buf));
        if (r <= 0) break;
        out.append(buf, static_cast<size_t>(r));
      }
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
          kTimeLimitSeconds) {
        kill(pid, SIGKILL);
        timed_out = true;
        break;
      }
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (timed_out) out = "TIMEOUT";
    if (out.empty()) out = "CRASH";
    std::string kind = out.substr(0, out.find(' '));
    ++counts[kind];
    if (kind == "DIFF" || kind == "ONE_SIDED") {
      problems.push_back(file.filename().string() + ": " + out);
    }
  }
  std::printf("\nplugin conformance (%s, %s): %zu programs:", lane.target.ToString().c_str(),
              (*session)->platform_name().c_str(), files.size());
  for (auto& [k, n] : counts) std::printf(" %s=%d", k.c_str(), n);
  std::printf("\n");
  if (!close_programs.empty()) {
    std::printf("  CLOSE programs:");
    for (const std::string& name : close_programs) std::printf(" %s", name.c_str());
    std::printf("\n");
  }
  for (auto& [type, worst] : WorstCloseByType())
    std::printf("  CLOSE %s: largest relative difference %.3g (tolerance %.3g)\n", type.c_str(),
                worst, ForeignTolerance(*ElementTypeFromShortName(type)));
  for (const std::string& p : problems) ADD_FAILURE() << p;
  EXPECT_GT(counts["SAME"], 0);
}

}  // namespace
}  // namespace tlaloc
