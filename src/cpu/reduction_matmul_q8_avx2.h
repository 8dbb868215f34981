// Internal to the q8_0 kernels (reduction_matmul_q8.cc): the AVX2 + FMA forms, for CPUs without
// AVX512-VNNI. They give exactly the portable loop's bits (each block's exact int32 sum times
// f32(dx * dw), rounded, then added to its output in block order), so every Q8Kernel but
// kPortable may run them and all agree with the tlaloc.int8_linear decomposition.
#pragma once

#include <cstdint>
#include <span>

#include "reduction_matmul_q8.h"
#include "reduction_matmul_q8_internal.h"
#include "tlaloc/ir/op_registry.h"

namespace tlaloc::cpu::q8_internal {

#if defined(__x86_64__)
// Whether the AVX2 kernels below may run (AVX2, FMA and F16C present).
bool Q8UsesAvx2();

// One block of 32 as QuantizeBlockPortable rounds it (the same q, dx and d bits); returns sum(q).
int32_t QuantizeBlockAvx2(const float* x, int8_t* q, float* dx, uint16_t* d_bits);

// For each group: c's rows of the group = xq's rows of the group times expert `expert` of the
// stack w [E, n, k] (scales [E, n, k / 32]) transposed, with the portable loop's bits. A plain
// product is one group {0, 0, m}. Needs Q8UsesAvx2().
void Avx2Groups(const QuantizedRows& xq, const int8_t* w, const uint16_t* scales, int64_t n,
                int64_t k, std::span<const Q8RowGroup> groups, float* c, EvalContext& ctx);

// The AVX2 packed form (reduction_matmul_q8_packed.h's Q8Layout::kAvx2): tiles of
// kAvx2TileRows weight rows. A tile is a run of chunks of four blocks; a chunk is 1088 bytes:
// for each of its blocks 256 bytes, where the 32 bytes of four-byte group g hold bytes
// 4g..4g+3 of the block of each of the tile's eight rows (row r in int32 lane r), then the
// chunk's f16 scales [4 blocks][8 rows]. The blocks past k / 32 in the last chunk are zeros.
inline constexpr int64_t kAvx2TileRows = 8;
int64_t Avx2TileBytes(int64_t k);
// Packs rows j0 .. j0 + 7 of w [n, k] with their scales [n, k / 32] into `tile` (Avx2TileBytes
// long); rows past n repeat row n - 1 (read by the kernels, never stored).
void Avx2PackTile(const int8_t* w, const uint16_t* scales, int64_t n, int64_t k, int64_t j0,
                  uint8_t* tile);
// Avx2Groups' product (the same bits) on the packed stack `tiles` of E * n rows (n a multiple of
// kAvx2TileRows unless E = 1), tile_bytes = Avx2TileBytes(k).
void Avx2PackedGroups(const QuantizedRows& xq, const uint8_t* tiles, int64_t n, int64_t k,
                      std::span<const Q8RowGroup> groups, float* c, EvalContext& ctx);
#endif

}  // namespace tlaloc::cpu::q8_internal
