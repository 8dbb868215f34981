// Bulk f32 versions of the transcendental ops the models spend time in (exp for softmax,
// logistic for SiLU, rsqrt for RMSNorm) and of the f32 <-> bf16 conversions. Each op's value is
// defined once, by the double-precision function of ops/bulk_math.h: an f32 element x gives
// static_cast<float>(F(static_cast<double>(x))), the "compute in double, round once" rule of the
// elementwise ops. The bulk kernels return exactly those bits for every f32 input (checked over
// all 2^32 inputs): on CPUs with AVX-512, or else AVX2 + FMA (vector_math_avx2.cc), they
// evaluate F in double in vector registers and fall back to the scalar function for the rare
// element whose double result lies too close to a float rounding boundary to be sure of the
// rounding; elsewhere they loop over the scalar function. cpu::RegisterKernels installs them as
// the elementwise ops' bulk loops.
#pragma once

#include <cstdint>

#include "ops/bulk_math.h"

namespace tlaloc::cpu::vmath {

// The kernels the interpreter uses: vectorised where the CPU allows, scalar otherwise.
void ExpF32(const float* in, float* out, int64_t n);
void LogisticF32(const float* in, float* out, int64_t n);
void RsqrtF32(const float* in, float* out, int64_t n);

// bf16 bits to f32 and back (Bf16ToF32Kernel, F32ToBf16Kernel in ops/bulk_math.h).
void Bf16ToF32(const uint16_t* in, float* out, int64_t n);
void F32ToBf16(const float* in, uint16_t* out, int64_t n);

// Softmax's row steps, one IEEE operation per element (so every path gives the same bits; `out`
// may be `in`): out[j] = in[j] - b, and out[j] = in[j] / b.
void SubtractScalarF32(const float* in, float b, float* out, int64_t n);
void DivideByScalarF32(const float* in, float b, float* out, int64_t n);

// out[j] = mask[j] != 0 ? in[j] : fill (`out` may be `in`); returns one past the last j whose
// mask is set, 0 when none is.
int64_t SelectRowF32(const float* in, const uint8_t* mask, float fill, float* out, int64_t n);

// Which kernels run: AVX-512 where HasAvx512Core(), else AVX2 + FMA where HasAvx2()
// (tlaloc/support/cpu_features.h), else the scalar loops; always the scalar loops when the
// environment sets TLALOC_VECTOR_MATH=0 (for speed comparisons). Decided once per process.
enum class VectorPath { kScalar, kAvx2, kAvx512 };
VectorPath KernelPath();
const char* KernelPathName();  // "AVX-512", "AVX2+FMA" or "scalar"

// Whether a vectorised path runs (KernelPath() is not kScalar).
bool HasVectorKernels();

}  // namespace tlaloc::cpu::vmath
