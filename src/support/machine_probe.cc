// The pinned thread team the machine probes time their passes on.
#include "tlaloc/support/machine_probe.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <thread>

namespace tlaloc {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort: unpinned still runs
}

}  // namespace

std::vector<double> TimePinnedPasses(int threads, int passes,
                                     const std::function<void(int thread)>& setup,
                                     const std::function<void(int thread)>& body) {
  threads = std::max(threads, 1);
  const std::vector<int> cpus = AllowedCpus();
  cpu_set_t original;
  const bool restore = pthread_getaffinity_np(pthread_self(), sizeof(original), &original) == 0;
  std::barrier sync(threads);
  std::vector<double> seconds;
  auto run = [&](int t) {
    if (!cpus.empty()) PinTo(cpus[t % cpus.size()]);
    setup(t);
    for (int pass = -1; pass < passes; ++pass) {  // pass -1 warms caches, pages and clocks
      sync.arrive_and_wait();
      const double t0 = t == 0 ? Now() : 0;
      body(t);
      sync.arrive_and_wait();
      if (t == 0 && pass >= 0) seconds.push_back(Now() - t0);
    }
  };
  std::vector<std::thread> team;
  for (int t = 1; t < threads; ++t) team.emplace_back(run, t);
  run(0);
  for (auto& th : team) th.join();
  if (restore) pthread_setaffinity_np(pthread_self(), sizeof(original), &original);
  return seconds;
}

ProbeFigure RatesOf(double amount, const std::vector<double>& seconds) {
  ProbeFigure f;
  std::vector<double> rates;
  for (double s : seconds)
    if (s > 0) rates.push_back(amount / s);
  if (rates.empty()) return f;
  std::sort(rates.begin(), rates.end());
  const size_t n = rates.size();
  f.median = n % 2 ? rates[n / 2] : (rates[n / 2 - 1] + rates[n / 2]) / 2;
  f.low = rates.front();
  f.high = rates.back();
  f.passes = static_cast<int>(n);
  return f;
}

}  // namespace tlaloc
