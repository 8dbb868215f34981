// int8 grouped products for the MoE experts (see ragged_dot_int8.h).
#include "ragged_dot_int8.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ragged_dot_grouped.h"
#include "reduction_matmul.h"
#include "reduction_matmul_q8.h"
#include "reduction_matmul_q8_packed.h"
#include "support/avx512_intrinsics.h"
#include "tlaloc/cpu/blas_kernels.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/half.h"

namespace tlaloc::cpu {

namespace {

constexpr int64_t kBlock = kQ8_0BlockElements;  // the q8_0 block (ir/quant_format.h)
// Weight rows per prefill task: the f32 grouped kernel's column block (ragged_dot_grouped.cc).
constexpr int64_t kRowBlock = 256;

// TLALOC_RAGGED_DOT=per_group turns the grouped passes off, as for float experts.
bool GroupedWanted() {
  static const bool wanted = [] {
    const char* env = std::getenv("TLALOC_RAGGED_DOT");
    return !(env && std::strcmp(env, "per_group") == 0);
  }();
  return wanted;
}

const bool kAvx512 = HasAvx512Core();

// rows x k of s8 values times their f16 block scales into f32 `out` (row-major, k a multiple of
// 32): each value times its block's scale, exact in f32 (the unfused chain's multiply).
TLALOC_AVX512_CORE_TARGET void DequantiseRowsAvx512(const int8_t* w, const uint16_t* scales,
                                                    int64_t rows, int64_t k, float* out) {
  const int64_t per_row = k / kBlock;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < per_row; ++b) {
      const __m512 d = _mm512_set1_ps(HalfBitsToFloat(scales[r * per_row + b]));
      const int8_t* in = w + r * k + b * kBlock;
      float* o = out + r * k + b * kBlock;
      for (int h = 0; h < 2; ++h) {
        const __m512i v =
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16 * h)));
        _mm512_storeu_ps(o + 16 * h, _mm512_mul_ps(_mm512_cvtepi32_ps(v), d));
      }
    }
}

void DequantiseRows(const int8_t* w, const uint16_t* scales, int64_t rows, int64_t k, float* out) {
  if (kAvx512) return DequantiseRowsAvx512(w, scales, rows, k, out);
  const int64_t per_row = k / kBlock;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < per_row; ++b) {
      const float d = HalfBitsToFloat(scales[r * per_row + b]);
      for (int64_t i = 0; i < kBlock; ++i)
        out[r * k + b * kBlock + i] = static_cast<float>(w[r * k + b * kBlock + i]) * d;
    }
}

struct Group {
  int64_t expert = 0, start = 0, rows = 0;
};

// Groups the f32 path runs through sgemm (TLALOC_RAGGED_DOT=sgemm, or a CPU without AVX-512),
// all in one pass over the pool: a task per (group, block of 256 weight rows), each on one thread,
// dequantising its block into the thread's buffer and running one single-thread sgemm on it. That
// is the call the f32 grouped kernel makes for the same block of the dequantised stack, so the
// results are its bits, while only a block of f32 weights per thread exists instead of the [G, N,
// K] stack.
void GroupedSgemm(const float* x, const int8_t* w, const uint16_t* scales, int64_t n, int64_t k,
                  const std::vector<Group>& groups, float* c, EvalContext& ctx) {
  static const bool single_threaded_blas = [] {
    openblas_set_num_threads(1);  // the pool's threads run the tasks; OpenBLAS's would compete
    return true;
  }();
  (void)single_threaded_blas;
  const int64_t blocks = (n + kRowBlock - 1) / kRowBlock, per_row = k / kBlock;
  ForEachTask(ctx, static_cast<int64_t>(groups.size()) * blocks, [&](int64_t t) {
    thread_local std::vector<float> dense;
    dense.resize(static_cast<size_t>(kRowBlock * k));
    const Group& g = groups[t / blocks];
    const int64_t j0 = t % blocks * kRowBlock, nb = std::min(kRowBlock, n - j0);
    DequantiseRows(w + (g.expert * n + j0) * k, scales + (g.expert * n + j0) * per_row, nb, k,
                   dense.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(g.rows),
                static_cast<int>(nb), static_cast<int>(k), 1.0f, x + g.start * k,
                static_cast<int>(k), dense.data(), static_cast<int>(k), 0.0f, c + g.start * n + j0,
                static_cast<int>(n));
  });
}

// Groups the f32 path runs through its tile kernel, all in one pass over the pool: a task per
// (group, block of 96 weight rows). Decode's groups (up to four rows) take the int8 tile kernel,
// which dequantises in registers. Larger ones dequantise kChunkRows of their expert's rows at a
// time into the thread's buffer (in L2) and run the f32 tile kernel on them, so that each value
// is dequantised once, not once per four rows. Every output is its own sum in the tile kernels,
// so both return the bits of one call on the dequantised stack, while memory traffic stays the
// s8 rows.
void GroupedTiles(const float* x, const int8_t* w, const uint16_t* scales, int64_t n, int64_t k,
                  const std::vector<Group>& groups, float* c, EvalContext& ctx) {
  constexpr int64_t kTaskRows = 96, kChunkRows = 24;
  const int64_t blocks = (n + kTaskRows - 1) / kTaskRows, per_row = k / kBlock;
  ForEachTask(ctx, static_cast<int64_t>(groups.size()) * blocks, [&](int64_t t) {
    const Group& g = groups[t / blocks];
    const int64_t end = std::min(n, t % blocks * kTaskRows + kTaskRows);
    if (g.rows <= kMaxVectors) {  // decode: dequantised in registers, once per value
      const int64_t j0 = t % blocks * kTaskRows;
      Int8RowsTimesRowsT(x + g.start * k, k, g.rows, w + (g.expert * n + j0) * k,
                         scales + (g.expert * n + j0) * per_row, end - j0, k, c + g.start * n + j0,
                         n);
      return;
    }
    thread_local std::vector<float> dense;
    dense.resize(static_cast<size_t>(kChunkRows * k));
    for (int64_t j0 = t % blocks * kTaskRows; j0 < end; j0 += kChunkRows) {
      const int64_t nb = std::min(kChunkRows, end - j0);
      DequantiseRows(w + (g.expert * n + j0) * k, scales + (g.expert * n + j0) * per_row, nb, k,
                     dense.data());
      F32RowsTimesRowsT(x + g.start * k, k, g.rows, dense.data(), k, nb, k, c + g.start * n + j0,
                        n);
    }
  });
}

}  // namespace

Status RaggedDotInt8(const Literal& x, const Literal& w, const Literal& scales,
                     const Literal& group_sizes, Literal& c, EvalContext& ctx,
                     Int8Activations mode) {
  const int64_t m = x.dims()[0], k = x.dims()[1];
  const int64_t experts = w.dims()[0], n = w.dims()[1];
  const int64_t blocks = scales.dims()[2];
  float* out = c.span<float>().data();
  std::fill(out, out + m * n, 0.0f);  // rows in no group stay zero
  const float* xs = x.span<float>().data();
  const int8_t* ws = w.span<int8_t>().data();
  const uint16_t* ss = scales.span<uint16_t>().data();
  if (n == 0 || k == 0) return OkStatus();
  // Each group's rows, clipped to the M there are (as chlo.ragged_dot clips them).
  std::vector<Group> groups;
  int64_t start = 0;
  for (int64_t g = 0; g < std::min(experts, group_sizes.num_elements()); ++g) {
    const int64_t size = group_sizes.GetAsInt64(g);
    if (size < 0)
      return InvalidArgument("chlo.ragged_dot (int8 experts): group_sizes[" + std::to_string(g) +
                             "] = " + std::to_string(size) + " is negative");
    const int64_t begin = std::min(start, m), rows = std::min(start + size, m) - begin;
    start = std::min(start + size, m);
    if (rows > 0) groups.push_back({g, begin, rows});
  }
  if (mode == Int8Activations::kQ8_0) {
    // Every group in one pass over the pool on the experts packed once (kept per buffer), each
    // row quantised once: the in-order sums, as the composite's decomposition adds them.
    const bool one_pass = GroupedWanted();
    std::vector<Q8RowGroup> all;
    for (const Group& g : groups) all.push_back({g.expert, g.start, g.rows});
    if (one_pass && n % 32 == 0)
      if (auto packed = CachedQ8Weights(w, scales, ctx)) {
        Int8MatmulQ8_0PackedGroups(xs, m, *packed, n, all, out, ctx);
        return OkStatus();
      }
    // No packed copy (no layout for this CPU, TLALOC_INT8_REPACK=0): the tile kernel's groups in
    // one pass, the rest (decode's) each by the in-order row kernel, all read in place.
    std::vector<Q8RowGroup> tiled;
    for (const Group& g : groups)
      if (one_pass && g.rows > kQ8RowStreamMaxRows) tiled.push_back({g.expert, g.start, g.rows});
    Int8MatmulQ8_0Groups(xs, m, ws, ss, n, k, tiled, out, ctx);
    for (const Group& g : groups)
      if (!one_pass || g.rows <= kQ8RowStreamMaxRows)
        Int8MatmulQ8_0(xs + g.start * k, g.rows, ws + g.expert * n * k, ss + g.expert * n * blocks,
                       n, k, out + g.start * n, ctx, Q8Kernel::kInOrder);
    return OkStatus();
  }
  // Each group through the kernel chlo.ragged_dot would give it on the dequantised stack, so
  // that the results are its bits: the tile kernel's and sgemm's groups in one pass over the
  // pool each, the matrix-vector kernel's through the dense int8 kernel (the same sums, its s8
  // rows streamed over all threads). ViewMatmul's larger products (TLALOC_RAGGED_DOT=per_group,
  // or no OpenBLAS kernel set fitting the CPU) go there too, whose bits may differ.
  std::vector<Group> tiles, sgemm, each;
  for (const Group& g : groups) {
    switch (F32ExpertKernelFor(g.rows)) {
      case F32ExpertKernel::kTiles:
        tiles.push_back(g);
        break;
      case F32ExpertKernel::kSgemm:
        sgemm.push_back(g);
        break;
      default:
        each.push_back(g);
    }
  }
  GroupedTiles(xs, ws, ss, n, k, tiles, out, ctx);
  GroupedSgemm(xs, ws, ss, n, k, sgemm, out, ctx);
  for (const Group& g : each)
    Int8Matmul(xs + g.start * k, g.rows, ws + g.expert * n * k, ss + g.expert * n * blocks, n, k,
               out + g.start * n, ctx);
  return OkStatus();
}

}  // namespace tlaloc::cpu
