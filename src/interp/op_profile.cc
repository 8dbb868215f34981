#include "op_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace tlaloc::interp {

namespace {

struct OpTotals {
  int64_t calls = 0;
  double seconds = 0;
  int64_t bytes = 0;
};

struct Profile {
  std::mutex mu;
  std::unordered_map<std::string, OpTotals> by_op;
};

Profile& TheProfile() {
  static Profile* profile = new Profile;  // outlives the static destructors that print it
  return *profile;
}

void PrintProfile() {
  Profile& p = TheProfile();
  std::lock_guard<std::mutex> lock(p.mu);
  std::vector<std::pair<std::string, OpTotals>> rows(p.by_op.begin(), p.by_op.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (const auto& r : rows) total += r.second.seconds;
  std::fprintf(stderr, "tlaloc profile: %.3f s in %zu op kinds (self time, all runs)\n", total,
               rows.size());
  std::fprintf(stderr, "  %-44s %10s %9s %7s %10s %9s\n", "op", "calls", "seconds", "share",
               "us/call", "GB/s out");
  auto print_row = [&](const std::string& name, const OpTotals& t) {
    std::fprintf(stderr, "  %-44s %10lld %9.3f %6.1f%% %10.1f %9.2f\n", name.c_str(),
                 static_cast<long long>(t.calls), t.seconds,
                 total > 0 ? 100.0 * t.seconds / total : 0.0,
                 t.calls > 0 ? 1e6 * t.seconds / t.calls : 0.0,
                 t.seconds > 0 ? t.bytes / t.seconds / 1e9 : 0.0);
  };
  // Kinds under 0.1% of the time share one row, so the table stays short and its call counts
  // still add up to every op executed.
  OpTotals rest;
  int rest_kinds = 0;
  for (const auto& [name, t] : rows) {
    if (t.seconds < total * 0.001 && &name != &rows.front().first) {
      rest.calls += t.calls;
      rest.seconds += t.seconds;
      rest.bytes += t.bytes;
      ++rest_kinds;
      continue;
    }
    print_row(name, t);
  }
  if (rest_kinds > 0)
    print_row("(" + std::to_string(rest_kinds) + " more kinds, each < 0.1%)", rest);
}

}  // namespace

int OpProfilingLevel() {
  static const int level = [] {
    const char* env = std::getenv("TLALOC_PROFILE");
    if (!env || !*env || std::strcmp(env, "0") == 0) return 0;
    std::atexit(PrintProfile);
    return std::strcmp(env, "2") == 0 ? 2 : 1;
  }();
  return level;
}

void RecordOpTime(const std::string& key, double self_seconds, int64_t result_bytes) {
  Profile& p = TheProfile();
  std::lock_guard<std::mutex> lock(p.mu);
  OpTotals& t = p.by_op[key];
  ++t.calls;
  t.seconds += self_seconds;
  t.bytes += result_bytes;
}

}  // namespace tlaloc::interp
