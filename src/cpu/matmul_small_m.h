// Products of a few rows (2 to kSmallMMaxRows: a batched decode step's activations, a short
// prompt's) with bf16 weights stored as contiguous rows over k: each weight row is read once from
// memory for all the rows of A (the matrix-vector kernel reads the weights once per group of at
// most kMaxVectors vectors, permuting each vector again for every row; oneDNN packs the weights on
// every call). Every (row of A, weight row) product has exactly the arithmetic of the
// matrix-vector kernel (reduction_matmul.cc's DotsAvx512: f32 FMAs into two accumulators in the
// same lane order, then the same lane sum), so a sequence's logits do not depend on how many
// others share its step. On AVX2 + FMA CPUs without AVX-512 it runs matmul_small_m_avx2.h's tiles
// with the same bits (DotsAvx2's halves of those accumulators); on CPUs with neither the kernel
// is off and such products go to BLAS, whose sums are ordered otherwise. bf16 activations run two
// of those FMAs per lane as one VDPBF16PS where the CPU has it (the same bits; matmul_small_m.cc
// says why), twice the products per instruction. TLALOC_SMALL_M_MATMUL=0 turns the kernel off,
// =fma keeps it on FMAs only.
#pragma once

#include <cstdint>

#include "reduction_matmul.h"

namespace tlaloc::cpu {

// The most rows of A the kernel takes; larger products (long prompts) go to oneDNN or BLAS.
inline constexpr int64_t kSmallMMaxRows = 64;

// How the tiles of bf16 activations get each weight row into VDPBF16PS's operand order (all
// give the same bits; matmul_bench's BM_SmallMKernel compares their speeds).
enum class SmallMTiles {
  // TLALOC_SMALL_M_TILES's choice (pair, group, packed or stream), else kStream for up to 4
  // vectors with rows contiguous, kPacked otherwise
  kDefault,
  kPerPair,   // 4 rows x 2 vectors, each tile unpacking its rows again (the first kernel)
  kPerGroup,  // 3 rows x 4 vectors, each tile unpacking its rows again
  // 3 rows x 4 vectors; for k <= 1024 and more than 8 vectors the first tile also stores its
  // rows unpacked into an L1 buffer that the other vectors' tiles read (unpacked once per row,
  // not once per 4 vectors).
  kPacked,
  // rows one after another (one stream per thread, prefetched 16 KiB on), each against all the
  // vectors, 4 at a time; for rows stored contiguously (else kPacked)
  kStream,
};

// C[b] = A[b] (m x k) * B[b] (k x n) as ViewMatmul defines it, for 2 <= m <= kSmallMMaxRows, B
// bf16 with its columns contiguous over k (b.row_stride == 1), on AVX-512 or AVX2 + FMA CPUs.
// Returns false, writing nothing, when the product is not one of these. On AVX2 CPUs `tiles`
// picks SmallMAvx2Tiles: kPerPair 2 weight rows x 1 vector, the others 1 row x 3 vectors.
bool SmallMMatmul(const MatrixView& a, const MatrixView& b, int64_t batch, int64_t m, int64_t k,
                  int64_t n, float* c, EvalContext& ctx, SmallMTiles tiles = SmallMTiles::kDefault);

}  // namespace tlaloc::cpu
