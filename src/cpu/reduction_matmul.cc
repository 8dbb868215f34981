#include "reduction_matmul.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "dots_avx2.h"
#include "matmul_small_m.h"
#include "sum_lanes.h"
#include "support/avx512_intrinsics.h"
#include "tlaloc/cpu/blas_kernels.h"
#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/half.h"

namespace tlaloc::cpu {

namespace {

// A stored element (f32, or bf16 bits) as f32: exact.
template <typename W>
inline float Widen(W w) {
  if constexpr (std::is_same_v<W, uint16_t>) {
    return Bf16BitsToFloat(w);
  } else {
    return w;
  }
}

const bool kAvx512 = HasAvx512Core();
const bool kAvx2 = HasAvx2();

// Runs fn(begin, end) over [0, total) in blocks of `block` items handed out one at a time: the
// pool splits work into equal static parts, so a thread the OS slows down (other processes on
// the cores) would otherwise hold everyone up; here it just takes fewer blocks.
template <typename Fn>
void ParallelBlocks(EvalContext& ctx, int64_t total, int64_t block, const Fn& fn) {
  const int64_t blocks = (total + block - 1) / block;
  std::atomic<int64_t> next{0};
  ctx.ParallelFor(blocks, 1, [&](int64_t, int64_t) {
    for (int64_t b = next.fetch_add(1); b < blocks; b = next.fetch_add(1))
      fn(b * block, std::min(total, (b + 1) * block));
  });
}

// ---- Matrix-vector kernels --------------------------------------------------------------------

// S dot products of one row (f32 or bf16, read once) with S f32 vectors.
template <int S, typename W>
void DotsPortable(const float* const* x, const W* row, int64_t k, float* out) {
  for (int s = 0; s < S; ++s) {
    float acc = 0;
    for (int64_t i = 0; i < k; ++i) acc += x[s][i] * Widen(row[i]);
    out[s] = acc;
  }
}

template <typename W>
TLALOC_AVX512_CORE_TARGET inline __m512 LoadRowMasked(const W* p, __mmask16 m) {
  if constexpr (std::is_same_v<W, uint16_t>) {
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    return _mm512_maskz_loadu_ps(m, p);
  }
}

// 32 consecutive elements as two f32 vectors in one fixed lane order: elements {0-3, 8-11,
// 16-19, 24-27} in `lo`, the others in `hi`. That is the order in which interleaving bf16 with
// zeros within each 128-bit lane widens it (one shuffle, no shift); f32 rows and the f32 vectors
// are permuted into the same order, so every product sums in the same order whatever the row's
// type, and bf16 rows give bit for bit the result of the same values in f32.
inline constexpr int kLoLanes[16] = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
inline constexpr int kHiLanes[16] = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};

TLALOC_AVX512_CORE_TARGET inline void PermutePair(const float* p, __m512& lo, __m512& hi) {
  const __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
  const __m512i lo_idx = _mm512_loadu_si512(kLoLanes), hi_idx = _mm512_loadu_si512(kHiLanes);
  lo = _mm512_permutex2var_ps(a, lo_idx, b);  // indices 0-15 pick from a, 16-31 from b
  hi = _mm512_permutex2var_ps(a, hi_idx, b);
}

template <typename W>
TLALOC_AVX512_CORE_TARGET inline void LoadRowPair(const W* p, __m512& lo, __m512& hi) {
  if constexpr (std::is_same_v<W, uint16_t>) {
    const __m512i v = _mm512_loadu_si512(p);
    lo = _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), v));
    hi = _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), v));
  } else {
    PermutePair(p, lo, hi);
  }
}

TLALOC_AVX512_CORE_TARGET inline void LoadVectorPair(const float* x, __m512& lo, __m512& hi) {
  PermutePair(x, lo, hi);
}

// Two accumulators per vector over 32-element steps keep two FMA chains in flight per vector;
// the kernel is bound by reading the row, not by arithmetic. The loops over vectors and rows are
// unrolled so the accumulators live in registers: GCC -O2 otherwise keeps the arrays in memory
// and every FMA waits on a store-to-load round trip. With `ahead`, the line that many bytes past
// each step is prefetched into L2 (rows read one after another: one stream per thread).
template <int S, typename W>
TLALOC_AVX512_CORE_TARGET void DotsAvx512(const float* const* x, const W* row, int64_t k,
                                          float* out, int64_t ahead = 0) {
  __m512 acc0[S], acc1[S];
  for (int s = 0; s < S; ++s) acc0[s] = acc1[s] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    if (ahead) {
      const char* p = reinterpret_cast<const char*>(row + i) + ahead;
      _mm_prefetch(p, _MM_HINT_T1);
      if constexpr (sizeof(W) == 4) _mm_prefetch(p + 64, _MM_HINT_T1);
    }
    __m512 w0, w1;
    LoadRowPair(row + i, w0, w1);
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      __m512 x0, x1;
      LoadVectorPair(x[s] + i, x0, x1);
      acc0[s] = _mm512_fmadd_ps(x0, w0, acc0[s]);
      acc1[s] = _mm512_fmadd_ps(x1, w1, acc1[s]);
    }
  }
  for (; i < k; i += 16) {
    int64_t rem = std::min<int64_t>(16, k - i);
    __mmask16 m = static_cast<__mmask16>((1u << rem) - 1u);
    __m512 w = LoadRowMasked(row + i, m);
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s)
      acc0[s] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x[s] + i), w, acc0[s]);
  }
  for (int s = 0; s < S; ++s) out[s] = SumLanes(acc0[s], acc1[s]);
}

// S (1 or 2) vectors against four rows at once: four independent streams per thread keep more
// memory reads in flight than one, and short rows (attention's keys, 128 elements) pay the
// per-row setup once per four. Each (row, vector) pair's arithmetic is exactly DotsAvx512<S>'s,
// so results do not depend on which kernel a row went through.
template <int S, typename W>
TLALOC_AVX512_CORE_TARGET void Dot4RowsAvx512(const float* const* x, const W* const* rows,
                                              int64_t k, float* out, int64_t out_s,
                                              int64_t prefetch_ahead) {
  __m512 acc0[4][S], acc1[4][S];
  for (int r = 0; r < 4; ++r)
    for (int v = 0; v < S; ++v) acc0[r][v] = acc1[r][v] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    __m512 x0[S], x1[S];
#pragma GCC unroll 2
    for (int v = 0; v < S; ++v) LoadVectorPair(x[v] + i, x0[v], x1[v]);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      // The same lines of rows further on: short rows (2 KiB of bf16 at k = 1024) end before
      // the hardware prefetcher ramps up on them. Into L2, not L1: on Zen 4, T0 prefetches
      // held the bf16 LM head to about 45% of the read bandwidth (they occupy L1's miss buffers
      // that the demand loads need), T1 reaches about 95% (docs/performance.md).
      if (prefetch_ahead) {
        const char* ahead = reinterpret_cast<const char*>(rows[r] + i + prefetch_ahead);
        _mm_prefetch(ahead, _MM_HINT_T1);
        if constexpr (sizeof(W) == 4) _mm_prefetch(ahead + 64, _MM_HINT_T1);
      }
      __m512 w0, w1;
      LoadRowPair(rows[r] + i, w0, w1);
#pragma GCC unroll 2
      for (int v = 0; v < S; ++v) {
        acc0[r][v] = _mm512_fmadd_ps(x0[v], w0, acc0[r][v]);
        acc1[r][v] = _mm512_fmadd_ps(x1[v], w1, acc1[r][v]);
      }
    }
  }
  for (; i < k; i += 16) {
    int64_t rem = std::min<int64_t>(16, k - i);
    __mmask16 m = static_cast<__mmask16>((1u << rem) - 1u);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512 w = LoadRowMasked(rows[r] + i, m);
#pragma GCC unroll 2
      for (int v = 0; v < S; ++v)
        acc0[r][v] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x[v] + i), w, acc0[r][v]);
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int v = 0; v < S; ++v) out[r + v * out_s] = SumLanes(acc0[r][v], acc1[r][v]);
}

template <int S, typename W>
void Dots(const float* const* x, const W* row, int64_t k, float* out) {
  if (kAvx512) {
    DotsAvx512<S, W>(x, row, k, out);
  } else if (kAvx2 && S <= 2) {
    DotsAvx2<S, W>(x, row, k, out);
  } else if (kAvx2) {
    // Four 256-bit accumulators per vector: more than two vectors would spill; the row is in L1
    // for the later ones.
    for (int s = 0; s < S; ++s) DotsAvx2<1, W>(x + s, row, k, out + s);
  } else {
    DotsPortable<S, W>(x, row, k, out);
  }
}

// Rows (each k contiguous elements of type W, `row_step` apart, batches `batch_step` apart)
// against S f32 vectors per batch (`vecs`: [batch][S][k]); result (b, s, r) at
// out + b * out_batch + s * out_s + r * out_r. Threads split the rows of all batches.
template <typename W>
void RowsTimesVectors(const W* rows, int64_t row_step, int64_t batch_step, int64_t num_rows,
                      const float* vecs, int s_count, int64_t batch, int64_t k, float* out,
                      int64_t out_batch, int64_t out_s, int64_t out_r, EvalContext& ctx) {
  const int64_t total = batch * num_rows;
  // Blocks of rows that stream about 64-256 KiB each, a multiple of the four-row kernel.
  const int64_t block = std::max<int64_t>(4, (int64_t{1} << 16) / std::max<int64_t>(k, 1) / 4 * 4);
  const int64_t row_bytes = std::max<int64_t>(1, k * static_cast<int64_t>(sizeof(W)));
  const int64_t ahead_rows = std::max<int64_t>(4, (kRowPrefetchBytes + row_bytes - 1) / row_bytes);
  // One vector against contiguous rows of 256 or more (decode's weight products): one row after
  // another, prefetching kRowPrefetchBytes on in the stream while that stays inside this batch's
  // matrix: one stream per thread, which the memory system serves faster than the four-row
  // kernel's four (decode on Zen 5, weights on 2 MiB pages: bf16 13-20%, f32 27-41% more
  // tokens/s; docs/performance.md, stop 36). Shorter rows (attention's keys) keep the four-row
  // kernel, which pays each row's setup once per four.
  const bool stream = kAvx512 && s_count == 1 && row_step == k && k >= 256;
  const int64_t matrix_bytes = num_rows * row_bytes;
  ParallelShares(ctx, total, block, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t bi = t / num_rows, r = t % num_rows;
      if (stream) {
        const float* x[1] = {vecs + bi * k};
        const int64_t ahead =
            (r + 1) * row_bytes + kRowPrefetchBytes <= matrix_bytes ? kRowPrefetchBytes : 0;
        DotsAvx512<1>(x, rows + bi * batch_step + r * k, k, out + bi * out_batch + r * out_r,
                      ahead);
        continue;
      }
      if (kAvx512 && s_count <= 2 && t + 4 <= end && r + 4 <= num_rows) {
        const W* four[4];
        for (int j = 0; j < 4; ++j) four[j] = rows + bi * batch_step + (r + j) * row_step;
        const float* x[2] = {vecs + bi * s_count * k, vecs + (bi * s_count + 1) * k};
        float res[8];
        // About 16 KiB ahead (at least the next four rows), while those rows are still in this
        // batch's matrix: 8-16 KiB ahead measured best on Zen 4, 32 KiB and more slower.
        const int64_t ahead = r + ahead_rows + 4 <= num_rows ? ahead_rows * row_step : 0;
        if (s_count == 1)
          Dot4RowsAvx512<1>(x, four, k, res, 4, ahead);
        else
          Dot4RowsAvx512<2>(x, four, k, res, 4, ahead);
        float* o = out + bi * out_batch + r * out_r;
        for (int v = 0; v < s_count; ++v)
          for (int j = 0; j < 4; ++j) o[j * out_r + v * out_s] = res[j + 4 * v];
        t += 3;
        continue;
      }
      const W* row = rows + bi * batch_step + r * row_step;
      const float* x[kMaxVectors];
      for (int s = 0; s < s_count; ++s) x[s] = vecs + (bi * s_count + s) * k;
      float res[kMaxVectors];
      WithVectorCount(s_count, [&](auto v) { Dots<decltype(v)::value>(x, row, k, res); });
      float* o = out + bi * out_batch + r * out_r;
      for (int s = 0; s < s_count; ++s) o[s * out_s] = res[s];
    }
  });
}

// out[0, n) += scale * row[0, n), row f32 or bf16 (the portable path; AVX-512 and AVX2 CPUs
// use ColumnsAvx512 and ColumnsAvx2At, which keep the same order of FMAs).
template <typename W>
void Axpy(float scale, const W* row, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = std::fma(scale, Widen(row[j]), out[j]);
}

// S f32 vectors per batch (`vecs`: [batch][S][k]) times B stored with its n columns contiguous
// (row p of B at `rows + p * row_step`): each output row accumulates scaled rows of B, so B is
// read once. Threads split batches and blocks of columns. Output rows are [batch][S][n].
// S vectors times `nb` <= 16 * V contiguous columns of B (row p at rows + p * row_step), the
// S x nb results kept in registers over all k rows: c[s * n + j] = sum_p vecs[s * k + p] *
// row_p[j], accumulated in order of p with one FMA each, exactly as Axpy accumulates.
// Row p at row_at(p) (the paged cache's rows go through a page table). The rows kColumnsAhead
// positions on are prefetched: the paged cache's rows of one head are 4 KiB runs scattered over
// the pool, where the hardware prefetcher starts again at every page (decode's P.V over 576
// cached positions read at 11 GB/s on Zen 5 without it).
inline constexpr int64_t kColumnsAhead = 16;
template <int S, int V, typename RowAt>
TLALOC_AVX512_CORE_TARGET void ColumnsAvx512At(const RowAt& row_at, const float* vecs, int64_t k,
                                               int64_t nb, float* c, int64_t n) {
  __m512 acc[S][V];
  for (int s = 0; s < S; ++s)
    for (int v = 0; v < V; ++v) acc[s][v] = _mm512_setzero_ps();
  __mmask16 mask[V];
  for (int v = 0; v < V; ++v) {
    const int64_t left = std::clamp<int64_t>(nb - 16 * v, 0, 16);
    mask[v] = static_cast<__mmask16>((1u << left) - 1u);
  }
  using W = std::remove_cv_t<std::remove_pointer_t<decltype(row_at(int64_t{0}))>>;
  const int64_t line_elements = 64 / sizeof(W);
  for (int64_t p = 0; p < k; ++p) {
    const auto* row = row_at(p);
    if (p + kColumnsAhead < k) {
      const auto* next = reinterpret_cast<const char*>(row_at(p + kColumnsAhead));
      for (int64_t j = 0; j < nb; j += line_elements)
        _mm_prefetch(next + j * sizeof(W), _MM_HINT_T0);
    }
    __m512 w[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) w[v] = LoadRowMasked(row + 16 * v, mask[v]);
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const __m512 xs = _mm512_set1_ps(vecs[s * k + p]);
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[s][v] = _mm512_fmadd_ps(xs, w[v], acc[s][v]);
    }
  }
  for (int s = 0; s < S; ++s)
    for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(c + s * n + 16 * v, mask[v], acc[s][v]);
}

// ColumnsAvx2At for any number of vectors, two per pass (two vectors' accumulators and the
// row's four vectors fill the 16 registers): each output's arithmetic is unchanged.
template <typename RowAt>
void ColumnsAvx2Any(const RowAt& row_at, const float* vecs, int s_count, int64_t k, int64_t nb,
                    float* c, int64_t n) {
  for (int s0 = 0; s0 < s_count; s0 += 2) {
    if (s_count - s0 >= 2) {
      ColumnsAvx2At<2>(row_at, vecs + s0 * k, k, nb, c + s0 * n, n);
    } else {
      ColumnsAvx2At<1>(row_at, vecs + s0 * k, k, nb, c + s0 * n, n);
    }
  }
}

// The column kernel this CPU runs (AVX-512 or AVX2; never called on others) for s_count <= 4
// vectors times `nb` columns whose row p is at row_at(p): one FMA per position, in order.
template <typename RowAt>
void ColumnsAt(const RowAt& row_at, const float* vecs, int s_count, int64_t k, int64_t nb, float* c,
               int64_t n) {
  if (!kAvx512) return ColumnsAvx2Any(row_at, vecs, s_count, k, nb, c, n);
  switch (s_count) {
    case 1:
      return nb > 64 ? ColumnsAvx512At<1, 8>(row_at, vecs, k, nb, c, n)
                     : ColumnsAvx512At<1, 4>(row_at, vecs, k, nb, c, n);
    case 2:
      return nb > 64 ? ColumnsAvx512At<2, 8>(row_at, vecs, k, nb, c, n)
                     : ColumnsAvx512At<2, 4>(row_at, vecs, k, nb, c, n);
    case 3:
      return ColumnsAvx512At<3, 4>(row_at, vecs, k, nb, c, n);
    default:
      return ColumnsAvx512At<4, 4>(row_at, vecs, k, nb, c, n);
  }
}

// The columns ColumnsAt takes per call: up to 128 on AVX-512 for one or two vectors (their 16
// accumulators and the row's 8 vectors fit the 32 registers, and a head's whole cached row of
// 128 is read as one run), 64 for more; kAvx2Columns on AVX2.
int64_t ColumnBlockWidth(int s_count) {
  if (!kAvx512) return kAvx2Columns;
  return s_count <= 2 ? 128 : 64;
}

template <typename W>
void VectorsTimesRows(const W* rows, int64_t row_step, int64_t batch_step, const float* vecs,
                      int s_count, int64_t batch, int64_t k, int64_t n, float* c,
                      EvalContext& ctx) {
  if (kAvx512 || kAvx2) {
    // Blocks of columns (ColumnBlockWidth) whose results stay in registers (attention's
    // probabilities times V in decode: no load and store of the output per cached position).
    const int64_t width = ColumnBlockWidth(s_count), blocks = (n + width - 1) / width;
    ParallelBlocks(ctx, batch * blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t bi = task / blocks, j0 = task % blocks * width;
        const int64_t nb = std::min<int64_t>(width, n - j0);
        const W* b = rows + bi * batch_step + j0;
        const float* v = vecs + bi * s_count * k;
        float* out = c + bi * s_count * n + j0;
        ColumnsAt([b, row_step](int64_t p) { return b + p * row_step; }, v, s_count, k, nb, out, n);
      }
    });
    return;
  }
  const int64_t block = std::min<int64_t>(n, 256), blocks = (n + block - 1) / block;
  ParallelBlocks(ctx, batch * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bi = task / blocks, j0 = task % blocks * block;
      const int64_t nb = std::min(block, n - j0);
      for (int s = 0; s < s_count; ++s) std::fill_n(c + (bi * s_count + s) * n + j0, nb, 0.0f);
      for (int64_t p = 0; p < k; ++p) {
        const W* row = rows + bi * batch_step + p * row_step + j0;
        for (int s = 0; s < s_count; ++s)
          Axpy(vecs[(bi * s_count + s) * k + p], row, c + (bi * s_count + s) * n + j0, nb);
      }
    }
  });
}

float ElementAt(const MatrixView& v, int64_t index) {
  if (v.type == ElementType::kBF16) {
    uint16_t bits;
    std::memcpy(&bits, v.data + index * 2, 2);
    return Bf16BitsToFloat(bits);
  }
  float f;
  std::memcpy(&f, v.data + index * 4, 4);
  return f;
}

// Gathers the small side as [batch][S][k] f32: vector s is row s (of A) or column s (of B).
std::vector<float> GatherVectors(const MatrixView& v, int64_t batch, int64_t count, int64_t k,
                                 bool vectors_are_rows) {
  std::vector<float> out(batch * count * k);
  const int64_t step = vectors_are_rows ? v.col_stride : v.row_stride;  // between elements
  const int64_t vec_step = vectors_are_rows ? v.row_stride : v.col_stride;
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t s = 0; s < count; ++s) {
      const int64_t base = bi * v.batch_stride + s * vec_step;
      float* dst = out.data() + (bi * count + s) * k;
      if (step == 1 && v.type == ElementType::kF32) {
        std::memcpy(dst, v.data + 4 * base, static_cast<size_t>(k) * 4);
      } else if (step == 1) {  // contiguous bf16: widen (decode attention's probabilities)
        const auto* src = reinterpret_cast<const uint16_t*>(v.data) + base;
        for (int64_t i = 0; i < k; ++i) dst[i] = Bf16BitsToFloat(src[i]);
      } else {
        for (int64_t i = 0; i < k; ++i) dst[i] = ElementAt(v, base + i * step);
      }
    }
  return out;
}

void RunRows(const MatrixView& big, int64_t row_step, const std::vector<float>& vecs, int s_count,
             int64_t batch, int64_t num_rows, int64_t k, float* c, int64_t out_batch, int64_t out_s,
             int64_t out_r, EvalContext& ctx) {
  if (big.type == ElementType::kBF16) {
    RowsTimesVectors(reinterpret_cast<const uint16_t*>(big.data), row_step, big.batch_stride,
                     num_rows, vecs.data(), s_count, batch, k, c, out_batch, out_s, out_r, ctx);
  } else {
    RowsTimesVectors(reinterpret_cast<const float*>(big.data), row_step, big.batch_stride, num_rows,
                     vecs.data(), s_count, batch, k, c, out_batch, out_s, out_r, ctx);
  }
}

// ---- BLAS ----------------------------------------------------------------------------------

// f32 copy of a whole bf16 view (same layout); f32 views are used as they are.
const float* AsF32(const MatrixView& v, int64_t elements, std::vector<float>& scratch) {
  if (v.type == ElementType::kF32) return reinterpret_cast<const float*>(v.data);
  scratch.resize(elements);
  const auto* p = reinterpret_cast<const uint16_t*>(v.data);
  for (int64_t i = 0; i < elements; ++i) scratch[i] = Bf16BitsToFloat(p[i]);
  return scratch.data();
}

// OpenBLAS's own threads spin between calls and would compete with the interpreter's pool on
// the same cores; products are split over the pool instead, each block a one-thread sgemm.
void UseSingleThreadedBlas() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

// The fewest blocks BlasMatmulViews splits an f32 product into, rows permitting.
constexpr int64_t kMinBlasTasks = 4;

void BlasMatmulViews(const MatrixView& a, const MatrixView& b, int64_t batch, int64_t m, int64_t k,
                     int64_t n, float* c, EvalContext& ctx) {
  UseSingleThreadedBlas();
  std::vector<float> a_scratch;
  const float* pa = AsF32(a, batch * m * k, a_scratch);
  const bool a_trans = a.row_stride == 1 && a.col_stride != 1;
  const bool b_trans = b.row_stride == 1 && b.col_stride != 1;
  const int lda = static_cast<int>(a_trans ? m : k);
  // Blocks of 256 columns of B; bf16 B (weights) is widened one block at a time, so the f32
  // copy stays in cache and no full-size f32 weight is ever held. Rows of A split too when B
  // needs no widening.
  const int64_t n_block = std::min<int64_t>(n, 256);
  const int64_t n_blocks = (n + n_block - 1) / n_block;
  int64_t m_block = b.type == ElementType::kF32 ? std::min<int64_t>(m, 256) : m;
  // A product with few output blocks and a long contraction (the LM head's input gradient:
  // [256, vocab] x [vocab, 64], one block) would run on one thread; smaller row blocks give the
  // pool work to share. A fixed rule (not the thread count), so the blocks, and the bits, do
  // not depend on the pool.
  while (b.type == ElementType::kF32 && m_block > 32 &&
         batch * n_blocks * ((m + m_block - 1) / m_block) < kMinBlasTasks)
    m_block = (m_block + 1) / 2;
  const int64_t m_blocks = (m + m_block - 1) / m_block;
  ParallelBlocks(ctx, batch * m_blocks * n_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> b_block;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bi = task / (m_blocks * n_blocks);
      const int64_t i0 = (task / n_blocks) % m_blocks * m_block;
      const int64_t j0 = task % n_blocks * n_block;
      const int64_t mb = std::min(m_block, m - i0), nb = std::min(n_block, n - j0);
      const float* ab = pa + bi * m * k + (a_trans ? i0 : i0 * k);
      const float* pb;
      int ldb;
      if (b.type == ElementType::kF32) {
        pb = reinterpret_cast<const float*>(b.data) + bi * b.batch_stride + (b_trans ? j0 * k : j0);
        ldb = static_cast<int>(b_trans ? k : n);
      } else {
        b_block.resize(nb * k);
        const auto* src = reinterpret_cast<const uint16_t*>(b.data) + bi * b.batch_stride;
        if (b_trans) {  // columns j are contiguous rows of k
          for (int64_t j = 0; j < nb; ++j)
            for (int64_t i = 0; i < k; ++i)
              b_block[j * k + i] = Bf16BitsToFloat(src[(j0 + j) * k + i]);
          ldb = static_cast<int>(k);
        } else {
          for (int64_t i = 0; i < k; ++i)
            for (int64_t j = 0; j < nb; ++j)
              b_block[i * nb + j] = Bf16BitsToFloat(src[i * n + j0 + j]);
          ldb = static_cast<int>(nb);
        }
        pb = b_block.data();
      }
      cblas_sgemm(CblasRowMajor, a_trans ? CblasTrans : CblasNoTrans,
                  b_trans ? CblasTrans : CblasNoTrans, static_cast<int>(mb), static_cast<int>(nb),
                  static_cast<int>(k), 1.0f, ab, lda, pb, ldb, 0.0f, c + bi * m * n + i0 * n + j0,
                  static_cast<int>(n));
    }
  });
}

// ---- Paged rows (decode attention over the paged KV cache, read in place) -------------------

// The pool row of position p of batch (b, h): page table[b][p / page] (clamped into the pool,
// as gather clamps its start indices), head h, row p % page.
template <typename W>
const W* PagedRow(const PagedRows& pr, int64_t b, int64_t h, int64_t p) {
  const int64_t id = std::clamp<int64_t>(pr.table[b * pr.blocks + p / pr.page], 0, pr.pages - 1);
  return reinterpret_cast<const W*>(pr.pool) +
         ((id * pr.heads + h) * pr.page + p % pr.page) * pr.row_len;
}

// RowsTimesVectors' arithmetic per (row, vector) pair, the rows found through the page table:
// one task per (batch, page).
template <typename W>
void PagedRowsTimesVectors(const std::vector<float>& vecs, int s_count, const PagedRows& pr,
                           int64_t bsz, float* c, EvalContext& ctx) {
  const int64_t n = pr.blocks * pr.page, k = pr.row_len, batch = bsz * pr.heads;
  const int64_t grain =
      std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, pr.page * k));
  // Tasks in pool order: a page's heads are contiguous, so consecutive tasks stream through it;
  // the rows about 16 KiB on are prefetched (RowsTimesVectors' distance).
  const int64_t ahead = std::max<int64_t>(4, (kRowPrefetchBytes + k * sizeof(W) - 1) /
                                                 std::max<int64_t>(1, k * sizeof(W))) *
                        k;
  // On AVX2 the vectors are permuted once per task rather than once per row (DotsAvx2Permuted,
  // the same bits): a row of 128 is four steps, whose permutes cost about as much as its FMAs.
  const bool permuted = !kAvx512 && kAvx2 && s_count <= 2 && k % 32 == 0;
  ctx.ParallelFor(batch * pr.blocks, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> xp(permuted ? static_cast<size_t>(s_count * k) : 0);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / (pr.blocks * pr.heads), h = task % pr.heads;
      const int64_t first = task / pr.heads % pr.blocks * pr.page, bi = b * pr.heads + h;
      const float* x[kMaxVectors];
      for (int s = 0; s < s_count; ++s) x[s] = vecs.data() + (bi * s_count + s) * k;
      float* o = c + bi * s_count * n;
      const W* base = PagedRow<W>(pr, b, h, first);  // the page's rows are contiguous
      if (permuted) {
        const float* xs[2];
        for (int s = 0; s < s_count; ++s) {
          PermuteForSteps32(x[s], k, xp.data() + s * k);
          xs[s] = xp.data() + s * k;
        }
        for (int64_t r = first; r < first + pr.page; ++r) {
          const W* row = base + (r - first) * k;
          float res[2];
          if (s_count == 1)
            DotsAvx2Permuted<1, W>(xs, row, k, res);
          else
            DotsAvx2Permuted<2, W>(xs, row, k, res);
          for (int v = 0; v < s_count; ++v) o[v * n + r] = res[v];
        }
        continue;
      }
      for (int64_t r = first; r < first + pr.page;) {
        if (kAvx512 && s_count <= 2 && r + 4 <= first + pr.page) {
          const W* four[4];
          for (int j = 0; j < 4; ++j) four[j] = base + (r - first + j) * k;
          float res[8];
          if (s_count == 1)
            Dot4RowsAvx512<1>(x, four, k, res, 4, ahead);
          else
            Dot4RowsAvx512<2>(x, four, k, res, 4, ahead);
          for (int v = 0; v < s_count; ++v)
            for (int j = 0; j < 4; ++j) o[v * n + r + j] = res[j + 4 * v];
          r += 4;
          continue;
        }
        const W* row = base + (r - first) * k;
        float res[kMaxVectors];
        WithVectorCount(s_count, [&](auto v) { Dots<decltype(v)::value>(x, row, k, res); });
        for (int v = 0; v < s_count; ++v) o[v * n + r] = res[v];
        ++r;
      }
    }
  });
}

// VectorsTimesRows' arithmetic (each output one FMA per position, in position order, from 0),
// the rows found through the page table.
template <typename W>
void PagedVectorsTimesRows(const std::vector<float>& vecs, int s_count, const PagedRows& pr,
                           int64_t bsz, float* c, EvalContext& ctx) {
  const int64_t k = pr.blocks * pr.page, n = pr.row_len, batch = bsz * pr.heads;
  auto pages_of = [&](int64_t bi, std::vector<const W*>& bases) {
    bases.resize(static_cast<size_t>(pr.blocks));
    for (int64_t m = 0; m < pr.blocks; ++m)
      bases[m] = PagedRow<W>(pr, bi / pr.heads, bi % pr.heads, m * pr.page);
  };
  if (kAvx512 || kAvx2) {
    const int64_t width = ColumnBlockWidth(s_count), blocks = (n + width - 1) / width;
    ParallelBlocks(ctx, batch * blocks, 1, [&](int64_t begin, int64_t end) {
      std::vector<const W*> bases;
      for (int64_t task = begin; task < end; ++task) {
        const int64_t bi = task / blocks, j0 = task % blocks * width;
        const int64_t nb = std::min<int64_t>(width, n - j0);
        pages_of(bi, bases);
        const float* v = vecs.data() + bi * s_count * k;
        float* out = c + bi * s_count * n + j0;
        auto run = [&](const auto& row_at) { ColumnsAt(row_at, v, s_count, k, nb, out, n); };
        const int64_t page = pr.page, row_len = pr.row_len;
        const W* const* pages = bases.data();
        if ((page & (page - 1)) == 0) {  // a power of two (the engine's 16): no division per row
          const int shift = std::countr_zero(static_cast<uint64_t>(page));
          run([pages, shift, page, row_len, j0](int64_t p) {
            return pages[p >> shift] + (p & (page - 1)) * row_len + j0;
          });
        } else {
          run([pages, page, row_len, j0](int64_t p) {
            return pages[p / page] + (p % page) * row_len + j0;
          });
        }
      }
    });
    return;
  }
  ParallelBlocks(ctx, batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<const W*> bases;
    for (int64_t bi = begin; bi < end; ++bi) {
      pages_of(bi, bases);
      for (int s = 0; s < s_count; ++s) std::fill_n(c + (bi * s_count + s) * n, n, 0.0f);
      for (int64_t p = 0; p < k; ++p) {
        const W* row = bases[p / pr.page] + (p % pr.page) * pr.row_len;
        for (int s = 0; s < s_count; ++s)
          Axpy(vecs[(bi * s_count + s) * k + p], row, c + (bi * s_count + s) * n, n);
      }
    }
  });
}

}  // namespace

void PagedMatmul(const MatrixView& a, int64_t m, const PagedRows& rows, int64_t bsz, bool values,
                 float* c, EvalContext& ctx) {
  const int64_t positions = rows.blocks * rows.page;
  const int64_t k = values ? positions : rows.row_len;
  const std::vector<float> vecs = GatherVectors(a, bsz * rows.heads, m, k, true);
  const int s_count = static_cast<int>(m);
  if (rows.type == ElementType::kBF16) {
    if (values)
      PagedVectorsTimesRows<uint16_t>(vecs, s_count, rows, bsz, c, ctx);
    else
      PagedRowsTimesVectors<uint16_t>(vecs, s_count, rows, bsz, c, ctx);
  } else if (values) {
    PagedVectorsTimesRows<float>(vecs, s_count, rows, bsz, c, ctx);
  } else {
    PagedRowsTimesVectors<float>(vecs, s_count, rows, bsz, c, ctx);
  }
}

bool BlasMatmulTransposedBlocks(
    const float* a, int64_t m, int64_t k, int64_t n,
    const std::function<void(int64_t j0, int64_t nb, float* block)>& fill_b, float* c,
    EvalContext& ctx) {
  // ViewMatmul's choice for an f32 [m, k] A times a transposed f32 B: BlasMatmulViews with
  // 256 x 256 blocks exactly when none of the earlier paths applies and the row blocks are not
  // split further (four or more column blocks).
  constexpr int64_t kBlock = 256;
  const int64_t n_blocks = (n + kBlock - 1) / kBlock;
  if (m <= kMaxVectors || n <= kMaxVectors || k <= 0 || !OpenBlasCoreFitsCpu() ||
      n_blocks < kMinBlasTasks)
    return false;
  UseSingleThreadedBlas();
  const int64_t m_block = std::min<int64_t>(m, kBlock);
  const int64_t m_blocks = (m + m_block - 1) / m_block;
  ParallelBlocks(ctx, n_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> block;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t j0 = task * kBlock, nb = std::min(kBlock, n - j0);
      block.resize(static_cast<size_t>(nb * k));
      fill_b(j0, nb, block.data());
      for (int64_t ib = 0; ib < m_blocks; ++ib) {
        const int64_t i0 = ib * m_block, mb = std::min(m_block, m - i0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(mb),
                    static_cast<int>(nb), static_cast<int>(k), 1.0f, a + i0 * k,
                    static_cast<int>(k), block.data(), static_cast<int>(k), 0.0f, c + i0 * n + j0,
                    static_cast<int>(n));
      }
    }
  });
  return true;
}

float DotF32(const float* x, const float* row, int64_t k) {
  float out;
  Dots<1>(&x, row, k, &out);
  return out;
}

float DotBF16(const float* x, const uint16_t* row, int64_t k) {
  float out;
  Dots<1>(&x, row, k, &out);
  return out;
}

bool MatmulUsesAvx512() { return kAvx512; }

void ViewMatmul(const MatrixView& a, const MatrixView& b, int64_t batch, int64_t m, int64_t k,
                int64_t n, float* c, EvalContext& ctx) {
  // 2 to 64 rows of A against bf16 rows of B (a batched decode step): B read once for all.
  if (SmallMMatmul(a, b, batch, m, k, n, c, ctx)) return;
  // Few rows of A and B's columns contiguous over k: each column of B is a row to stream.
  if (m <= kMaxVectors && b.row_stride == 1) {
    std::vector<float> vecs = GatherVectors(a, batch, m, k, /*vectors_are_rows=*/true);
    RunRows(b, b.col_stride, vecs, static_cast<int>(m), batch, n, k, c, m * n, n, 1, ctx);
    return;
  }
  // Few rows of A and B's columns contiguous (B row-major [k, n], e.g. attention's values).
  if (m <= kMaxVectors && b.col_stride == 1) {
    std::vector<float> vecs = GatherVectors(a, batch, m, k, /*vectors_are_rows=*/true);
    if (b.type == ElementType::kBF16) {
      VectorsTimesRows(reinterpret_cast<const uint16_t*>(b.data), b.row_stride, b.batch_stride,
                       vecs.data(), static_cast<int>(m), batch, k, n, c, ctx);
    } else {
      VectorsTimesRows(reinterpret_cast<const float*>(b.data), b.row_stride, b.batch_stride,
                       vecs.data(), static_cast<int>(m), batch, k, n, c, ctx);
    }
    return;
  }
  // Few columns of B and A's rows contiguous over k.
  if (n <= kMaxVectors && a.col_stride == 1) {
    std::vector<float> vecs = GatherVectors(b, batch, n, k, /*vectors_are_rows=*/false);
    RunRows(a, a.row_stride, vecs, static_cast<int>(n), batch, m, k, c, m * n, 1, n, ctx);
    return;
  }
  if (DnnlMatmul(a, b, batch, m, k, n, c, ctx)) return;
  BlasMatmulViews(a, b, batch, m, k, n, c, ctx);
}

}  // namespace tlaloc::cpu
