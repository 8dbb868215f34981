#include "tlaloc/support/memory_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "tlaloc/support/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tlaloc {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double SumPortable(const float* p, int64_t b, int64_t e) {
  float acc[16] = {};
  for (int64_t i = b; i + 16 <= e; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += p[i + j];
  double s = 0;
  for (float a : acc) s += a;
  return s;
}

#if defined(__x86_64__)
// Eight independent vector chains over two cache lines per step: bound by the reads alone,
// not by add latency.
TLALOC_AVX512_CORE_TARGET double SumAvx512(const float* p, int64_t b, int64_t e) {
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int64_t i = b; i + 128 <= e; i += 128)
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) acc[j] = _mm512_add_ps(acc[j], _mm512_loadu_ps(p + i + 16 * j));
  for (int j = 1; j < 8; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  float out[16];
  _mm512_storeu_ps(out, acc[0]);
  double s = 0;
  for (float v : out) s += v;
  return s;
}
#endif

double Sum(const float* p, int64_t b, int64_t e) {
#if defined(__x86_64__)
  if (HasAvx512Core()) return SumAvx512(p, b, e);
#endif
  return SumPortable(p, b, e);
}

}  // namespace

double MeasureReadBandwidth(ThreadPool& pool, int64_t bytes, int repeats) {
  const int64_t n = std::max<int64_t>(bytes / 4, 1024);
  std::vector<float> buf(n, 1.0f);
  std::atomic<double> sink{0};
  double best = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    const double t0 = Now();
    pool.ParallelFor(n, (n + pool.size() - 1) / pool.size(), [&](int64_t b, int64_t e) {
      const double s = Sum(buf.data(), b, e);
      sink = sink + s;
    });
    best = std::max(best, static_cast<double>(n) * 4 / (Now() - t0));
  }
  // The sum is kept observable so the reads cannot be optimised away.
  if (sink.load() < 0) best = 0;
  return best;
}

}  // namespace tlaloc
