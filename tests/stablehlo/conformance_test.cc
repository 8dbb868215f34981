// Runs StableHLO's self-checking conformance programs (../shared/conformance/stablehlo-testdata)
// through parse -> verify -> interpret, each in a forked child with a time limit so a crash or
// hang in one op is contained and reported. Prints passed / failed / unsupported counts and a
// per-op-area table; fails if any program crashes or hangs, if a program that parses does not
// print back to the same text (parse -> print -> parse -> print), if a program outside
// conformance_expected_failures.txt does not pass, or if a program in that list passes (the
// list pins the expected set, so it only shrinks).
//
// TLALOC_CONFORMANCE_FILTER=substring limits the run to matching file names.
#include "tlaloc/stablehlo/conformance.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "testing/oracle.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc {
namespace {

// The programs of ../shared/conformance/stablehlo-testdata (its README): a smaller folder
// must fail rather than pass with fewer programs.
constexpr size_t kProgramCount = 1009;
constexpr int kParallelChildren = 2;
constexpr double kTimeLimitSeconds = 60;

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string OneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

// The op area a program exercises, from the op names in its text: the least incidental area
// present (broadcast/reshape/convert appear everywhere and only count when nothing else does).
std::string OpArea(const std::string& text) {
  static const std::set<std::string> data_movement = {
      "broadcast_in_dim", "reshape", "transpose", "slice",  "dynamic_slice", "dynamic_update_slice",
      "concatenate",      "pad",     "reverse",   "gather", "scatter"};
  static const std::set<std::string> reduction = {"dot_general", "reduce", "reduce_window",
                                                  "select_and_scatter", "sort"};
  static const std::set<std::string> control_flow = {"while", "case", "if", "rng_bit_generator",
                                                     "optimization_barrier"};
  static const std::set<std::string> incidental = {"constant",         "return",  "custom_call",
                                                   "broadcast_in_dim", "reshape", "convert"};
  static const std::regex op_re(R"(\b(stablehlo|chlo)\.([a-z_0-9]+))");
  std::set<std::string> areas;
  bool only_incidental = true;
  std::set<std::string> incidental_areas;
  for (std::sregex_iterator it(text.begin(), text.end(), op_re), end; it != end; ++it) {
    std::string dialect = (*it)[1], op = (*it)[2];
    std::string area = dialect == "chlo"                                           ? "chlo"
                       : reduction.count(op)                                       ? "reduction"
                       : control_flow.count(op)                                    ? "control_flow"
                       : data_movement.count(op)                                   ? "data_movement"
                       : op == "constant" || op == "return" || op == "custom_call" ? ""
                                                                                   : "elementwise";
    if (area.empty()) continue;
    if (incidental.count(op)) {
      incidental_areas.insert(area);
    } else {
      only_incidental = false;
      areas.insert(area);
    }
  }
  if (only_incidental) areas = incidental_areas;
  for (const char* a : {"chlo", "reduction", "control_flow", "data_movement", "elementwise"})
    if (areas.count(a)) return a;
  return "constants_only";  // main only returns constants or its inputs
}

// conformance_expected_failures.txt: file name -> why it does not pass.
std::map<std::string, std::string> ExpectedFailures() {
  const std::filesystem::path p = std::filesystem::path(TLALOC_SOURCE_DIR) / "tests" / "stablehlo" /
                                  "conformance_expected_failures.txt";
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << "cannot read the expected-failure list " << p.string();
  std::map<std::string, std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t sp = line.find_first_of(" \t");
    std::string name = line.substr(0, sp);
    std::string why = sp == std::string::npos ? "" : line.substr(sp);
    why.erase(0, why.find_first_not_of(" \t"));
    EXPECT_FALSE(why.empty()) << p.string() << ": " << name << " gives no reason";
    EXPECT_TRUE(out.emplace(name, why).second) << p.string() << ": " << name << " is listed twice";
  }
  return out;
}

struct Outcome {
  std::string status;  // PASS FAIL UNSUPPORTED CRASH HANG
  std::string detail;
  std::string roundtrip;  // OK, DIFF, or NA
};

// Runs in the child: one line "STATUS\tDETAIL\tROUNDTRIP".
std::string RunProgram(const std::filesystem::path& path) {
  std::string text = ReadFile(path);
  auto module = ParseModule(text, path.filename().string());
  if (!module.ok()) {
    bool unsupported = module.status().code() == StatusCode::kUnimplemented;
    return std::string(unsupported ? "UNSUPPORTED" : "FAIL") +
           "\tparse: " + OneLine(module.status().message()) + "\tNA";
  }
  std::string roundtrip = "OK";
  {
    std::string once = PrintModule(**module);
    auto again = ParseModule(once, "printed");
    if (!again.ok() || PrintModule(**again) != once) roundtrip = "DIFF";
  }
  auto recorder = std::make_shared<CheckRecorder>();
  InterpreterOptions options;
  options.num_threads = 1;
  AddConformanceChecks(options, recorder);
  std::shared_ptr<const Module> shared(std::move(*module));
  auto exe = Executable::Prepare(shared, "main", options);
  if (!exe.ok()) {
    bool unsupported = exe.status().code() == StatusCode::kUnimplemented;
    return std::string(unsupported ? "UNSUPPORTED" : "FAIL") +
           "\tprepare: " + OneLine(exe.status().message()) + "\t" + roundtrip;
  }
  auto out = (*exe)->Execute({});
  if (!out.ok()) {
    bool unsupported = out.status().code() == StatusCode::kUnimplemented;
    return std::string(unsupported ? "UNSUPPORTED" : "FAIL") +
           "\trun: " + OneLine(out.status().message()) + "\t" + roundtrip;
  }
  auto results = recorder->results();
  if (results.empty()) return "FAIL\tno check ran\t" + roundtrip;
  for (const auto& r : results)
    if (!r.passed) return "FAIL\t" + OneLine(r.message) + "\t" + roundtrip;
  return "PASS\t" + std::to_string(results.size()) + " check(s)\t" + roundtrip;
}

struct Child {
  pid_t pid;
  int fd;
  size_t index;
  std::chrono::steady_clock::time_point start;
  std::string buffer;
};

Outcome Finish(Child& c, bool timed_out) {
  int status = 0;
  if (timed_out) kill(c.pid, SIGKILL);
  waitpid(c.pid, &status, 0);
  close(c.fd);
  if (timed_out) return {"HANG", "no result within the time limit", "NA"};
  if (WIFSIGNALED(status))
    return {"CRASH", std::string("signal ") + strsignal(WTERMSIG(status)), "NA"};
  std::string line = c.buffer;
  while (!line.empty() && line.back() == '\n') line.pop_back();
  size_t t1 = line.find('\t'), t2 = line.rfind('\t');
  if (t1 == std::string::npos || t2 == t1)
    return {"CRASH", "child exited without a result (status " + std::to_string(status) + ")", "NA"};
  return {line.substr(0, t1), line.substr(t1 + 1, t2 - t1 - 1), line.substr(t2 + 1)};
}

TEST(Conformance, StableHloTestdata) {
  const std::filesystem::path dir = std::filesystem::path(TLALOC_SOURCE_DIR) / ".." / "shared" /
                                    "conformance" / "stablehlo-testdata";
  if (!std::filesystem::is_directory(dir))
    TL_ORACLE_MISSING("conformance programs not found at " << dir.string());
  const char* filter = std::getenv("TLALOC_CONFORMANCE_FILTER");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".mlir" &&
        (!filter || e.path().filename().string().find(filter) != std::string::npos))
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());

  std::vector<Outcome> outcomes(files.size());
  std::vector<Child> running;
  size_t next = 0;
  std::fflush(nullptr);
  while (next < files.size() || !running.empty()) {
    while (next < files.size() && static_cast<int>(running.size()) < kParallelChildren) {
      int fds[2];
      ASSERT_EQ(pipe(fds), 0);
      pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        close(fds[0]);
        alarm(static_cast<unsigned>(kTimeLimitSeconds) + 5);  // belt and braces
        std::string line = RunProgram(files[next]) + "\n";
        size_t off = 0;
        while (off < line.size()) {
          ssize_t w = write(fds[1], line.data() + off, line.size() - off);
          if (w <= 0) break;
          off += static_cast<size_t>(w);
        }
        _exit(0);
      }
      close(fds[1]);
      running.push_back({pid, fds[0], next, std::chrono::steady_clock::now(), ""});
      ++next;
    }
    std::vector<pollfd> pfds;
    for (const auto& c : running) pfds.push_back({c.fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), 100);
    for (size_t i = running.size(); i-- > 0;) {
      Child& c = running[i];
      bool done = false;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t r = read(c.fd, buf, sizeof(buf));
        if (r > 0)
          c.buffer.append(buf, static_cast<size_t>(r));
        else
          done = true;
      }
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
      if (done || elapsed > kTimeLimitSeconds) {
        outcomes[c.index] = Finish(c, !done);
        running.erase(running.begin() + static_cast<long>(i));
      }
    }
  }

  // Report.
  std::map<std::string, int> totals;
  std::map<std::string, std::map<std::string, int>> by_area;
  std::map<std::string, std::map<std::string, int>> reasons;  // area -> reason -> count
  int roundtrip_diffs = 0;
  std::ofstream report(std::string(TLALOC_BINARY_DIR) + "/conformance_report.tsv");
  for (size_t i = 0; i < files.size(); ++i) {
    const Outcome& o = outcomes[i];
    std::string area = OpArea(ReadFile(files[i]));
    ++totals[o.status];
    ++by_area[area][o.status];
    if (o.status != "PASS") {
      // Group reasons by their text up to the first digit-bearing detail.
      std::string why = o.detail;
      static const std::regex unknown_op(R"(unknown operation '([^']+)')");
      std::smatch m;
      if (std::regex_search(o.detail, m, unknown_op)) {
        why = "missing op " + m[1].str();
      } else {
        why = why.substr(0, 80);
      }
      ++reasons[area][o.status + ": " + why];
    }
    if (o.roundtrip == "DIFF") {
      ++roundtrip_diffs;
      std::printf("round trip differs: %s\n", files[i].filename().c_str());
    }
    if (o.status == "CRASH" || o.status == "HANG")
      std::printf("%s: %s (%s)\n", o.status.c_str(), files[i].filename().c_str(), o.detail.c_str());
    report << files[i].filename().string() << '\t' << area << '\t' << o.status << '\t' << o.detail
           << '\t' << o.roundtrip << '\n';
  }
  std::printf(
      "\nconformance: %zu programs: %d passed, %d failed, %d unsupported, %d crashed, "
      "%d hung; %d round-trip differences\n",
      files.size(), totals["PASS"], totals["FAIL"], totals["UNSUPPORTED"], totals["CRASH"],
      totals["HANG"], roundtrip_diffs);
  std::printf("%-14s %7s %7s %11s %7s %5s\n", "area", "passed", "failed", "unsupported", "crashed",
              "hung");
  for (const auto& [area, counts] : by_area) {
    // Clang 14 cannot capture structured bindings: bind a reference explicitly.
    auto get = [&counts = counts](const char* k) {
      auto it = counts.find(k);
      return it == counts.end() ? 0 : it->second;
    };
    std::printf("%-14s %7d %7d %11d %7d %5d\n", area.c_str(), get("PASS"), get("FAIL"),
                get("UNSUPPORTED"), get("CRASH"), get("HANG"));
  }
  std::printf("\nmost common reasons per area:\n");
  for (const auto& [area, rs] : reasons) {
    std::vector<std::pair<int, std::string>> sorted;
    for (const auto& [r, n] : rs) sorted.push_back({-n, r});
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size() && i < 6; ++i)
      std::printf("  %-14s %4d  %s\n", area.c_str(), -sorted[i].first, sorted[i].second.c_str());
  }
  std::fflush(stdout);

  EXPECT_EQ(totals["CRASH"], 0) << "programs crashed (see above)";
  EXPECT_EQ(totals["HANG"], 0) << "programs hung (see above)";
  EXPECT_EQ(roundtrip_diffs, 0) << "programs whose printed text does not read back the same";
  // Pin the expected set: every program passes except the listed ones, which must not.
  const std::map<std::string, std::string> expected = ExpectedFailures();
  std::set<std::string> seen;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string name = files[i].filename().string();
    const Outcome& o = outcomes[i];
    seen.insert(name);
    auto it = expected.find(name);
    if (it == expected.end()) {
      EXPECT_EQ(o.status, "PASS") << name << " does not pass: " << o.detail
                                  << " (fix it, or list it with its reason in "
                                     "tests/stablehlo/conformance_expected_failures.txt)";
    } else {
      EXPECT_NE(o.status, "PASS") << name << " passes now; it is listed as expected to fail ("
                                  << it->second << "): delete its line from "
                                  << "tests/stablehlo/conformance_expected_failures.txt";
    }
  }
  if (!filter) {
    EXPECT_GE(files.size(), kProgramCount) << "programs in " << dir.string();
    for (const auto& [name, why] : expected)
      EXPECT_TRUE(seen.count(name)) << name << " is listed in conformance_expected_failures.txt "
                                    << "but is not among the programs: delete its line";
  }
}

}  // namespace
}  // namespace tlaloc
