// The small-M bf16 kernel's AVX2 + FMA path (matmul_small_m.h's SmallMMatmul on CPUs without
// AVX-512): each weight row read once for a tile of several rows of A, every (row of A, weight
// row) product with DotsAvx2's FMAs in its order (dots_avx2.h), so the matrix-vector kernel's
// bits, which are also the AVX-512 kernel's.
#pragma once

#include <cstdint>

#include "reduction_matmul.h"

namespace tlaloc::cpu {

// The shapes of the AVX2 tiles (weight rows x vectors; 4 ymm accumulators per pair, 16 ymm
// registers): all give the same bits.
enum class SmallMAvx2Tiles {
  kOneRowThreeVectors,  // 12 accumulators; each weight row widened once per 3 vectors
  kTwoRowsOneVector,    // 8 accumulators; each vector loaded once per 2 weight rows
};

// C[b] = A[b] * B[b]^T for bf16 rows of B (`weights`, rows b.col_stride apart, batches
// b.batch_stride apart) and A's rows already in the AVX-512 kernel's layout: `x` [batch][m]
// [x_step], each whole 32-block of k permuted into the weights' lane order (matmul_small_m.cc's
// kLoLanes then kHiLanes), the tail past them in place and zero-padded to x_step (a multiple of
// 16). Takes the AVX2 and FMA instructions: the caller checks HasAvx2().
void SmallMAvx2(const uint16_t* weights, const MatrixView& b, int64_t batch, int64_t m, int64_t k,
                int64_t n, const float* x, int64_t x_step, float* c, EvalContext& ctx,
                SmallMAvx2Tiles tiles);

}  // namespace tlaloc::cpu
