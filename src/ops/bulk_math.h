// The bulk loops the elementwise ops' evaluations run over blocks of floats: the transcendental
// ops the models spend time in (exp for softmax, logistic for SiLU, rsqrt for RMSNorm) and the
// f32 <-> bf16 conversions that bf16 convert and binary arithmetic use. Each op's value is
// defined here once, by the double-precision function below: an f32 element x gives
// static_cast<float>(F(static_cast<double>(x))), the "compute in double, round once" rule of the
// elementwise ops. The loops defined here are the plain scalar reference. The CPU layer installs
// its vector kernels in their place (cpu/vector_math.h, through cpu::RegisterKernels), which
// return exactly these bits for every input (checked over all 2^32 f32 inputs), so which set
// runs changes speed only.
#pragma once

#include <cmath>
#include <cstdint>

namespace tlaloc::ops::vmath {

inline double Exp(double x) { return std::exp(x); }

// exp(x) / (1 + exp(x)) for negative x keeps tiny results instead of 1 / (1 + inf) = 0.
inline double Logistic(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

inline double Rsqrt(double x) { return 1.0 / std::sqrt(x); }

// out[i] = static_cast<float>(F(in[i])) for i < n. `in` and `out` may be the same array
// (in-place update) but must not otherwise overlap.
using F32Kernel = void (*)(const float* in, float* out, int64_t n);
// bf16 bits to f32 and back, bit for bit Bf16BitsToFloat and FloatToBf16Bits (support/half.h:
// round to nearest even, NaN quieted, subnormals kept); `in` and `out` must not overlap.
using Bf16ToF32Kernel = void (*)(const uint16_t* in, float* out, int64_t n);
using F32ToBf16Kernel = void (*)(const float* in, uint16_t* out, int64_t n);

// The portable scalar loops (the reference the vector kernels must match).
void ExpF32Scalar(const float* in, float* out, int64_t n);
void LogisticF32Scalar(const float* in, float* out, int64_t n);
void RsqrtF32Scalar(const float* in, float* out, int64_t n);
void Bf16ToF32Scalar(const uint16_t* in, float* out, int64_t n);
void F32ToBf16Scalar(const float* in, uint16_t* out, int64_t n);

struct BulkKernels {
  F32Kernel exp, logistic, rsqrt;
  Bf16ToF32Kernel bf16_to_f32;
  F32ToBf16Kernel f32_to_bf16;
};

// The loops the elementwise evaluations call: the scalar ones above until a faster set with the
// same bits is installed.
const BulkKernels& Bulk();
// Installs `kernels` (a static: it must outlive every later Bulk() call) for every later call.
void InstallBulkKernels(const BulkKernels* kernels);

}  // namespace tlaloc::ops::vmath
