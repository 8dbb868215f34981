// StableHLO's conformance programs through Tlaloc's plugin, over the real C ABI, against the
// in-process interpreter: the same text must give bit-identical results (or fail on both).
// Each program runs in a forked child, so a crash or hang is reported, not fatal.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/pjrt/session.h"
#include "tlaloc/stablehlo/conformance.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc {
namespace {

constexpr double kTimeLimitSeconds = 60;

// One program: "SAME", "BOTH_FAIL", or "DIFF <why>" / "ONE_SIDED <why>".
std::string Compare(pjrt::PjrtSession& session, const std::filesystem::path& file) {
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
  auto exe = session.Compile(text);
  remote = exe.ok() ? session.Run(**exe, {}) : StatusOr<std::vector<Literal>>(exe.status());

  if (!local.ok() && !remote.ok()) return "BOTH_FAIL";
  if (local.ok() != remote.ok()) {
    return "ONE_SIDED " + (local.ok() ? "plugin: " + remote.status().ToString()
                                      : "in-process: " + local.status().ToString());
  }
  if (local->size() != remote->size()) return "DIFF output count";
  for (size_t i = 0; i < local->size(); ++i) {
    if (!(*local)[i].BitwiseEquals((*remote)[i])) return "DIFF output " + std::to_string(i);
  }
  return "SAME";
}

TEST(PluginConformance, SameResultsAsInProcess) {
  const std::filesystem::path dir = std::filesystem::path(TLALOC_SOURCE_DIR) / ".." / "shared" /
                                    "conformance" / "stablehlo-testdata";
  if (!std::filesystem::is_directory(dir)) {
    GTEST_SKIP() << "conformance programs not found at " << dir.string();
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

  pjrt::SessionOptions options;
  options.target = PjrtTarget::Path(TLALOC_PJRT_CPU_PLUGIN);
  auto session = pjrt::PjrtSession::Open(options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();

  std::map<std::string, int> counts;
  std::vector<std::string> problems;
  std::fflush(nullptr);
  for (const auto& file : files) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      alarm(static_cast<unsigned>(kTimeLimitSeconds) + 5);
      std::string line = Compare(**session, file);
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
  std::printf("\nplugin conformance: %zu programs:", files.size());
  for (auto& [k, n] : counts) std::printf(" %s=%d", k.c_str(), n);
  std::printf("\n");
  for (const std::string& p : problems) ADD_FAILURE() << p;
  EXPECT_GT(counts["SAME"], 0);
}

}  // namespace
}  // namespace tlaloc
