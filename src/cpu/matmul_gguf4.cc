// GGUF packed-weight products (matmul_gguf4.h). The dequantisation repeats the composite's
// decomposition step for step (nn/gguf_linear.cc): integer unpacking, then the f32 products and
// differences in the same order, each rounded on its own (no contraction into fused multiply-add,
// see the pragma), so every dequantised weight has the decomposition's bits; the dot products
// are then the f32 kernels' own.
#include "cpu/matmul_gguf4.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/reduction_matmul.h"
#include "sum_lanes.h"
#include "support/avx512_intrinsics.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/half.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tlaloc::cpu {

namespace {

// The formats' sizes, from ir/quant_format.h's table: compile-time constants, so the loops below
// compile as they would with literals. The unpacking inside a block is ggml's and written for
// these sizes; the static_asserts tie the two together.
constexpr const QuantFormatInfo& kQ4_0 = QuantTraits(QuantFormat::kQ4_0);
constexpr const QuantFormatInfo& kQ4_K = QuantTraits(QuantFormat::kQ4_K);
constexpr const QuantFormatInfo& kQ6_K = QuantTraits(QuantFormat::kQ6_K);

// q4_0: a block's bytes hold its low halves' nibbles then its high halves' (one 16-lane
// register of bytes); one f16 scale a block.
constexpr int64_t kQ4_0Bytes = kQ4_0.quant_bytes;
static_assert(kQ4_0Bytes == 16 && 2 * kQ4_0Bytes == kQ4_0.block &&
              kQ4_0.scale_group == kQ4_0.block && !kQ4_0.scale_pairs);
// q4_k: runs of 64 elements (two scale groups) in 32 bytes, low nibbles the first group's, high
// nibbles the second's; a (scale, min) pair a group, so 4 floats a run.
constexpr int64_t kQ4_KRun = 2 * kQ4_K.scale_group;
constexpr int64_t kQ4_KRunBytes = kQ4_KRun / 2;
static_assert(kQ4_KRun == 64 && kQ4_K.block % kQ4_KRun == 0 &&
              2 * kQ4_K.quant_bytes == kQ4_K.block && kQ4_K.scale_pairs);
// q6_k: a super-block's 4 low bits a weight (ql), then 2 high bits a weight (qh), each half of
// the block 64 bytes of ql, 32 of qh and 8 scales (one a 16-element group).
constexpr int64_t kQ6_KLowBytes = kQ6_K.block / 2;
constexpr int64_t kQ6_KHalfScales = kQ6_K.block / 2 / kQ6_K.scale_group;
static_assert(kQ6_K.block == 256 && kQ6_K.quant_bytes == kQ6_KLowBytes + kQ6_K.block / 4 &&
              kQ6_KHalfScales == 8 && !kQ6_K.scale_pairs);

void Q4_0Row(const uint8_t* q, const uint16_t* scale, int64_t k, float* y) {
  for (int64_t b = 0; b < k / kQ4_0.block; ++b, q += kQ4_0Bytes, y += kQ4_0.block) {
    const float d = HalfBitsToFloat(scale[b]);
    for (int j = 0; j < kQ4_0Bytes; ++j) {
      y[j] = static_cast<float>(q[j] & 0x0F) - 8.0f;
      y[j + kQ4_0Bytes] = static_cast<float>(q[j] >> 4) - 8.0f;
    }
    for (int j = 0; j < kQ4_0.block; ++j) y[j] *= d;
  }
}

void Q4_KRow(const uint8_t* q, const float* scale, int64_t k, float* y) {
  for (int64_t b = 0; b < k / kQ4_KRun; ++b, q += kQ4_KRunBytes, y += kQ4_KRun) {
    const float d1 = scale[4 * b], m1 = scale[4 * b + 1];
    const float d2 = scale[4 * b + 2], m2 = scale[4 * b + 3];
    for (int j = 0; j < kQ4_KRunBytes; ++j) {
      y[j] = d1 * static_cast<float>(q[j] & 0x0F) - m1;
      y[j + kQ4_KRunBytes] = d2 * static_cast<float>(q[j] >> 4) - m2;
    }
  }
}

void Q6_KRow(const uint8_t* q, const float* scale, int64_t k, float* y) {
  for (int64_t b = 0; b < k / kQ6_K.block; ++b, q += kQ6_K.quant_bytes) {
    const uint8_t* ql = q;
    const uint8_t* qh = q + kQ6_KLowBytes;
    for (int h = 0; h < 2; ++h, ql += 64, qh += 32, y += 128, scale += kQ6_KHalfScales) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = static_cast<float>(q1);
        y[l + 32] = static_cast<float>(q2);
        y[l + 64] = static_cast<float>(q3);
        y[l + 96] = static_cast<float>(q4);
      }
      for (int e = 0; e < 128; ++e) y[e] *= scale[e / kQ6_K.scale_group];
    }
  }
}

// The same rows with AVX-512: the same integer unpacking and the same f32 operations, one
// rounding each (separate multiply and subtract: the pragma above keeps the compiler from fusing
// them), so the same values.
const bool kAvx512 = HasAvx512Core();

TLALOC_AVX512_CORE_TARGET inline __m512i Bytes16(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

TLALOC_AVX512_CORE_TARGET void Q4_0RowAvx512(const uint8_t* q, const uint16_t* scale, int64_t k,
                                             float* y) {
  const __m512i mask = _mm512_set1_epi32(0x0F), eight = _mm512_set1_epi32(8);
  for (int64_t b = 0; b < k / kQ4_0.block; ++b, q += kQ4_0Bytes, y += kQ4_0.block) {
    const __m512 d = _mm512_set1_ps(HalfBitsToFloat(scale[b]));
    const __m512i v = Bytes16(q);
    const __m512i lo = _mm512_sub_epi32(_mm512_and_si512(v, mask), eight);
    const __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(v, 4), eight);
    _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d));
    _mm512_storeu_ps(y + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d));
  }
}

TLALOC_AVX512_CORE_TARGET void Q4_KRowAvx512(const uint8_t* q, const float* scale, int64_t k,
                                             float* y) {
  const __m512i mask = _mm512_set1_epi32(0x0F);
  for (int64_t b = 0; b < k / kQ4_KRun; ++b, q += kQ4_KRunBytes, y += kQ4_KRun) {
    const __m512 d1 = _mm512_set1_ps(scale[4 * b]), m1 = _mm512_set1_ps(scale[4 * b + 1]);
    const __m512 d2 = _mm512_set1_ps(scale[4 * b + 2]), m2 = _mm512_set1_ps(scale[4 * b + 3]);
    for (int h = 0; h < 2; ++h) {
      const __m512i v = Bytes16(q + 16 * h);
      const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(v, mask));
      const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4));
      _mm512_storeu_ps(y + 16 * h, _mm512_sub_ps(_mm512_mul_ps(d1, lo), m1));
      _mm512_storeu_ps(y + 32 + 16 * h, _mm512_sub_ps(_mm512_mul_ps(d2, hi), m2));
    }
  }
}

// Q6_K's value of 16 elements: (low 4 bits | high 2 bits << 4) - 32, times the sub-block scale.
// (Functions, not lambdas: clang gives a lambda in a target function no target features.)
TLALOC_AVX512_CORE_TARGET inline __m512 Q6_KValue(__m512i low4, __m512i high2, float s) {
  const __m512i v =
      _mm512_sub_epi32(_mm512_or_si512(low4, _mm512_slli_epi32(high2, 4)), _mm512_set1_epi32(32));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(s));
}

TLALOC_AVX512_CORE_TARGET inline void Q6_KPut(float* out, __m512i low4, __m512i high2, float s) {
  _mm512_storeu_ps(out, Q6_KValue(low4, high2, s));
}

TLALOC_AVX512_CORE_TARGET void Q6_KRowAvx512(const uint8_t* q, const float* scale, int64_t k,
                                             float* y) {
  const __m512i mask = _mm512_set1_epi32(0x0F), three = _mm512_set1_epi32(3);
  auto& put = Q6_KPut;
  for (int64_t b = 0; b < k / kQ6_K.block; ++b, q += kQ6_K.quant_bytes) {
    const uint8_t* ql = q;
    const uint8_t* qh = q + kQ6_KLowBytes;
    for (int h = 0; h < 2; ++h, ql += 64, qh += 32, y += 128, scale += kQ6_KHalfScales) {
      for (int c = 0; c < 2; ++c) {
        const __m512i a = Bytes16(ql + 16 * c), b2 = Bytes16(ql + 32 + 16 * c);
        const __m512i hb = Bytes16(qh + 16 * c);
        put(y + 16 * c, _mm512_and_si512(a, mask), _mm512_and_si512(hb, three), scale[c]);
        put(y + 32 + 16 * c, _mm512_and_si512(b2, mask),
            _mm512_and_si512(_mm512_srli_epi32(hb, 2), three), scale[2 + c]);
        put(y + 64 + 16 * c, _mm512_srli_epi32(a, 4),
            _mm512_and_si512(_mm512_srli_epi32(hb, 4), three), scale[4 + c]);
        put(y + 96 + 16 * c, _mm512_srli_epi32(b2, 4),
            _mm512_and_si512(_mm512_srli_epi32(hb, 6), three), scale[6 + c]);
      }
    }
  }
}

// Decode without the row buffer: each 32-element step of a row dequantised into two registers
// (elements 0-15 and 16-31, the values above) and multiplied by the f32 kernel's arithmetic
// (reduction_matmul.cc, as cpu::Int8Matmul repeats it): its lane order, one FMA per half and
// step into two accumulators, its horizontal sum; x is put in that lane order once per call.
inline constexpr int kLoLanes[16] = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
inline constexpr int kHiLanes[16] = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};

// Calls step(A, B) for each 32-element step of a row, in order.
template <typename Step>
TLALOC_AVX512_CORE_TARGET inline void StepsQ4_0(const uint8_t* q, const uint16_t* scale, int64_t k,
                                                Step&& step) {
  const __m512i mask = _mm512_set1_epi32(0x0F), eight = _mm512_set1_epi32(8);
  for (int64_t b = 0; b < k / kQ4_0.block; ++b, q += kQ4_0Bytes) {
    const __m512 d = _mm512_set1_ps(HalfBitsToFloat(scale[b]));
    const __m512i v = Bytes16(q);
    const __m512i lo = _mm512_sub_epi32(_mm512_and_si512(v, mask), eight);
    const __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(v, 4), eight);
    step(_mm512_mul_ps(_mm512_cvtepi32_ps(lo), d), _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d));
  }
}

// Q4_K's value of 16 elements: d * q - m (the imported scale and min of their sub-block).
TLALOC_AVX512_CORE_TARGET inline __m512 Q4_KValue(__m512i n, __m512 d, __m512 m) {
  return _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(n)), m);
}

template <typename Step>
TLALOC_AVX512_CORE_TARGET inline void StepsQ4_K(const uint8_t* q, const float* scale, int64_t k,
                                                Step&& step) {
  const __m512i mask = _mm512_set1_epi32(0x0F);
  for (int64_t b = 0; b < k / kQ4_KRun; ++b, q += kQ4_KRunBytes) {
    const __m512i v0 = Bytes16(q), v1 = Bytes16(q + 16);
    const __m512 d1 = _mm512_set1_ps(scale[4 * b]), m1 = _mm512_set1_ps(scale[4 * b + 1]);
    const __m512 d2 = _mm512_set1_ps(scale[4 * b + 2]), m2 = _mm512_set1_ps(scale[4 * b + 3]);
    auto& value = Q4_KValue;
    step(value(_mm512_and_si512(v0, mask), d1, m1), value(_mm512_and_si512(v1, mask), d1, m1));
    step(value(_mm512_srli_epi32(v0, 4), d2, m2), value(_mm512_srli_epi32(v1, 4), d2, m2));
  }
}

template <typename Step>
TLALOC_AVX512_CORE_TARGET inline void StepsQ6_K(const uint8_t* q, const float* scale, int64_t k,
                                                Step&& step) {
  const __m512i mask = _mm512_set1_epi32(0x0F), three = _mm512_set1_epi32(3);
  auto& value = Q6_KValue;
  for (int64_t b = 0; b < k / kQ6_K.block; ++b, q += kQ6_K.quant_bytes) {
    const uint8_t* ql = q;
    const uint8_t* qh = q + kQ6_KLowBytes;
    for (int h = 0; h < 2; ++h, ql += 64, qh += 32, scale += kQ6_KHalfScales) {
      const __m512i a0 = Bytes16(ql), a1 = Bytes16(ql + 16);
      const __m512i b0 = Bytes16(ql + 32), b1 = Bytes16(ql + 48);
      const __m512i h0 = Bytes16(qh), h1 = Bytes16(qh + 16);
      step(value(_mm512_and_si512(a0, mask), _mm512_and_si512(h0, three), scale[0]),
           value(_mm512_and_si512(a1, mask), _mm512_and_si512(h1, three), scale[1]));
      step(value(_mm512_and_si512(b0, mask), _mm512_and_si512(_mm512_srli_epi32(h0, 2), three),
                 scale[2]),
           value(_mm512_and_si512(b1, mask), _mm512_and_si512(_mm512_srli_epi32(h1, 2), three),
                 scale[3]));
      step(value(_mm512_srli_epi32(a0, 4), _mm512_and_si512(_mm512_srli_epi32(h0, 4), three),
                 scale[4]),
           value(_mm512_srli_epi32(a1, 4), _mm512_and_si512(_mm512_srli_epi32(h1, 4), three),
                 scale[5]));
      step(value(_mm512_srli_epi32(b0, 4), _mm512_and_si512(_mm512_srli_epi32(h0, 6), three),
                 scale[6]),
           value(_mm512_srli_epi32(b1, 4), _mm512_and_si512(_mm512_srli_epi32(h1, 6), three),
                 scale[7]));
    }
  }
}

// One 32-element step (a, b) of a row into the S accumulator pairs, in the f32 kernel's lane
// order. A functor, not a lambda, so clang compiles its call operator for AVX-512.
template <int S>
struct DotStep {
  __m512* acc0;
  __m512* acc1;
  __m512i lo_idx, hi_idx;
  const float* xp;
  int64_t k;
  int64_t i = 0;
  TLALOC_AVX512_CORE_TARGET inline void operator()(__m512 a, __m512 b) {
    const __m512 w0 = _mm512_permutex2var_ps(a, lo_idx, b);
    const __m512 w1 = _mm512_permutex2var_ps(a, hi_idx, b);
#pragma GCC unroll 4
    for (int v = 0; v < S; ++v) {
      acc0[v] = _mm512_fmadd_ps(_mm512_loadu_ps(xp + v * k + i), w0, acc0[v]);
      acc1[v] = _mm512_fmadd_ps(_mm512_loadu_ps(xp + v * k + i + 16), w1, acc1[v]);
    }
    i += 32;
  }
};

// One packed row against S vectors xp (each [k], in the kernel's lane order per step).
template <int S>
TLALOC_AVX512_CORE_TARGET void RowDotsAvx512(QuantFormat f, const uint8_t* q, const uint8_t* sr,
                                             int64_t k, const float* xp, float* out,
                                             int64_t out_s) {
  __m512 acc0[S], acc1[S];
#pragma GCC unroll 4
  for (int v = 0; v < S; ++v) acc0[v] = acc1[v] = _mm512_setzero_ps();
  const __m512i lo_idx = _mm512_loadu_si512(kLoLanes), hi_idx = _mm512_loadu_si512(kHiLanes);
  DotStep<S> step{acc0, acc1, lo_idx, hi_idx, xp, k};
  switch (f) {
    case QuantFormat::kQ4_0:
      StepsQ4_0(q, reinterpret_cast<const uint16_t*>(sr), k, step);
      break;
    case QuantFormat::kQ4_K:
      StepsQ4_K(q, reinterpret_cast<const float*>(sr), k, step);
      break;
    case QuantFormat::kQ6_K:
      StepsQ6_K(q, reinterpret_cast<const float*>(sr), k, step);
      break;
    case QuantFormat::kQ8_0:  // not a packed format: GgufMatmul refuses it
      break;
  }
#pragma GCC unroll 4
  for (int v = 0; v < S; ++v) out[v * out_s] = SumLanes(acc0[v], acc1[v]);
}

// x [s, k] into each 32-element step's lane order: the kernel's lo lanes, then its hi lanes.
TLALOC_AVX512_CORE_TARGET void PermuteVectors(const float* x, int64_t s, int64_t k, float* xp) {
  const __m512i lo_idx = _mm512_loadu_si512(kLoLanes), hi_idx = _mm512_loadu_si512(kHiLanes);
  for (int64_t i = 0; i < s * k; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    _mm512_storeu_ps(xp + i, _mm512_permutex2var_ps(a, lo_idx, b));
    _mm512_storeu_ps(xp + i + 16, _mm512_permutex2var_ps(a, hi_idx, b));
  }
}

}  // namespace

// The row sizes the packed forms had before they came from the table.
static_assert(QuantRowBytes(QuantFormat::kQ4_0, 256) == 128 &&
              QuantRowBytes(QuantFormat::kQ4_K, 256) == 128 &&
              QuantRowBytes(QuantFormat::kQ6_K, 256) == 192);
static_assert(QuantScaleRowBytes(QuantFormat::kQ4_0, 256) == 256 / 32 * 2 &&
              QuantScaleRowBytes(QuantFormat::kQ4_K, 256) == 256 / 32 * 8 &&
              QuantScaleRowBytes(QuantFormat::kQ6_K, 256) == 256 / 16 * 4);

void GgufDequantizeRows(QuantFormat f, const uint8_t* q, const void* scale, int64_t k, int64_t r0,
                        int64_t nb, float* out) {
  const int64_t qb = QuantRowBytes(f, k), sb = QuantScaleRowBytes(f, k);
  const auto* s = static_cast<const uint8_t*>(scale);
  for (int64_t r = r0; r < r0 + nb; ++r, out += k) {
    const uint8_t* qr = q + r * qb;
    const uint8_t* sr = s + r * sb;
    switch (f) {
      case QuantFormat::kQ4_0:
        (kAvx512 ? Q4_0RowAvx512 : Q4_0Row)(qr, reinterpret_cast<const uint16_t*>(sr), k, out);
        break;
      case QuantFormat::kQ4_K:
        (kAvx512 ? Q4_KRowAvx512 : Q4_KRow)(qr, reinterpret_cast<const float*>(sr), k, out);
        break;
      case QuantFormat::kQ6_K:
        (kAvx512 ? Q6_KRowAvx512 : Q6_KRow)(qr, reinterpret_cast<const float*>(sr), k, out);
        break;
      case QuantFormat::kQ8_0:  // not a packed format: GgufMatmul refuses it
        break;
    }
  }
}

Status GgufMatmul(QuantFormat f, const float* x, int64_t m, const uint8_t* q, const void* scale,
                  int64_t n, int64_t k, float* c, EvalContext& ctx) {
  if (!IsGgufPacked(f))
    return InvalidArgument(std::string("GgufMatmul: ") + std::string(QuantFormatName(f)) +
                           " is not a GGUF packed format (expected q4_0, q4_k or q6_k)");
  auto dequantise = [&](int64_t j0, int64_t nb, float* out) {
    GgufDequantizeRows(f, q, scale, k, j0, nb, out);
  };
  if (m > kMaxVectors) {
    // Prefill: BLAS's 256 x 256 blocks on 256 dequantised rows at a time (the calls ViewMatmul
    // makes, so its bits), else the whole matrix dequantised and ViewMatmul.
    if (BlasMatmulTransposedBlocks(x, m, k, n, dequantise, c, ctx)) return OkStatus();
    Literal dense_buffer = Literal::Uninitialized(TensorType(ElementType::kF32, {n, k}));
    float* dense = dense_buffer.span<float>().data();
    ctx.ParallelFor(
        n, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)),
        [&](int64_t begin, int64_t end) { dequantise(begin, end - begin, dense + begin * k); });
    MatrixView a{reinterpret_cast<const std::byte*>(x), ElementType::kF32, m * k, k, 1};
    MatrixView b{reinterpret_cast<const std::byte*>(dense), ElementType::kF32, n * k, 1, k};
    ViewMatmul(a, b, 1, m, k, n, c, ctx);
    return OkStatus();
  }
  // Decode: each thread streams its share of rows once; a row is dequantised into a buffer that
  // stays in L1 and dotted with every vector by the f32 kernel (the same per-pair arithmetic as
  // ViewMatmul's matrix-vector paths).
  const int64_t block = std::max<int64_t>(4, (int64_t{1} << 16) / std::max<int64_t>(k, 1) / 4 * 4);
  if (kAvx512) {
    std::vector<float> xp(static_cast<size_t>(m * k));
    PermuteVectors(x, m, k, xp.data());
    const int64_t qb = QuantRowBytes(f, k), sb = QuantScaleRowBytes(f, k);
    const auto* s = static_cast<const uint8_t*>(scale);
    ParallelShares(ctx, n, block, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        WithVectorCount(static_cast<int>(m), [&](auto v) {
          RowDotsAvx512<decltype(v)::value>(f, q + r * qb, s + r * sb, k, xp.data(), c + r, n);
        });
    });
    return OkStatus();
  }
  ParallelShares(ctx, n, block, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = begin; r < end; ++r) {
      dequantise(r, 1, row.data());
      for (int64_t v = 0; v < m; ++v) c[v * n + r] = DotF32(x + v * k, row.data(), k);
    }
  });
  return OkStatus();
}

}  // namespace tlaloc::cpu
