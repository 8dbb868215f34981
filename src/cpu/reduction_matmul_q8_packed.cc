// The in-order q8_0 product on repacked weights (reduction_matmul_q8_packed.h).
//
// A tile is 32 output rows (two vectors of sixteen lanes). For block b, vector (g * 2 + h) holds
// bytes 4g..4g+3 of rows 16h..16h+15 (plus 128, vpdpbusd's unsigned side); four bytes of an
// activation row broadcast against it add four products to each of sixteen rows' int32 sums,
// which start at the activation block's correction -128 * sum(q_x), so eight steps leave the
// exact block sums. Each lane then rounds sum * (dx * dw) and adds it to its row's f32 total:
// block order, one rounding per product, as the composite's decomposition (no FMA). Up to six
// activation rows share each loaded weight vector; decode's one row reads each tile once, in
// the order it lies in memory.
#include "reduction_matmul_q8_packed.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <tuple>
#include <vector>

#include "reduction_matmul.h"
#include "reduction_matmul_q8.h"
#include "reduction_matmul_q8_avx2.h"
#include "reduction_matmul_q8_internal.h"
#include "support/avx512_intrinsics.h"
#include "tlaloc/support/half.h"
#include "tlaloc/support/huge_pages.h"
#include "tlaloc/support/page_release.h"

#if defined(__x86_64__)
#define TLALOC_AVX512_VNNI_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#endif

namespace tlaloc::cpu {

using q8_internal::kBlock;
using q8_internal::kTileCols;
using q8_internal::QuantizedRows;

namespace {

constexpr int64_t kBlockBytes = kTileCols * kBlock;  // one block of a tile's 32 rows
constexpr int kMaxRows = 6;
// Into L2, 16 KiB ahead (as the row stream asks for its rows): on the LM head (matmul_bench
// BM_Int8Kernel M=1, N=151936) 1.06x the row stream's time, against 1.18x with 8 KiB into L1.
constexpr int64_t kPrefetchAhead = 16384;

#if defined(__x86_64__)

// Rows i0..i0+M-1 of the activations against T consecutive packed tiles from `tile` (rows
// j0.. of c); T = 2 gives decode's single row two streams and twice the independent sums.
// kAll: Q8PackedPrefetch::kAll, else kWeights.
template <int M, int T, bool kAll>
TLALOC_AVX512_VNNI_TARGET void TileRows(const QuantizedRows& xq, int64_t i0, const uint8_t* tile,
                                        int64_t tile_bytes, int64_t n, int64_t j0, float* c) {
  constexpr int V = 2 * T;  // vectors of sixteen output rows
  const int64_t blocks = xq.k / kBlock;
  // Few rows leave vpdpbusd's latency exposed: odd steps go to a second sum (int32: exact).
  constexpr bool kSplit = M <= 2;
  // Decode streams the tiles once: the bytes a few blocks ahead are asked for (past a tile's end
  // these are the next tile's, which the same thread reads soon).
  constexpr bool kPrefetchWeights = kAll ? M <= 4 : kSplit;
  __m512 acc[M][V];
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i sums[M][V], odd[M][V];
    if constexpr (kAll && M <= 4) {
      // A tile's scales lie after its weights, a second stream that the weights' prefetch
      // reaches only in the tile's last 16 KiB: the next tiles' scales for this block now.
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t)
        _mm_prefetch(reinterpret_cast<const char*>(tile + (T + t) * tile_bytes +
                                                   blocks * kBlockBytes + b * kTileCols * 2),
                     _MM_HINT_T1);
    }
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        sums[i][v] = _mm512_set1_epi32(xq.Correction(i0 + i)[b]);
        if constexpr (kSplit) odd[i][v] = _mm512_setzero_si512();
      }
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      __m512i w[V];
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) {
        const uint8_t* p = tile + t * tile_bytes + b * kBlockBytes + g * 128;
        if constexpr (kPrefetchWeights) {
          _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchAhead), _MM_HINT_T1);
          _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchAhead + 64), _MM_HINT_T1);
        }
        w[2 * t] = _mm512_load_si512(p);
        w[2 * t + 1] = _mm512_load_si512(p + 64);
      }
#pragma GCC unroll 6
      for (int i = 0; i < M; ++i) {
        int32_t four;
        std::memcpy(&four, xq.Q(i0 + i) + b * kBlock + 4 * g, 4);
        const __m512i xb = _mm512_set1_epi32(four);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) {
          if (kSplit && (g & 1))
            odd[i][v] = _mm512_dpbusd_epi32(odd[i][v], w[v], xb);
          else
            sums[i][v] = _mm512_dpbusd_epi32(sums[i][v], w[v], xb);
        }
      }
    }
    __m512 d[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      d[v] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
          tile + (v / 2) * tile_bytes + blocks * kBlockBytes + (b * kTileCols + v % 2 * 16) * 2)));
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) {
      const __m512 dx = _mm512_set1_ps(xq.Dx(i0 + i)[b]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        if constexpr (kSplit) sums[i][v] = _mm512_add_epi32(sums[i][v], odd[i][v]);
        __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(sums[i][v]), _mm512_mul_ps(d[v], dx));
        // Rounded, then added (the empty asm keeps the compiler from contracting into an FMA).
        __asm__("" : "+v"(p));
        acc[i][v] = _mm512_add_ps(acc[i][v], p);
      }
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    const int64_t live = std::clamp<int64_t>(n - j0 - 16 * v, 0, 16);
    if (live == 0) break;
    const __mmask16 mask = static_cast<__mmask16>((1u << live) - 1u);
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i)
      _mm512_mask_storeu_ps(c + (i0 + i) * n + j0 + 16 * v, mask, acc[i][v]);
  }
}

// Rows [begin, end) of the activations (and of c) against one tile.
template <bool kAll>
void TileRowRange(const QuantizedRows& xq, int64_t begin, int64_t end, const uint8_t* tile,
                  int64_t tile_bytes, int64_t n, int64_t j0, float* c) {
  int64_t i = begin;
  for (; i + kMaxRows <= end; i += kMaxRows)
    TileRows<kMaxRows, 1, kAll>(xq, i, tile, tile_bytes, n, j0, c);
  switch (end - i) {
    case 5:
      return TileRows<5, 1, kAll>(xq, i, tile, tile_bytes, n, j0, c);
    case 4:
      return TileRows<4, 1, kAll>(xq, i, tile, tile_bytes, n, j0, c);
    case 3:
      return TileRows<3, 1, kAll>(xq, i, tile, tile_bytes, n, j0, c);
    case 2:
      return TileRows<2, 1, kAll>(xq, i, tile, tile_bytes, n, j0, c);
    case 1:
      return TileRows<1, 1, kAll>(xq, i, tile, tile_bytes, n, j0, c);
    default:
      return;
  }
}

// The product over the pool: tiles handed out in contiguous shares (ParallelShares).
template <bool kAll>
void RunTiles(const float* x, int64_t m, const Q8PackedWeights& w, float* c, EvalContext& ctx) {
  const QuantizedRows xq = q8_internal::QuantizeRows(x, m, w.k, ctx);
  // About 64 KiB of weights per handout for decode; prefill's rows make each tile worth more.
  const int64_t per =
      std::max<int64_t>(1, (int64_t{1} << 16) / w.tile_bytes / std::min<int64_t>(m, 6));
  ParallelShares(ctx, w.tiles, per, [&](int64_t begin, int64_t end) {
    int64_t t = begin;
    // One or two rows: two tiles at a time (the rows' sums for both in registers).
    if (m <= 2)
      for (; t + 2 <= end; t += 2) {
        const uint8_t* tile = w.data.get() + t * w.tile_bytes;
        if (m == 1)
          TileRows<1, 2, kAll>(xq, 0, tile, w.tile_bytes, w.n, t * kTileCols, c);
        else
          TileRows<2, 2, kAll>(xq, 0, tile, w.tile_bytes, w.n, t * kTileCols, c);
      }
    for (; t < end; ++t)
      TileRowRange<kAll>(xq, 0, m, w.data.get() + t * w.tile_bytes, w.tile_bytes, w.n,
                         t * kTileCols, c);
  });
}

#endif  // __x86_64__

struct Aligned {
  void operator()(uint8_t* p) const { std::free(p); }
};

// Releases a range's pages behind a reader that goes through it in order
// (ReleasePagesKeepingContents): each call from the page where the last one stopped, so that a
// page two calls share is released once both have passed it (releasing each call's whole pages
// alone would keep every such page: a quarter to a half of the scales' pages).
class PagesBehind {
 public:
  explicit PagesBehind(const void* start)
      : start_(reinterpret_cast<uintptr_t>(start)), next_(start_) {}
  void ReleaseUpTo(const void* end) {
    const auto to = reinterpret_cast<uintptr_t>(end);
    if (to <= next_) return;
    // The page holding next_ is wholly behind the reader now, unless it also holds the share's
    // start (its head may be another share's, still unread): from there, only whole pages.
    const uintptr_t from = std::max(next_ / PageSize() * PageSize(), start_);
    ReleasePagesKeepingContents(reinterpret_cast<const void*>(from), to - from);
    next_ = to;
  }

 private:
  const uintptr_t start_;
  uintptr_t next_;
};

#if defined(__x86_64__)
// A VNNI tile of the packed copy: rows j0..j0+31's bytes as PackTileBytes lays them out, then
// their f16 scales [block][32 rows] (rows past n: scale 0), as Avx2PackTile does for AVX2's.
void PackVnniTile(const int8_t* w, const uint16_t* scales, int64_t n, int64_t k, int64_t j0,
                  uint8_t* tile) {
  const int64_t blocks = k / kBlock;
  q8_internal::PackTileBytes(w, n, k, j0, tile);
  uint16_t* s = reinterpret_cast<uint16_t*>(tile + blocks * kBlockBytes);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t r = 0; r < kTileCols; ++r) {
      const int64_t row = j0 + r;
      s[b * kTileCols + r] = row < n ? scales[row * blocks + b] : 0;
    }
}
#endif

// 64-byte aligned; a large copy (the LM head's) on 2 MiB pages where the kernel gives them, as
// decode streams it whole every step (rounding up to 2 MiB costs under 3% at this size).
uint8_t* AllocatePacked(int64_t bytes) {
  constexpr int64_t kHuge = int64_t{2} << 20;
  if (bytes < 32 * kHuge) return static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  return reinterpret_cast<uint8_t*>(AllocateOnHugePages(static_cast<size_t>(bytes)));
}

bool RepackEnabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("TLALOC_INT8_REPACK");
    return env == nullptr || (std::string_view(env) != "0" && std::string_view(env) != "off");
  }();
  return enabled;
}

bool ReleaseOriginals() {
  static const bool enabled = [] {
    const char* env = std::getenv("TLALOC_INT8_REPACK");
    return env == nullptr || std::string_view(env) != "keep";
  }();
  return enabled;
}

struct CacheEntry {
  std::shared_ptr<std::byte> q_ref, s_ref;
  std::shared_ptr<const Q8PackedWeights> packed;
};

struct Cache {
  std::mutex mu;
  // (q's address, scale's address, n, k)
  using Key = std::tuple<const void*, const void*, int64_t, int64_t>;
  std::map<Key, CacheEntry> entries;
  int64_t bytes = 0, packs = 0, hits = 0;

  // Drops the entries whose buffers only the cache still holds. mu held.
  void Sweep() {
    // Counted by owner under weak keys (a shared_ptr key would count itself).
    std::map<std::weak_ptr<std::byte>, long, std::owner_less<>> held;
    for (const auto& [key, e] : entries) ++held[e.q_ref], ++held[e.s_ref];
    // Decided before any is erased: erasing one drops the counts of buffers it shares.
    std::vector<const Key*> orphans;
    for (const auto& [key, e] : entries)
      if (e.q_ref.use_count() <= held[e.q_ref] || e.s_ref.use_count() <= held[e.s_ref])
        orphans.push_back(&key);
    for (const Key* key : orphans) {
      auto it = entries.find(*key);
      bytes -= it->second.packed->bytes();
      entries.erase(it);
    }
  }
};

Cache& TheCache() {
  static Cache* cache = new Cache;  // never destroyed: kernels may run during static teardown
  return *cache;
}

}  // namespace

bool Q8PackingAvailable() {
#if defined(__x86_64__)
  return Q8UsesVnni() || q8_internal::Q8UsesAvx2();
#else
  return false;
#endif
}

std::shared_ptr<const Q8PackedWeights> PackQ8Weights(const int8_t* w, const uint16_t* scales,
                                                     int64_t n, int64_t k, EvalContext& ctx,
                                                     bool release_source) {
#if defined(__x86_64__)
  const bool vnni = Q8UsesVnni();
  if (!Q8PackingAvailable() || n <= 0 || k <= 0 || k % kBlock != 0) return nullptr;
  auto packed = std::make_shared<Q8PackedWeights>();
  const int64_t blocks = k / kBlock;
  packed->layout = vnni ? Q8Layout::kVnni32 : Q8Layout::kAvx2Rows8;
  packed->n = n;
  packed->k = k;
  packed->tile_rows = vnni ? kTileCols : q8_internal::kAvx2TileRows;
  packed->tiles = (n + packed->tile_rows - 1) / packed->tile_rows;
  // VNNI: 1088 bytes per block, a multiple of 64.
  packed->tile_bytes =
      vnni ? blocks * (kBlockBytes + kTileCols * 2) : q8_internal::Avx2TileBytes(k);
  packed->data = std::shared_ptr<uint8_t>(AllocatePacked(packed->bytes()), Aligned{});
  uint8_t* base = packed->data.get();
  if (base == nullptr) return nullptr;  // out of memory: the caller reads the weights in place
  const int64_t rows = packed->tile_rows;
  // Rows between releases, so that a large weight (the LM head) is never resident twice whole.
  const int64_t release_every = 256 / rows;
  ctx.ParallelFor(packed->tiles, 8, [&](int64_t begin, int64_t end) {
    // This share's bytes of w and of the scales, released behind the packing as it goes.
    PagesBehind weights(w + begin * rows * k), block_scales(scales + begin * rows * blocks);
    int64_t released = begin;
    for (int64_t t = begin; t < end; ++t) {
      uint8_t* tile = base + t * packed->tile_bytes;
      if (vnni)
        PackVnniTile(w, scales, n, k, t * kTileCols, tile);
      else
        q8_internal::Avx2PackTile(w, scales, n, k, t * rows, tile);
      if (release_source && (t + 1 - released == release_every || t + 1 == end)) {
        const int64_t last = std::min(n, (t + 1) * rows);
        weights.ReleaseUpTo(w + last * k);
        block_scales.ReleaseUpTo(scales + last * blocks);
        released = t + 1;
      }
    }
  });
  return packed;
#else
  (void)w, (void)scales, (void)n, (void)k, (void)ctx, (void)release_source;
  return nullptr;
#endif
}

void Int8MatmulQ8_0Packed(const float* x, int64_t m, const Q8PackedWeights& w, float* c,
                          EvalContext& ctx, Q8PackedPrefetch prefetch) {
#if defined(__x86_64__)
  if (m <= 0 || w.n <= 0) return;
  if (w.layout == Q8Layout::kAvx2Rows8) {
    const QuantizedRows xq = q8_internal::QuantizeRows(x, m, w.k, ctx);
    const Q8RowGroup all{0, 0, m};
    return q8_internal::Avx2PackedGroups(xq, w.data.get(), w.n, w.k, {&all, 1}, c, ctx);
  }
  // kAuto is kAll: on Zen 5 (AVX512-VNNI) four rows read 8-25% faster with it, one row the same
  // (BM_Int8DecodeCold, kAll against kWeights: 0.98-1.03 at M = 1, 1.08-1.25 at M = 4).
  if (prefetch != Q8PackedPrefetch::kWeights) return RunTiles<true>(x, m, w, c, ctx);
  RunTiles<false>(x, m, w, c, ctx);
#else
  (void)x, (void)m, (void)w, (void)c, (void)ctx, (void)prefetch;
#endif
}

void Int8MatmulQ8_0PackedGroups(const float* x, int64_t m, const Q8PackedWeights& w, int64_t n,
                                std::span<const Q8RowGroup> groups, float* c, EvalContext& ctx) {
#if defined(__x86_64__)
  if (m <= 0 || n <= 0 || groups.empty() || n % kTileCols != 0) return;
  // Only the groups' rows are quantised, each once.
  int64_t first = m, last = 0;
  for (const Q8RowGroup& g : groups) {
    first = std::min(first, g.start);
    last = std::max(last, g.start + g.rows);
  }
  if (first >= last) return;
  const QuantizedRows xq = q8_internal::QuantizeRows(x + first * w.k, last - first, w.k, ctx);
  float* out = c + first * n;
  if (w.layout == Q8Layout::kAvx2Rows8) {
    std::vector<Q8RowGroup> shifted(groups.begin(), groups.end());
    for (Q8RowGroup& g : shifted) g.start -= first;
    return q8_internal::Avx2PackedGroups(xq, w.data.get(), n, w.k, shifted, out, ctx);
  }
  // A task per (group, run of its expert's tiles): about 64 KiB of weights per task for a group
  // of a row or two, fewer tiles where more rows make each tile worth more.
  const int64_t tiles = n / kTileCols;
  struct Task {
    const Q8RowGroup* group;
    int64_t tile, count;
  };
  std::vector<Task> tasks;
  for (const Q8RowGroup& g : groups) {
    if (g.rows <= 0) continue;
    const int64_t per = std::max<int64_t>(
        1, (int64_t{1} << 16) / w.tile_bytes / std::min<int64_t>(g.rows, kMaxRows));
    for (int64_t t = 0; t < tiles; t += per) tasks.push_back({&g, t, std::min(per, tiles - t)});
  }
  std::atomic<int64_t> next{0};
  const int64_t count = static_cast<int64_t>(tasks.size());
  ctx.ParallelFor(count, 1, [&](int64_t, int64_t) {
    for (int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      const Task& task = tasks[i];
      const Q8RowGroup& g = *task.group;
      const int64_t i0 = g.start - first;
      const uint8_t* base = w.data.get() + (g.expert * tiles + task.tile) * w.tile_bytes;
      int64_t t = 0;
      // One or two rows: two tiles at a time, as Int8MatmulQ8_0Packed runs them.
      if (g.rows <= 2)
        for (; t + 2 <= task.count; t += 2) {
          const uint8_t* tile = base + t * w.tile_bytes;
          const int64_t j0 = (task.tile + t) * kTileCols;
          if (g.rows == 1)
            TileRows<1, 2, false>(xq, i0, tile, w.tile_bytes, n, j0, out);
          else
            TileRows<2, 2, false>(xq, i0, tile, w.tile_bytes, n, j0, out);
        }
      for (; t < task.count; ++t)
        TileRowRange<false>(xq, i0, i0 + g.rows, base + t * w.tile_bytes, w.tile_bytes, n,
                            (task.tile + t) * kTileCols, out);
    }
  });
#else
  (void)x, (void)m, (void)w, (void)n, (void)groups, (void)c, (void)ctx;
#endif
}

std::shared_ptr<const Q8PackedWeights> CachedQ8Weights(const Literal& q, const Literal& scale,
                                                       EvalContext& ctx) {
  if (!Q8PackingAvailable() || !RepackEnabled() || q.dims().size() < 2) return nullptr;
  // A stack [..., N, K] packs as one matrix of all its rows (ragged_dot_int8.cc's experts).
  const int64_t k = q.dims().back(), n = q.num_elements() / std::max<int64_t>(k, 1);
  const auto key = std::make_tuple(static_cast<const void*>(q.data()),
                                   static_cast<const void*>(scale.data()), n, k);
  Cache& cache = TheCache();
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    auto it = cache.entries.find(key);
    if (it != cache.entries.end()) {
      ++cache.hits;
      std::shared_ptr<const Q8PackedWeights> packed = it->second.packed;
      if (cache.hits % 256 == 0) cache.Sweep();
      return packed;
    }
  }
  // Packed outside the lock (the pool runs it; another thread may pack the same weight at the
  // same time, and the first to insert wins).
  auto packed = PackQ8Weights(q.span<int8_t>().data(), scale.span<uint16_t>().data(), n, k, ctx,
                              ReleaseOriginals() && q.byte_size() >= (int64_t{1} << 20));
  if (!packed) return nullptr;
  std::lock_guard<std::mutex> lock(cache.mu);
  cache.Sweep();
  auto [it, inserted] =
      cache.entries.emplace(key, CacheEntry{q.storage(), scale.storage(), packed});
  if (inserted) {
    cache.bytes += packed->bytes();
    ++cache.packs;
  }
  return it->second.packed;
}

Q8CacheStats GetQ8CacheStats() {
  Cache& cache = TheCache();
  std::lock_guard<std::mutex> lock(cache.mu);
  return {static_cast<int64_t>(cache.entries.size()), cache.bytes, cache.packs, cache.hits};
}

void ClearQ8Cache() {
  Cache& cache = TheCache();
  std::lock_guard<std::mutex> lock(cache.mu);
  cache.entries.clear();
  cache.bytes = 0;
}

}  // namespace tlaloc::cpu
