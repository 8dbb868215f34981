// Bulk f32 versions of the transcendental ops the models spend time in (exp for softmax,
// logistic for SiLU, rsqrt for RMSNorm). Each op's value is defined once, by the double-precision
// function below: an f32 element x gives static_cast<float>(F(static_cast<double>(x))), the
// "compute in double, round once" rule of the elementwise ops. The bulk kernels return exactly
// those bits for every f32 input (checked over all 2^32 inputs): on CPUs with AVX-512 they
// evaluate F in double in vector registers and fall back to the scalar function for the rare
// element whose double result lies too close to a float rounding boundary to be sure of the
// rounding; elsewhere they loop over the scalar function.
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

// The kernels the interpreter uses: vectorised where the CPU allows, scalar otherwise.
void ExpF32(const float* in, float* out, int64_t n);
void LogisticF32(const float* in, float* out, int64_t n);
void RsqrtF32(const float* in, float* out, int64_t n);

// The portable scalar loops (the reference the vector kernels must match).
void ExpF32Scalar(const float* in, float* out, int64_t n);
void LogisticF32Scalar(const float* in, float* out, int64_t n);
void RsqrtF32Scalar(const float* in, float* out, int64_t n);

// bf16 bits to f32 and back, bit for bit Bf16BitsToFloat and FloatToBf16Bits (support/half.h:
// round to nearest even, NaN quieted, subnormals kept); `in` and `out` must not overlap.
void Bf16ToF32(const uint16_t* in, float* out, int64_t n);
void F32ToBf16(const float* in, uint16_t* out, int64_t n);

// Whether the vectorised kernels run: HasAvx512Core() (tlaloc/support/cpu_features.h), false
// when the environment sets TLALOC_VECTOR_MATH=0 (scalar loops, for speed comparisons).
bool HasVectorKernels();

}  // namespace tlaloc::ops::vmath
