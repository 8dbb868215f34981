// Bulk f32 exp, logistic and rsqrt (see vector_math.h): AVX-512 kernels here and AVX2 + FMA
// ones in vector_math_avx2.cc, selected at run time, the portable scalar loops of
// ops/bulk_math.h otherwise.
#include "vector_math.h"

#include <cstdlib>
#include <limits>
#include <string_view>

#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/half.h"
#include "vector_math_avx2.h"

#if defined(__x86_64__)
#include "support/avx512_intrinsics.h"
#endif

namespace tlaloc::cpu::vmath {

using ops::vmath::Bf16ToF32Scalar;
using ops::vmath::Exp;
using ops::vmath::ExpF32Scalar;
using ops::vmath::F32ToBf16Scalar;
using ops::vmath::Logistic;
using ops::vmath::LogisticF32Scalar;
using ops::vmath::Rsqrt;
using ops::vmath::RsqrtF32Scalar;

namespace {

#if defined(__x86_64__)

#define TLALOC_VMATH_TARGET TLALOC_AVX512_CORE_TARGET

// c_n r^n + ... + c_0 by Horner's rule, coefficients from the highest power down (spelled out
// so the compiler keeps every coefficient in a register instead of looping over an array).
template <typename... Lower>
TLALOC_VMATH_TARGET inline __m512d Polynomial(__m512d r, double highest, Lower... lower) {
  __m512d p = _mm512_set1_pd(highest);
  ((p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(lower))), ...);
  return p;
}

// exp(x) for doubles that came from floats.
TLALOC_VMATH_TARGET inline __m512d ExpPd(__m512d x) {
  // Past these bounds every f32 result is already 0 or inf; the clamp keeps 2^n finite and
  // nonzero (NaN lanes also become finite here and are patched by the caller).
  x = _mm512_min_pd(_mm512_max_pd(x, _mm512_set1_pd(-110.0)), _mm512_set1_pd(89.0));
  // x = n ln2 + r with |r| <= ln2/2; ln2 split in two so that r is accurate to ~1e-17.
  const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(0x1.71547652b82fep0)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(0x1.62e42fefa39efp-1), x);
  r = _mm512_fnmadd_pd(n, _mm512_set1_pd(0x1.abc9e3b39803fp-56), r);
  // Taylor series of exp(r) to r^11/11!: the remainder is below 1e-14 relative for |r| <= ln2/2.
  const __m512d p =
      Polynomial(r, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720,
                 1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1.0, 1.0);
  return _mm512_scalef_pd(p, n);  // p * 2^n
}

// 1 / d for d in [1, 2]: the 14-bit hardware estimate refined by two Newton steps (error
// 2^-14 -> 2^-28 -> ~2^-53), much cheaper than a vector division.
TLALOC_VMATH_TARGET inline __m512d ReciprocalPd(__m512d d) {
  const __m512d one = _mm512_set1_pd(1.0);
  __m512d r = _mm512_rcp14_pd(d);
  for (int step = 0; step < 2; ++step) r = _mm512_fmadd_pd(r, _mm512_fnmadd_pd(d, r, one), r);
  return r;
}

// Each op: Eval gives the double result of lanes that Unhandled leaves out; those go to the
// scalar function.
struct ExpOp {
  static double Reference(double x) { return Exp(x); }
  TLALOC_VMATH_TARGET static __m512d Eval(__m512d x) { return ExpPd(x); }
  TLALOC_VMATH_TARGET static __mmask8 Unhandled(__m512d) { return 0; }
};

// The scalar formula's two branches as one: the numerator is 1 for x >= 0 (-0 included) and
// exp(x) below, the denominator 1 + exp(-|x|).
struct LogisticOp {
  static double Reference(double x) { return Logistic(x); }
  TLALOC_VMATH_TARGET static __m512d Eval(__m512d x) {
    const __m512d zero = _mm512_setzero_pd(), one = _mm512_set1_pd(1.0);
    const __m512d e = ExpPd(_mm512_min_pd(x, _mm512_sub_pd(zero, x)));
    const __mmask8 non_negative = _mm512_cmp_pd_mask(x, zero, _CMP_GE_OQ);
    const __m512d numerator = _mm512_mask_blend_pd(non_negative, e, one);
    return _mm512_mul_pd(numerator, ReciprocalPd(_mm512_add_pd(one, e)));
  }
  TLALOC_VMATH_TARGET static __mmask8 Unhandled(__m512d) { return 0; }
};

// The 14-bit hardware estimate of 1/sqrt(x) refined by two Newton steps on 1 - x y^2 (error
// 2^-14 -> 2^-27 -> ~2^-52). Zeros, negatives, +inf (and NaN) take the scalar path.
struct RsqrtOp {
  static double Reference(double x) { return Rsqrt(x); }
  TLALOC_VMATH_TARGET static __m512d Eval(__m512d x) {
    const __m512d one = _mm512_set1_pd(1.0), half = _mm512_set1_pd(0.5);
    __m512d y = _mm512_rsqrt14_pd(x);
    for (int step = 0; step < 2; ++step) {
      const __m512d error = _mm512_fnmadd_pd(_mm512_mul_pd(x, y), y, one);
      y = _mm512_fmadd_pd(_mm512_mul_pd(y, half), error, y);
    }
    return y;
  }
  TLALOC_VMATH_TARGET static __mmask8 Unhandled(__m512d x) {
    const __mmask8 positive = _mm512_cmp_pd_mask(x, _mm512_setzero_pd(), _CMP_GT_OQ);
    const __mmask8 finite =
        _mm512_cmp_pd_mask(x, _mm512_set1_pd(std::numeric_limits<double>::infinity()), _CMP_LT_OQ);
    return static_cast<__mmask8>(~(positive & finite));
  }
};

template <typename Op>
TLALOC_VMATH_TARGET void VectorLoop(const float* in, float* out, int64_t n) {
  const __m512d below = _mm512_set1_pd(1.0 - kSlack), above = _mm512_set1_pd(1.0 + kSlack);
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 live = n - i >= 8 ? 0xff : static_cast<__mmask8>((1u << (n - i)) - 1);
    const __m256 x = _mm256_maskz_loadu_ps(live, in + i);
    const __m512d xd = _mm512_cvtps_pd(x);
    const __m512d y = Op::Eval(xd);
    const __m256 low = _mm512_cvtpd_ps(_mm512_mul_pd(y, below));
    const __m256 high = _mm512_cvtpd_ps(_mm512_mul_pd(y, above));
    // A NaN input comes back quieted with its sign and payload, as from the libm call.
    const __mmask8 nan = _mm256_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __mmask8 unsure =
        (_mm256_cmpneq_epi32_mask(_mm256_castps_si256(low), _mm256_castps_si256(high)) |
         Op::Unhandled(xd)) &
        live & static_cast<__mmask8>(~nan);
    _mm256_mask_storeu_ps(out + i, live, _mm256_mask_add_ps(low, nan, x, x));
    if (unsure != 0) {
      alignas(32) float xs[8];
      _mm256_store_ps(xs, x);  // `out` may alias `in`: the inputs as they were
      for (int j = 0; j < 8; ++j)
        if ((unsure >> j) & 1)
          out[i + j] = static_cast<float>(Op::Reference(static_cast<double>(xs[j])));
    }
  }
}

// bf16 bits widened: exact, a shift.
TLALOC_VMATH_TARGET void Bf16ToF32Vector(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 live = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(live, in + i));
    _mm512_mask_storeu_ps(out + i, live, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
}

// FloatToBf16Bits on 16 lanes: round to nearest even by adding 0x7fff plus the kept lowest bit,
// a NaN quieted (its top 16 bits with 0x40 set). Integer arithmetic, so subnormals round like
// any other value (vcvtneps2bf16 would flush them).
TLALOC_VMATH_TARGET void F32ToBf16Vector(const float* in, uint16_t* out, int64_t n) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 live = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(live, in + i));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
    const __m512i lowest = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lowest)), 16);
    const __m512i nan_bits = _mm512_or_si512(_mm512_srli_epi32(u, 16), quiet);
    const __m512i bits = _mm512_mask_mov_epi32(rounded, nan, nan_bits);
    _mm256_mask_storeu_epi16(out + i, live, _mm512_cvtepi32_epi16(bits));
  }
}

// Runs the kernel of the vector path KernelPath() picked; false on the scalar path.
template <typename In, typename Out>
bool RunVectorPath(void (*avx512)(const In*, Out*, int64_t),
                   void (*avx2_kernel)(const In*, Out*, int64_t), const In* in, Out* out,
                   int64_t n) {
  switch (KernelPath()) {
    case VectorPath::kAvx512:
      avx512(in, out, n);
      return true;
    case VectorPath::kAvx2:
      avx2_kernel(in, out, n);
      return true;
    case VectorPath::kScalar:
      break;
  }
  return false;
}

#endif  // __x86_64__

// Which kernels run, decided once: TLALOC_VECTOR_MATH=0 clears only the AVX-512 features in
// KernelCpuFeatures() (the AVX2 matrix kernels stay on), so the AVX2 path reads it here.
VectorPath DetectPath() {
  const char* setting = std::getenv("TLALOC_VECTOR_MATH");
  if (setting != nullptr && std::string_view(setting) == "0") return VectorPath::kScalar;
  if (HasAvx512Core()) return VectorPath::kAvx512;
  if (HasAvx2()) return VectorPath::kAvx2;
  return VectorPath::kScalar;
}

}  // namespace

VectorPath KernelPath() {
  static const VectorPath path = DetectPath();
  return path;
}

const char* KernelPathName() {
  switch (KernelPath()) {
    case VectorPath::kAvx512:
      return "AVX-512";
    case VectorPath::kAvx2:
      return "AVX2+FMA";
    case VectorPath::kScalar:
      break;
  }
  return "scalar";
}

bool HasVectorKernels() { return KernelPath() != VectorPath::kScalar; }

void ExpF32(const float* in, float* out, int64_t n) {
#if defined(__x86_64__)
  if (RunVectorPath(VectorLoop<ExpOp>, avx2::ExpF32, in, out, n)) return;
#endif
  ExpF32Scalar(in, out, n);
}

void LogisticF32(const float* in, float* out, int64_t n) {
#if defined(__x86_64__)
  if (RunVectorPath(VectorLoop<LogisticOp>, avx2::LogisticF32, in, out, n)) return;
#endif
  LogisticF32Scalar(in, out, n);
}

void RsqrtF32(const float* in, float* out, int64_t n) {
#if defined(__x86_64__)
  if (RunVectorPath(VectorLoop<RsqrtOp>, avx2::RsqrtF32, in, out, n)) return;
#endif
  RsqrtF32Scalar(in, out, n);
}

void Bf16ToF32(const uint16_t* in, float* out, int64_t n) {
#if defined(__x86_64__)
  if (RunVectorPath(Bf16ToF32Vector, avx2::Bf16ToF32, in, out, n)) return;
#endif
  Bf16ToF32Scalar(in, out, n);
}

void F32ToBf16(const float* in, uint16_t* out, int64_t n) {
#if defined(__x86_64__)
  if (RunVectorPath(F32ToBf16Vector, avx2::F32ToBf16, in, out, n)) return;
#endif
  F32ToBf16Scalar(in, out, n);
}

// Exact operations: the AVX2 loops serve AVX-512 CPUs too (the row steps are memory-bound).
void SubtractScalarF32(const float* in, float b, float* out, int64_t n) {
  if (HasVectorKernels()) return avx2::SubtractScalarF32(in, b, out, n);
  for (int64_t j = 0; j < n; ++j) out[j] = in[j] - b;
}

void DivideByScalarF32(const float* in, float b, float* out, int64_t n) {
  if (HasVectorKernels()) return avx2::DivideByScalarF32(in, b, out, n);
  for (int64_t j = 0; j < n; ++j) out[j] = in[j] / b;
}

int64_t SelectRowF32(const float* in, const uint8_t* mask, float fill, float* out, int64_t n) {
  if (HasVectorKernels()) return avx2::SelectRowF32(in, mask, fill, out, n);
  int64_t seen = 0;
  for (int64_t j = 0; j < n; ++j) {
    out[j] = mask[j] ? in[j] : fill;
    if (mask[j]) seen = j + 1;
  }
  return seen;
}

}  // namespace tlaloc::cpu::vmath
