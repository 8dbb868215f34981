// A process-wide cache of recently freed large, 64-byte aligned blocks, so that tensors of the
// same sizes allocated over and over (the interpreter's per-op results: one layer's attention
// scores after another's) reuse memory that is already mapped instead of going back to the
// kernel, which would fault every page in again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace tlaloc {

// What a failed tensor allocation throws: a std::bad_alloc that keeps the size asked for, so that
// the interpreter can name it in its ResourceExhausted message.
class AllocationFailed : public std::bad_alloc {
 public:
  explicit AllocationFailed(size_t bytes);
  size_t bytes() const { return bytes_; }
  const char* what() const noexcept override { return message_; }

 private:
  size_t bytes_;
  char message_[80];
};

class BufferCache {
 public:
  static constexpr size_t kAlignment = 64;
  // Blocks below this size are left to malloc, whose free lists already reuse them cheaply.
  static constexpr size_t kDefaultMinBlockBytes = size_t{128} << 10;

  struct Stats {
    int64_t hits = 0, misses = 0, evictions = 0;
    size_t cached_bytes = 0, cached_blocks = 0;
  };

  // `capacity_bytes` bounds the bytes held while unused (0: cache nothing, every block goes
  // straight back to the allocator); blocks of at least `min_block_bytes` are cached.
  explicit BufferCache(size_t capacity_bytes, size_t min_block_bytes = kDefaultMinBlockBytes);
  ~BufferCache();
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;

  // The process-wide cache: TLALOC_BUFFER_CACHE_MB (default 256) of capacity, none at all
  // under AddressSanitizer so that it still sees every use after free.
  static BufferCache& Global();

  // The size actually allocated for a request of `bytes` (what Allocate's block holds).
  size_t RoundedSize(size_t bytes) const;
  // A 64-byte aligned block of RoundedSize(bytes) bytes with unspecified contents; throws
  // AllocationFailed (a std::bad_alloc) when memory is exhausted.
  void* Allocate(size_t bytes);
  // Gives back a block from Allocate(bytes) (the same `bytes`).
  void Release(void* block, size_t bytes);
  // Frees every cached block.
  void Trim();

  Stats stats() const;
  size_t capacity_bytes() const;
  // Raises the capacity to at least `bytes` (never lowers it), unless TLALOC_BUFFER_CACHE_MB
  // set the global cache's capacity (the user's word wins) or the cache is off (capacity 0:
  // AddressSanitizer). For a caller that knows it will free and reallocate blocks larger than
  // the default capacity holds (fine-tuning's [rows, vocab] loss chunks). Returns the capacity.
  size_t RaiseCapacity(size_t bytes);

 private:
  struct Entry {
    size_t size;
    void* block;
  };
  using Lru = std::list<Entry>;  // most recently released first
  // Unlinks the least recently released block (the lock held) and appends it to `out`.
  void EvictOldestLocked(std::vector<void*>& out);

  size_t capacity_;  // guarded by mu_
  const size_t min_block_;
  bool capacity_fixed_ = false;  // TLALOC_BUFFER_CACHE_MB said so: RaiseCapacity leaves it
  mutable std::mutex mu_;
  Lru lru_;
  std::unordered_map<size_t, std::deque<Lru::iterator>> by_size_;  // oldest first
  Stats stats_;
};

// Storage for a tensor of `bytes` bytes from the global cache, zero-filled when `zeroed`; the
// bytes past `bytes` up to the next multiple of 64 are always zero (vector loops may read them).
std::shared_ptr<std::byte> AllocateTensorStorage(int64_t bytes, bool zeroed);

}  // namespace tlaloc
