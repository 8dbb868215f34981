// The CPU features Tlaloc's kernels dispatch on, detected once per process. Every run-time
// choice of an AVX-512 kernel (vector math, the matrix-vector kernel, fused softmax, oneDNN's
// bf16 products, OpenBLAS's kernel set, the bandwidth probe) asks these queries, so one rule
// and one switch hold everywhere.
//
// TLALOC_VECTOR_MATH=0 in the environment (read at the first query) turns every AVX-512 path
// off (the queries below answer as on a CPU without AVX-512) and src/cpu/vector_math.h's AVX2
// kernels, to compare speed or rule the vector kernels out. Elementwise ops and fused softmax
// keep their bits; matrix products may round differently (the portable loops' order).
#pragma once

namespace tlaloc {

struct CpuFeatures {
  bool avx2 = false;         // AVX2 and FMA
  bool f16c = false;         // F16C (f16 <-> f32 conversions; every AVX2 CPU known has it)
  bool avx512_core = false;  // AVX-512 F, BW, VL and DQ (Skylake-SP and later)
  bool avx512_bf16 = false;  // avx512_core and AVX512_BF16
  bool amx = false;          // avx512_core and AMX tiles with bf16, enabled by the OS
};

// What the processor reports, no override applied.
CpuFeatures DetectCpuFeatures();
// `hardware` as the kernels see it when TLALOC_VECTOR_MATH has the value `vector_math` (null:
// unset): "0" clears the AVX-512 features.
CpuFeatures ApplyCpuOverride(CpuFeatures hardware, const char* vector_math);
// The features kernels dispatch on: the hardware's, with the environment's override applied.
const CpuFeatures& KernelCpuFeatures();

inline bool HasAvx2() { return KernelCpuFeatures().avx2; }
inline bool HasF16c() { return KernelCpuFeatures().f16c; }
inline bool HasAvx512Core() { return KernelCpuFeatures().avx512_core; }
inline bool HasAvx512Bf16() { return KernelCpuFeatures().avx512_bf16; }
inline bool HasAmx() { return KernelCpuFeatures().amx; }
// Whether TLALOC_VECTOR_MATH=0 turned AVX-512 features off that the CPU has.
bool Avx512DisabledByEnvironment();

}  // namespace tlaloc

// The target attribute for kernels dispatched on HasAvx512Core(): exactly the features that
// query checks, so a kernel can use any of them and never more.
#if defined(__x86_64__)
#define TLALOC_AVX512_CORE_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#endif
