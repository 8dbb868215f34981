// Reductions of contiguous f32 rows (reduction_rows.h): the reduce op's fast path when the
// reduced dimensions are the trailing ones, so each output reduces one contiguous row. The
// general path walks a table of offsets (one int64 per reduced element, rebuilt per call: 78 MB
// for a 151,936 x 64 gradient) and dispatches on the body per element; here the row is read in
// place and the result is bit for bit the general path's:
//  - add (and multiply): each row still folds sequentially from the init, in index order, but
//    eight rows fold at once, so their add latencies overlap instead of one chain per row;
//  - max and min: with AVX-512 (16 lanes) or AVX2 (8), the lanes compare in any order, which
//    gives the sequential result whenever the row holds no NaN and the result is not a zero (the
//    order of a NaN's payload and of -0 against +0 are the only things order decides);
//    otherwise, and on vector math's scalar path (vmath::KernelPath), the sequential fold.
#include "cpu/reduction_rows.h"

#include <algorithm>
#include <cmath>

#include "cpu/vector_math.h"
#include "support/avx512_intrinsics.h"
#include "tlaloc/support/cpu_features.h"

namespace tlaloc::cpu {

using ops::ApplyBinary;
using ops::BinaryKind;

namespace {

float FoldSequential(BinaryKind kind, const float* x, int64_t n, float init) {
  float acc = init;
  for (int64_t j = 0; j < n; ++j) acc = ApplyBinary<float>(kind, acc, x[j]);
  return acc;
}

// max (or min) of init and x[0, n) in lane order; `ok` false when a NaN was seen.
template <bool kMax>
TLALOC_AVX512_CORE_TARGET float ExtremumAvx512(const float* x, int64_t n, float init, bool& ok) {
  __m512 m = _mm512_set1_ps(init);
  __mmask16 nan = 0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    m = kMax ? _mm512_max_ps(m, v) : _mm512_min_ps(m, v);
  }
  if (j < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - j)) - 1);
    const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(init), tail, x + j);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    m = kMax ? _mm512_max_ps(m, v) : _mm512_min_ps(m, v);
  }
  ok = nan == 0 && !std::isnan(init);
  return kMax ? _mm512_reduce_max_ps(m) : _mm512_reduce_min_ps(m);
}

// ExtremumAvx512 on 256-bit registers (the tail folded in one by one, in any order as well).
template <bool kMax>
__attribute__((target("avx2"))) float ExtremumAvx2(const float* x, int64_t n, float init,
                                                   bool& ok) {
  __m256 m = _mm256_set1_ps(init), nan = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    m = kMax ? _mm256_max_ps(m, v) : _mm256_min_ps(m, v);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float r = init;
  bool any_nan = _mm256_movemask_ps(nan) != 0 || std::isnan(init);
  for (float lane : lanes) r = kMax ? std::max(r, lane) : std::min(r, lane);
  for (; j < n; ++j) {
    any_nan = any_nan || std::isnan(x[j]);
    r = kMax ? std::max(r, x[j]) : std::min(r, x[j]);
  }
  ok = !any_nan;
  return r;
}

// The vector forms only where their order of comparisons cannot matter: no NaN, and a result
// that is not a zero (whose sign the order would pick); otherwise the sequential rule.
// The vector path is vector math's (vmath::KernelPath), so TLALOC_VECTOR_MATH=0 turns softmax's
// row maximum scalar with its other row steps.
float Extremum(BinaryKind kind, const float* x, int64_t n, float init) {
  const vmath::VectorPath path = vmath::KernelPath();
  if (path != vmath::VectorPath::kScalar) {
    bool ok = false;
    const bool max = kind == BinaryKind::kMax;
    const float r =
        path == vmath::VectorPath::kAvx512
            ? (max ? ExtremumAvx512<true>(x, n, init, ok) : ExtremumAvx512<false>(x, n, init, ok))
            : (max ? ExtremumAvx2<true>(x, n, init, ok) : ExtremumAvx2<false>(x, n, init, ok));
    if (ok && r != 0.0f) return r;
  }
  return FoldSequential(kind, x, n, init);
}

// R rows' sequential folds (add or multiply) interleaved element by element.
template <int R>
void FoldRows(BinaryKind kind, const float* x, int64_t n, float init, float* out) {
  float acc[R];
  for (int r = 0; r < R; ++r) acc[r] = init;
  if (kind == BinaryKind::kAdd) {
    for (int64_t j = 0; j < n; ++j)
      for (int r = 0; r < R; ++r) acc[r] = acc[r] + x[r * n + j];
  } else {
    for (int64_t j = 0; j < n; ++j)
      for (int r = 0; r < R; ++r) acc[r] = acc[r] * x[r * n + j];
  }
  for (int r = 0; r < R; ++r) out[r] = acc[r];
}

}  // namespace

float FoldRowF32(BinaryKind kind, const float* x, int64_t n, float init) {
  if (kind == BinaryKind::kMax || kind == BinaryKind::kMin) return Extremum(kind, x, n, init);
  float out;
  FoldRows<1>(kind, x, n, init, &out);
  return out;
}

bool ReduceContiguousRowsF32(BinaryKind kind, const float* in, float init, float* out, int64_t rows,
                             int64_t n, EvalContext& ctx) {
  const bool fold = kind == BinaryKind::kAdd || kind == BinaryKind::kMul;
  if (!fold && kind != BinaryKind::kMax && kind != BinaryKind::kMin) return false;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
  ctx.ParallelFor(rows, grain, [&](int64_t begin, int64_t end) {
    int64_t r = begin;
    if (fold) {
      for (; r + 8 <= end; r += 8) FoldRows<8>(kind, in + r * n, n, init, out + r);
      for (; r < end; ++r) FoldRows<1>(kind, in + r * n, n, init, out + r);
    } else {
      for (; r < end; ++r) out[r] = Extremum(kind, in + r * n, n, init);
    }
  });
  return true;
}

}  // namespace tlaloc::cpu
