// The AVX2 + FMA bulk kernels (vector_math_avx2.h): vector_math.cc's AVX-512 kernels on two
// 4-double halves of each 8 floats. What AVX2 lacks is built from what it has: 2^n from the
// integer bits of n + 1.5 * 2^52 (no scalef), a division for the reciprocal and sqrt then divide
// for rsqrt (no rcp14 / rsqrt14), masks as vectors and bit sets from movemask (no mask
// registers), ragged ends through maskload / maskstore or a scalar tail.
#include "vector_math_avx2.h"

#include <limits>

#include "ops/bulk_math.h"
#include "tlaloc/support/half.h"

#if defined(__x86_64__)
#include "support/avx512_intrinsics.h"
#endif

namespace tlaloc::cpu::vmath::avx2 {

#if defined(__x86_64__)

namespace {

#define TLALOC_VMATH_AVX2_TARGET __attribute__((target("avx2,fma")))

// c_n r^n + ... + c_0 by Horner's rule, coefficients from the highest power down.
template <typename... Lower>
TLALOC_VMATH_AVX2_TARGET inline __m256d Polynomial(__m256d r, double highest, Lower... lower) {
  __m256d p = _mm256_set1_pd(highest);
  ((p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(lower))), ...);
  return p;
}

// exp(x) for doubles that came from floats: vector_math.cc's ExpPd, same reduction and series.
TLALOC_VMATH_AVX2_TARGET inline __m256d ExpPd(__m256d x) {
  // Past these bounds every f32 result is already 0 or inf. The clamp keeps n in [-159, 129],
  // so 2^n is a normal double built directly in the exponent field (NaN lanes also become
  // finite here and are patched by the caller).
  x = _mm256_min_pd(_mm256_max_pd(x, _mm256_set1_pd(-110.0)), _mm256_set1_pd(89.0));
  // n = round(x / ln2): adding 1.5 * 2^52 rounds to an integer (to nearest even, the current
  // mode) and leaves n in the low bits of the sum.
  const __m256d magic = _mm256_set1_pd(0x1.8p52);
  const __m256d shifted =
      _mm256_add_pd(_mm256_mul_pd(x, _mm256_set1_pd(0x1.71547652b82fep0)), magic);
  const __m256d n = _mm256_sub_pd(shifted, magic);
  // x = n ln2 + r with |r| <= ln2/2; ln2 split in two so that r is accurate to ~1e-17.
  __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(0x1.62e42fefa39efp-1), x);
  r = _mm256_fnmadd_pd(n, _mm256_set1_pd(0x1.abc9e3b39803fp-56), r);
  // Taylor series of exp(r) to r^11/11!: the remainder is below 1e-14 relative for |r| <= ln2/2.
  const __m256d p =
      Polynomial(r, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720,
                 1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1.0, 1.0);
  // 2^n: the sum's low 12 bits hold n (two's complement) under the magic's zeros; n + 1023
  // shifted into the exponent field. Only those 12 bits survive the shift.
  const __m256i biased = _mm256_add_epi64(_mm256_castpd_si256(shifted), _mm256_set1_epi64x(1023));
  return _mm256_mul_pd(p, _mm256_castsi256_pd(_mm256_slli_epi64(biased, 52)));
}

// Each op: Eval gives the double result of lanes that Unhandled (all bits set in a lane) leaves
// out; those go to the scalar function. Eval must give a non-NaN for every handled lane, or the
// rounding check below would pass it.
struct ExpOp {
  static double Reference(double x) { return ops::vmath::Exp(x); }
  TLALOC_VMATH_AVX2_TARGET static __m256d Eval(__m256d x) { return ExpPd(x); }
  TLALOC_VMATH_AVX2_TARGET static __m256d Unhandled(__m256d) { return _mm256_setzero_pd(); }
};

// The scalar formula's two branches as one: the numerator is 1 for x >= 0 (-0 included) and
// exp(x) below, the denominator 1 + exp(-|x|).
struct LogisticOp {
  static double Reference(double x) { return ops::vmath::Logistic(x); }
  TLALOC_VMATH_AVX2_TARGET static __m256d Eval(__m256d x) {
    const __m256d zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
    const __m256d e = ExpPd(_mm256_min_pd(x, _mm256_sub_pd(zero, x)));
    const __m256d non_negative = _mm256_cmp_pd(x, zero, _CMP_GE_OQ);
    const __m256d numerator = _mm256_blendv_pd(e, one, non_negative);
    // A division: the float estimate (_mm_rcp_ps) with three Newton steps measured no faster
    // on Zen 3, whose divider keeps up with the exp polynomial.
    return _mm256_div_pd(numerator, _mm256_add_pd(one, e));
  }
  TLALOC_VMATH_AVX2_TARGET static __m256d Unhandled(__m256d) { return _mm256_setzero_pd(); }
};

// sqrt then divide (error below 2 ulp): RMSNorm takes one rsqrt per row, so speed matters
// little, and a float estimate would need subnormal inputs handled apart. Zeros, negatives,
// +inf (and NaN) take the scalar path.
struct RsqrtOp {
  static double Reference(double x) { return ops::vmath::Rsqrt(x); }
  TLALOC_VMATH_AVX2_TARGET static __m256d Eval(__m256d x) {
    // Unhandled lanes get 1 so that no lane computes a NaN.
    const __m256d safe = _mm256_blendv_pd(x, _mm256_set1_pd(1.0), Unhandled(x));
    return _mm256_div_pd(_mm256_set1_pd(1.0), _mm256_sqrt_pd(safe));
  }
  TLALOC_VMATH_AVX2_TARGET static __m256d Unhandled(__m256d x) {
    const __m256d positive = _mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_GT_OQ);
    const __m256d finite =
        _mm256_cmp_pd(x, _mm256_set1_pd(std::numeric_limits<double>::infinity()), _CMP_LT_OQ);
    return _mm256_andnot_pd(_mm256_and_pd(positive, finite),
                            _mm256_castsi256_pd(_mm256_set1_epi64x(-1)));
  }
};

template <typename Op>
TLALOC_VMATH_AVX2_TARGET void VectorLoop(const float* in, float* out, int64_t n) {
  const __m256d below = _mm256_set1_pd(1.0 - kSlack), above = _mm256_set1_pd(1.0 + kSlack);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t i = 0; i < n; i += 8) {
    const bool full = n - i >= 8;
    const __m256i load_mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(full ? 8 : n - i)), lane);
    const __m256 x = full ? _mm256_loadu_ps(in + i) : _mm256_maskload_ps(in + i, load_mask);
    const __m256d x_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
    const __m256d x_hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
    const __m256d y_lo = Op::Eval(x_lo), y_hi = Op::Eval(x_hi);
    const __m256 low = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_mul_pd(y_hi, below)),
                                       _mm256_cvtpd_ps(_mm256_mul_pd(y_lo, below)));
    const __m256 high = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_mul_pd(y_hi, above)),
                                        _mm256_cvtpd_ps(_mm256_mul_pd(y_lo, above)));
    // A NaN input comes back quieted with its sign and payload, as from the libm call.
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    const __m256 result = _mm256_blendv_ps(low, _mm256_add_ps(x, x), nan);
    const int same = _mm256_movemask_ps(_mm256_castsi256_ps(
        _mm256_cmpeq_epi32(_mm256_castps_si256(low), _mm256_castps_si256(high))));
    const int unhandled =
        _mm256_movemask_pd(Op::Unhandled(x_lo)) | _mm256_movemask_pd(Op::Unhandled(x_hi)) << 4;
    const int live = _mm256_movemask_ps(_mm256_castsi256_ps(load_mask));
    const int unsure = (~same | unhandled) & live & ~_mm256_movemask_ps(nan);
    if (full)
      _mm256_storeu_ps(out + i, result);
    else
      _mm256_maskstore_ps(out + i, load_mask, result);
    if (unsure != 0) {
      alignas(32) float xs[8];
      _mm256_store_ps(xs, x);  // `out` may alias `in`: the inputs as they were
      for (int j = 0; j < 8; ++j)
        if ((unsure >> j) & 1)
          out[i + j] = static_cast<float>(Op::Reference(static_cast<double>(xs[j])));
    }
  }
}

}  // namespace

void ExpF32(const float* in, float* out, int64_t n) { VectorLoop<ExpOp>(in, out, n); }
void LogisticF32(const float* in, float* out, int64_t n) { VectorLoop<LogisticOp>(in, out, n); }
void RsqrtF32(const float* in, float* out, int64_t n) { VectorLoop<RsqrtOp>(in, out, n); }

// bf16 bits widened: exact, a shift; 8 at a time, the ragged end by the scalar rule.
TLALOC_VMATH_AVX2_TARGET void Bf16ToF32(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) out[i] = Bf16BitsToFloat(in[i]);
}

// FloatToBf16Bits on 8 lanes (vector_math.cc's F32ToBf16Vector): round to nearest even by
// adding 0x7fff plus the kept lowest bit, a NaN quieted (its top 16 bits with 0x40 set).
TLALOC_VMATH_AVX2_TARGET inline __m256i RoundToBf16(__m256i u) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  // Signed compare: both sides are below 2^31 after the sign is cleared.
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
  const __m256i top = _mm256_srli_epi32(u, 16);
  const __m256i bias =
      _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(top, _mm256_set1_epi32(1)));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
  return _mm256_blendv_epi8(rounded, _mm256_or_si256(top, _mm256_set1_epi32(0x40)), nan);
}

// 16 at a time (two vectors packed to 16 bits: every lane is at most 0xffff, so the saturating
// pack is exact), the ragged end by the scalar rule.
TLALOC_VMATH_AVX2_TARGET void F32ToBf16(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = RoundToBf16(_mm256_castps_si256(_mm256_loadu_ps(in + i)));
    const __m256i b = RoundToBf16(_mm256_castps_si256(_mm256_loadu_ps(in + i + 8)));
    // packus interleaves 128-bit lanes (a0-3 b0-3 a4-7 b4-7); the permute restores the order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  for (; i < n; ++i) out[i] = FloatToBf16Bits(in[i]);
}

// Eight lanes at a time, the rest one by one: the same operation on every element either way.
template <bool kDivide>
TLALOC_VMATH_AVX2_TARGET inline void RowByScalar(const float* in, float b, float* out, int64_t n) {
  const __m256 vb = _mm256_set1_ps(b);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(in + i);
    _mm256_storeu_ps(out + i, kDivide ? _mm256_div_ps(x, vb) : _mm256_sub_ps(x, vb));
  }
  for (; i < n; ++i) out[i] = kDivide ? in[i] / b : in[i] - b;
}

TLALOC_VMATH_AVX2_TARGET void SubtractScalarF32(const float* in, float b, float* out, int64_t n) {
  RowByScalar<false>(in, b, out, n);
}

TLALOC_VMATH_AVX2_TARGET void DivideByScalarF32(const float* in, float b, float* out, int64_t n) {
  RowByScalar<true>(in, b, out, n);
}

TLALOC_VMATH_AVX2_TARGET int64_t SelectRowF32(const float* in, const uint8_t* mask, float fill,
                                              float* out, int64_t n) {
  const __m256 vfill = _mm256_set1_ps(fill);
  int64_t seen = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mask + i));
    const __m256 unset = _mm256_castsi256_ps(
        _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_setzero_si256()));
    _mm256_storeu_ps(out + i, _mm256_blendv_ps(_mm256_loadu_ps(in + i), vfill, unset));
    const unsigned set = ~static_cast<unsigned>(_mm256_movemask_ps(unset)) & 0xffu;
    if (set != 0) seen = i + 32 - __builtin_clz(set);
  }
  for (; i < n; ++i) {
    out[i] = mask[i] ? in[i] : fill;
    if (mask[i]) seen = i + 1;
  }
  return seen;
}

#else  // no x86: never called (HasAvx2() is false), defined so that the library links.

void ExpF32(const float* in, float* out, int64_t n) { ops::vmath::ExpF32Scalar(in, out, n); }
void LogisticF32(const float* in, float* out, int64_t n) {
  ops::vmath::LogisticF32Scalar(in, out, n);
}
void RsqrtF32(const float* in, float* out, int64_t n) { ops::vmath::RsqrtF32Scalar(in, out, n); }
void Bf16ToF32(const uint16_t* in, float* out, int64_t n) {
  ops::vmath::Bf16ToF32Scalar(in, out, n);
}
void F32ToBf16(const float* in, uint16_t* out, int64_t n) {
  ops::vmath::F32ToBf16Scalar(in, out, n);
}
void SubtractScalarF32(const float*, float, float*, int64_t) {}
void DivideByScalarF32(const float*, float, float*, int64_t) {}
int64_t SelectRowF32(const float*, const uint8_t*, float, float*, int64_t) { return 0; }

#endif  // __x86_64__

}  // namespace tlaloc::cpu::vmath::avx2
