// The multiply-add peak probe: register-resident chains of the instructions Tlaloc's product
// kernels use, long enough that the loop's own cost vanishes. Independent accumulators (more
// than latency x ports) keep every FMA port busy, so the figure is the units' throughput.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/machine_probe.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tlaloc {

namespace {

constexpr int kChains = 12;  // > 4-cycle FMA latency x 2 ports on current x86 cores

double FmaPortable(int64_t iters) {
  float acc[kChains][8] = {};
  for (int64_t i = 0; i < iters; ++i)
    for (auto& chain : acc)
      for (float& a : chain) a = a * 0.999999f + 1e-6f;
  double s = 0;
  for (auto& chain : acc)
    for (float a : chain) s += a;
  return s;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) double FmaAvx2(int64_t iters) {
  __m256 acc[kChains];
  for (auto& a : acc) a = _mm256_setzero_ps();
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], x, y);
  float out[8];
  for (int j = 1; j < kChains; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  _mm256_storeu_ps(out, acc[0]);
  double s = 0;
  for (float v : out) s += v;
  return s;
}

// (Not _mm512_reduce_add_ps: GCC 12's header trips -Wuninitialized.)
TLALOC_AVX512_CORE_TARGET double SumLanes(__m512 v) {
  float out[16];
  _mm512_storeu_ps(out, v);
  double s = 0;
  for (float x : out) s += x;
  return s;
}

TLALOC_AVX512_CORE_TARGET double FmaAvx512(int64_t iters) {
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], x, y);
  for (int j = 1; j < kChains; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return SumLanes(acc[0]);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))) double DotBf16(
    int64_t iters) {
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512 small = _mm512_set1_ps(1e-3f);
  const __m512bh x = _mm512_cvtne2ps_pbh(small, small);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], x, x);
  for (int j = 1; j < kChains; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return SumLanes(acc[0]);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"))) double DotInt8(
    int64_t iters) {
  __m512i acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_si512();
  const __m512i x = _mm512_set1_epi8(1);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], x, x);
  for (int j = 1; j < kChains; ++j) acc[0] = _mm512_add_epi32(acc[0], acc[j]);
  int32_t out[16];
  _mm512_storeu_si512(out, acc[0]);
  double s = 0;
  for (int32_t v : out) s += v;
  return s;
}

// AMX: four 16x16 f32 accumulator tiles fed by two A and two B tiles (16 x 32 bf16 each).
struct TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Linux lends a process the AMX tile state only on request (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA); without it the first tile instruction traps.
bool AmxPermitted() {
  static const bool permitted =
      syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
  return permitted;
}

__attribute__((target("amx-tile,amx-bf16"))) double AmxBf16(int64_t iters) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = 16;
    config.colsb[t] = 64;
  }
  _tile_loadconfig(&config);
  alignas(64) uint16_t operand[16 * 32];
  for (uint16_t& v : operand) v = 0x3a83;  // bf16 1e-3
  alignas(64) float out[16 * 16];
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  double s = 0;
  _tile_stored(0, out, 64);
  for (float v : out) s += v;
  _tile_release();
  return s;
}
#endif

struct Unit {
  const char* what;
  double flops_per_iter;  // per thread
  int64_t iters;
  double (*run)(int64_t);
};

Unit PickUnit(PeakKind kind) {
#if defined(__x86_64__)
  if (kind == PeakKind::kBf16) {
    if (HasAmx() && AmxPermitted())
      return {"AMX bf16 tiles", 4.0 * 16 * 16 * 32 * 2, 200000, AmxBf16};
    if (HasAvx512Bf16())
      return {"AVX512-BF16 dot products", kChains * 16 * 2 * 2.0, 2000000, DotBf16};
  }
  if (kind == PeakKind::kInt8 && HasAvx512Core() && __builtin_cpu_supports("avx512vnni"))
    return {"AVX512-VNNI int8 dot products", kChains * 16 * 4 * 2.0, 2000000, DotInt8};
  if (HasAvx512Core()) return {"AVX-512 FMA", kChains * 16 * 2.0, 2000000, FmaAvx512};
  if (HasAvx2()) return {"AVX2 FMA", kChains * 8 * 2.0, 2000000, FmaAvx2};
#endif
  (void)kind;
  return {"portable multiply-add", kChains * 8 * 2.0, 200000, FmaPortable};
}

}  // namespace

ProbeFigure ProbePeakFlops(int threads, PeakKind kind, int passes) {
  const Unit unit = PickUnit(kind);
  std::vector<double> sink(std::max(threads, 1), 0.0);
  auto seconds = TimePinnedPasses(
      threads, passes, [](int) {}, [&](int t) { sink[t] += unit.run(unit.iters); });
  ProbeFigure f = RatesOf(unit.flops_per_iter * unit.iters * std::max(threads, 1), seconds);
  double total = 0;
  for (double s : sink) total += s;
  if (!(total == total)) f.median = 0;  // kept observable: the chains cannot be dropped
  f.what = unit.what;
  return f;
}

}  // namespace tlaloc
