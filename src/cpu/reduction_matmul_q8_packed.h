// The in-order q8_0 product (reduction_matmul_q8.h, Q8Kernel::kInOrder) on weights repacked once:
// each SIMD lane holds one output row, so a block's scaled sum is added to that row's total in
// the lane, block after block, as the tlaloc.int8_linear composite's decomposition adds it (its
// bits), with no repacking per call and no horizontal sums. The packed copy is as large as the
// weights (s8 plus f16 scales, rows padded to 32); CachedQ8Weights keeps one per weight buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "reduction_matmul_q8.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/op_registry.h"

namespace tlaloc::cpu {

// How a packed copy lies, by the CPU's kernel.
enum class Q8Layout {
  // AVX512-VNNI: tiles of 32 rows; for each tile, block after block, 1024 bytes of weights
  // (PackTileBytes' layout: four bytes of each of 32 rows per 128 bytes, plus 128), then the
  // tile's f16 scales [blocks][32].
  kVnni32,
  // AVX2: tiles of 8 rows in chunks of four blocks with their scales
  // (reduction_matmul_q8_avx2.h's Avx2PackTile).
  kAvx2Rows8,
};

// w [n, k] s8 with f16 scales [n, k / 32], in tiles of tile_rows rows (Q8Layout).
struct Q8PackedWeights {
  Q8Layout layout = Q8Layout::kVnni32;
  int64_t n = 0, k = 0, tile_rows = 32, tiles = 0, tile_bytes = 0;
  std::shared_ptr<uint8_t> data;  // 64-byte aligned, tiles * tile_bytes
  int64_t bytes() const { return tiles * tile_bytes; }
};

// Whether this CPU has a packed layout (AVX512-VNNI, or AVX2 with F16C and FMA).
bool Q8PackingAvailable();

// The packed form of (w, scales): kVnni32 where the CPU has AVX512-VNNI (Q8UsesVnni()),
// kAvx2Rows8 where it has AVX2, F16C and FMA, else nullptr (callers then run Int8MatmulQ8_0's
// kInOrder in place).
// k must be a positive multiple of 32. release_source: w's and scales' pages are handed back to
// the kernel as they are packed (ReleasePagesKeepingContents: a checkpoint's clean file pages
// are unmapped and stay in the page cache; other memory is paged out, contents kept).
std::shared_ptr<const Q8PackedWeights> PackQ8Weights(const int8_t* w, const uint16_t* scales,
                                                     int64_t n, int64_t k, EvalContext& ctx,
                                                     bool release_source = false);

// What Int8MatmulQ8_0Packed's VNNI kernel asks the caches for ahead of its reads (the bits are
// the same; the AVX2 kernel reads each tile's one stream and ignores it); benchmarks name one
// (matmul_bench BM_Int8DecodeCold compares them).
enum class Q8PackedPrefetch {
  kAuto,     // kAll (measured on Zen 5: docs/performance.md, stop 36)
  kWeights,  // the weight bytes 16 KiB ahead, for one and two activation rows only
  kAll,      // for up to four rows the weight bytes 16 KiB ahead, and the next tiles' scales
};

// c [m, n] = Int8MatmulQ8_0(x, m, w, scales, n, k, c, ctx, Q8Kernel::kInOrder), bit for bit, from
// the packed form of (w, scales).
void Int8MatmulQ8_0Packed(const float* x, int64_t m, const Q8PackedWeights& w, float* c,
                          EvalContext& ctx, Q8PackedPrefetch prefetch = Q8PackedPrefetch::kAuto);

// For each group (reduction_matmul_q8.h's Q8RowGroup): c's rows of the group = the group's rows
// of x times expert `expert` of the packed stack `w` (PackQ8Weights of a stack [E, n, k] as one
// matrix [E * n, k]; n a multiple of 32, so that no tile of either layout holds two experts'
// rows), bit for bit
// Int8MatmulQ8_0Packed's (the in-order sums), in one pass over the pool with each row quantised
// once. c [m, n]; its other rows are untouched.
void Int8MatmulQ8_0PackedGroups(const float* x, int64_t m, const Q8PackedWeights& w, int64_t n,
                                std::span<const Q8RowGroup> groups, float* c, EvalContext& ctx);

// The packed form of the weight q s8 [n, k] (or a stack [..., n, k], packed as one matrix of all
// its rows) with scale f16 [n, k / 32] (or [..., n, k / 32]), made on first use and
// then kept, keyed by the two buffers' addresses and the shape. An entry holds a reference to
// both buffers: the interpreter writes into a buffer in place only when it holds the only
// reference, so a cached buffer never changes under its packing; and an entry whose buffers
// nobody else holds any more is dropped (with its buffers) at the next miss or every 256th hit.
// nullptr where PackQ8Weights gives none or TLALOC_INT8_REPACK=0 (then callers run the
// in-place in-order kernel: no copy, slower at decode). Memory: the packed copy is the
// weights' size; q's pages (of a weight of 1 MiB or more) are handed back to the kernel as they
// are packed (PackQ8Weights' release_source), so a memory-mapped checkpoint's int8 weights are
// not resident twice; TLALOC_INT8_REPACK=keep leaves them resident.
std::shared_ptr<const Q8PackedWeights> CachedQ8Weights(const Literal& q, const Literal& scale,
                                                       EvalContext& ctx);

struct Q8CacheStats {
  int64_t entries = 0, bytes = 0, packs = 0, hits = 0;
};
Q8CacheStats GetQ8CacheStats();
// Drops every entry (tests; a server that unloads a model and wants the memory back at once).
void ClearQ8Cache();

}  // namespace tlaloc::cpu
