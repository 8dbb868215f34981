// Same-run probes of what this machine can do, so benchmarks give their speeds as shares of it
// (decode's weight reads against the read bandwidth, prefill's multiply-adds against the peak
// rate of the units its kernels use) and a regression shows as a share, not a guess.
//
// Each probe runs on `threads` threads pinned one per allowed CPU (as the interpreter's pool
// runs the model), repeats its pass and reports the median with the spread: a wide spread says
// the machine was not quiet, and a share above 100% says the probe is wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tlaloc {

struct ProbeFigure {
  double median = 0, low = 0, high = 0;  // per second, over the timed passes
  int passes = 0;
  std::string what;  // what was measured (the instructions, the buffer)
  // (high - low) / median: the spread of the passes.
  double spread() const { return median > 0 ? (high - low) / median : 0; }
};

// Bytes per second read from a buffer of `bytes` (far larger than the caches).
ProbeFigure ProbeReadBandwidth(int threads, int64_t bytes = int64_t{256} << 20, int passes = 9);

enum class PeakKind { kF32, kBf16, kInt8 };
// Multiply-add rate (2 operations each) of the widest units Tlaloc's kernels use for products of
// this type here: f32 on AVX-512 (else AVX2) FMAs; bf16 on AMX tiles where the CPU has them
// (oneDNN picks them), else AVX512-BF16 dot products, else as f32 (the products are widened);
// int8 (the q8_0 form's s8 x s8 blocks) on AVX512-VNNI dot products, else as f32.
ProbeFigure ProbePeakFlops(int threads, PeakKind kind, int passes = 7);

// Runs `passes` timed passes of body(thread) on `threads` threads pinned one per allowed CPU,
// after setup(thread) and one untimed pass; returns each pass's wall seconds. The calling
// thread is thread 0.
std::vector<double> TimePinnedPasses(int threads, int passes,
                                     const std::function<void(int thread)>& setup,
                                     const std::function<void(int thread)>& body);

// The median, low and high of `amount` / seconds over passes.
ProbeFigure RatesOf(double amount, const std::vector<double>& seconds);

}  // namespace tlaloc
