#include "tlaloc/support/memory_bandwidth.h"

#include <algorithm>
#include <vector>

#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/machine_probe.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tlaloc {

namespace {

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

// The same on AVX2: eight 256-bit chains over four cache lines per step. (The portable loop's
// accumulators live in memory under -O2, a store-to-load round trip per 16 bytes: it read
// about 20 GB/s on a 2-core Zen 3 where llama.cpp's decode read 22.6.)
__attribute__((target("avx2"))) double SumAvx2(const float* p, int64_t b, int64_t e) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (int64_t i = b; i + 64 <= e; i += 64)
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_loadu_ps(p + i + 8 * j));
  for (int j = 1; j < 8; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  float out[8];
  _mm256_storeu_ps(out, acc[0]);
  double s = 0;
  for (float v : out) s += v;
  return s;
}
#endif

double Sum(const float* p, int64_t b, int64_t e) {
#if defined(__x86_64__)
  if (HasAvx512Core()) return SumAvx512(p, b, e);
  if (HasAvx2()) return SumAvx2(p, b, e);
#endif
  return SumPortable(p, b, e);
}

}  // namespace

ProbeFigure ProbeReadBandwidth(int threads, int64_t bytes, int passes) {
  threads = std::max(threads, 1);
  // Whole 128-float steps per thread, so the vector loop reads every byte counted.
  const int64_t per_thread = std::max<int64_t>(bytes / 4 / threads / 128, 1) * 128;
  std::vector<float> buf(per_thread * threads);
  std::vector<double> sums(threads, 0.0);
  auto seconds = TimePinnedPasses(
      threads, passes,
      [&](int t) {  // each thread first-touches its own slice (its NUMA node's memory)
        std::fill(buf.begin() + t * per_thread, buf.begin() + (t + 1) * per_thread, 1.0f);
      },
      [&](int t) { sums[t] += Sum(buf.data(), t * per_thread, (t + 1) * per_thread); });
  ProbeFigure f = RatesOf(static_cast<double>(per_thread) * threads * 4, seconds);
  // The sums are kept observable so the reads cannot be optimised away.
  double total = 0;
  for (double s : sums) total += s;
  if (total < 0) f.median = 0;
  f.what = "read of " + std::to_string(per_thread * threads * 4 >> 20) + " MiB";
  return f;
}

double MeasureReadBandwidth(ThreadPool& pool, int64_t bytes, int repeats) {
  return ProbeReadBandwidth(pool.size(), bytes, repeats).median;
}

}  // namespace tlaloc
