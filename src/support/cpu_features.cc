#include "tlaloc/support/cpu_features.h"

#include <cstdlib>
#include <string_view>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tlaloc {

namespace {

#if defined(__x86_64__)
// AMX needs the OS to save the tile state (XCR0 bits 17 and 18); __builtin_cpu_supports checks
// the AVX-512 state bits itself but knows no AMX on every compiler, so this reads XCR0 directly
// (safe here: callers have seen AVX-512, which implies OSXSAVE).
bool OsSavesAmxState() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  (void)hi;
  return (lo & (3u << 17)) == (3u << 17);
}
#endif

}  // namespace

CpuFeatures DetectCpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  {
    // From CPUID itself: clang 14's __builtin_cpu_supports knows no "f16c".
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d)) f.f16c = (c >> 29) & 1;  // ECX bit 29
  }
  f.avx512_core = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (f.avx512_core) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = (a >> 5) & 1;  // EAX bit 5
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
      const bool amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
      f.amx = amx_bf16 && amx_tile && OsSavesAmxState();
    }
  }
#endif
  return f;
}

CpuFeatures ApplyCpuOverride(CpuFeatures hardware, const char* vector_math) {
  if (vector_math != nullptr && std::string_view(vector_math) == "0")
    hardware.avx512_core = hardware.avx512_bf16 = hardware.amx = false;
  return hardware;
}

const CpuFeatures& KernelCpuFeatures() {
  static const CpuFeatures features =
      ApplyCpuOverride(DetectCpuFeatures(), std::getenv("TLALOC_VECTOR_MATH"));
  return features;
}

bool Avx512DisabledByEnvironment() {
  static const bool disabled = DetectCpuFeatures().avx512_core && !HasAvx512Core();
  return disabled;
}

}  // namespace tlaloc
