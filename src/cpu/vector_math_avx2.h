// The AVX2 + FMA versions of the bulk kernels of vector_math.h, internal to it: the AVX-512
// kernels' scheme on 256-bit registers (evaluate in double, round once, the scalar function for
// elements too close to a float rounding boundary), so they return the scalar definition's bits
// for every f32 input. Call them only where HasAvx2() (AVX2 and FMA) holds.
#pragma once

#include <cstdint>

namespace tlaloc::cpu::vmath {

// A vector result y stands for the double the scalar function returns only up to a relative
// error: below 1e-14 for the vector code (polynomial, Newton steps), below 2 ulp (2.2e-16) for
// glibc's exp and for sqrt-then-divide. When y * (1 - kSlack) and y * (1 + kSlack) round to the
// same float, every double in between does too (rounding is monotonic), the scalar result
// included. About 1 element in 30,000 is that close to a rounding boundary and is recomputed by
// the scalar function.
inline constexpr double kSlack = 0x1p-40;

namespace avx2 {

void ExpF32(const float* in, float* out, int64_t n);
void LogisticF32(const float* in, float* out, int64_t n);
void RsqrtF32(const float* in, float* out, int64_t n);
void Bf16ToF32(const uint16_t* in, float* out, int64_t n);
void F32ToBf16(const float* in, uint16_t* out, int64_t n);
void SubtractScalarF32(const float* in, float b, float* out, int64_t n);
void DivideByScalarF32(const float* in, float b, float* out, int64_t n);
int64_t SelectRowF32(const float* in, const uint8_t* mask, float fill, float* out, int64_t n);

}  // namespace avx2
}  // namespace tlaloc::cpu::vmath
