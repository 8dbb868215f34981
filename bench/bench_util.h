// Shared by the benchmarks that time one prepared interpreter program per iteration.
#pragma once

#include <benchmark/benchmark.h>

#include <vector>

#include "tlaloc/interp/interpreter.h"

namespace tlaloc::bench {

// Runs `exe` on `args` once per benchmark iteration; a failed run ends the benchmark with its
// error instead of timing nothing.
inline void TimeExecutions(benchmark::State& state, const Executable& exe,
                           const std::vector<Literal>& args) {
  for (auto _ : state) {
    auto out = exe.Execute(args);
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(out->front().data());
  }
}

}  // namespace tlaloc::bench
