// Internal to the q8_0 kernels (reduction_matmul_q8.cc, reduction_matmul_q8_packed.cc): the
// activations as the VNNI kernels read them, and the tile packing both kernels share.
#pragma once

#include <cstdint>
#include <vector>

#include "tlaloc/ir/op_registry.h"
#include "tlaloc/ir/quant_format.h"

namespace tlaloc::cpu::q8_internal {

inline constexpr int64_t kBlock = kQ8_0BlockElements;  // the q8_0 block (ir/quant_format.h)
// Rows of w in one VNNI tile (two vectors of sixteen int32 lanes).
inline constexpr int64_t kTileCols = 32;

// One row of activations as the kernels read it: q padded with zeros to a multiple of 64 bytes,
// dx and the correction padded to a multiple of 16 blocks (zero scale: padding adds nothing).
struct QuantizedRows {
  int64_t k = 0, padded_k = 0, padded_blocks = 0;
  std::vector<int8_t> q;
  std::vector<float> dx;
  std::vector<int32_t> correction;  // -128 * sum of the block's q
  const int8_t* Q(int64_t r) const { return q.data() + r * padded_k; }
  const float* Dx(int64_t r) const { return dx.data() + r * padded_blocks; }
  const int32_t* Correction(int64_t r) const { return correction.data() + r * padded_blocks; }
};

// One block of 32 rounded as QuantizeRowQ8_0 rounds it, in scalar code: q, the f32 value of its
// f16 scale (dx, if not null) and its bits (d_bits, if not null); returns sum(q). The vector
// forms give the same bits (tests/cpu/reduction_matmul_q8_avx2_test.cc).
int32_t QuantizeBlockPortable(const float* x, int8_t* q, float* dx, uint16_t* d_bits);

// x [m, k] rounded per 32-block as QuantizeRowQ8_0 does (over the pool when it is large).
QuantizedRows QuantizeRows(const float* x, int64_t m, int64_t k, EvalContext& ctx);

#if defined(__x86_64__)
// The weight bytes of a tile: rows j0..j0+31 of w [n, k] (rows past n read as zeros). For block
// b and four-byte group g, the 64 bytes at packed + ((b * 8 + g) * 2 + h) * 64 are bytes
// 4g..4g+3 of block b of rows j0 + 16h .. j0 + 16h + 15, plus 128 (so that vpdpbusd takes them
// as its unsigned side). Needs AVX512-VNNI (Q8UsesVnni()); packed is 64-byte aligned.
void PackTileBytes(const int8_t* w, int64_t n, int64_t k, int64_t j0, uint8_t* packed);
#endif

}  // namespace tlaloc::cpu::q8_internal
