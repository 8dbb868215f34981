// A Hugging Face checkpoint's weights: one `model.safetensors`, or shards listed by
// `model.safetensors.index.json` (its "weight_map" names the shard of every tensor), presented
// as one name -> tensor table. Tensors are zero-copy views of the mapped shards.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/io/safetensors.h"

namespace tlaloc::io {

inline constexpr std::string_view kSafetensorsIndexName = "model.safetensors.index.json";
inline constexpr std::string_view kSingleSafetensorsName = "model.safetensors";

class Checkpoint {
 public:
  // `path` is a checkpoint folder (with model.safetensors.index.json, or model.safetensors, or
  // exactly one *.safetensors file), an index file, or one .safetensors file. Every shard is
  // mapped and validated; the index must match the shards exactly (each listed tensor present
  // in the named shard, no tensor left unlisted or stored twice).
  static StatusOr<Checkpoint> Open(const std::filesystem::path& path);

  // Sorted tensor names.
  const std::vector<std::string>& names() const { return names_; }
  size_t size() const { return names_.size(); }
  bool Contains(std::string_view name) const { return entries_.count(name) != 0; }
  // nullptr when absent.
  const SafetensorsTensorInfo* Find(std::string_view name) const;
  // The shard that holds `name` (nullptr when absent).
  const SafetensorsFile* ShardOf(std::string_view name) const;
  // A view of the tensor's bytes in its mapped shard.
  StatusOr<Literal> Get(std::string_view name) const;
  // SafetensorsFile::ReleasePages for `name` (nothing when absent).
  void ReleasePages(std::string_view name) const;
  // SafetensorsFile::ViewOfRun for the named tensors, when one shard holds them all.
  std::optional<Literal> ViewOfRun(std::span<const std::string> names,
                                   const TensorType& type) const;

  // Prefaults (SafetensorsFile::Prefault) each of `values` that views a shard in place, so that
  // a model's first prefill does not pay a page fault per 4 KiB of weights; llama.cpp's loader
  // populates its mapping at load too. Skipped when TLALOC_PREFAULT=0, or when those bytes
  // exceed the memory available (AvailableMemoryBytes), where prefaulting would only evict
  // pages read earlier. Returns the bytes prefaulted.
  uint64_t PrefaultViews(std::span<const Literal> values) const;
  // SafetensorsFile::ReadAhead for each of `values` that views a shard in place: for tensors
  // read a few rows at a time (an untied embedding table), which stay file-mapped, so that a
  // prompt's rows come from the page cache rather than one disk read per 4 KiB row once the
  // cache has dropped them (59 ms for a 512-token prompt of the MoE preset, 2 ms from the
  // cache). Skipped as PrefaultViews is (TLALOC_PREFAULT=0, more than the memory available).
  // Returns the bytes asked for.
  uint64_t ReadAheadViews(std::span<const Literal> values) const;
  // Copies those of `values` that view a shard into one block on 2 MiB pages
  // (AllocateOnHugePages), one after another, replacing each by a view of its copy; the mapped
  // pages each came from leave the resident set as it is copied (one copy resident, plus one
  // tensor). Values in memory of their own (converted weights) stay where they are. Decode streams
  // every weight read whole once per token, and on 4 KiB pages the page walks cost it: the LM
  // head read at 19.6 GB/s there and 29 GB/s on 2 MiB pages, on a 2-core Zen 3. (A file read
  // cold may be mapped 2 MiB at a time already, where its file system keeps 2 MiB page-cache
  // folios; one just written is not, and views of it stay on 4 KiB pages.) Returns the bytes
  // copied: 0, changing nothing, with TLALOC_HUGE_PAGES=0 or TLALOC_PREFAULT=0, when the kernel
  // offers no huge pages, when the bytes exceed the memory available, or when the block cannot
  // be allocated; callers then PrefaultViews instead. Each tensor's copy is split between the
  // process-wide pool's threads (DefaultThreadPool: size it first), which fault the huge pages
  // in side by side: a 1.5 GB bf16 load took 0.6-3.8 s on one thread, 0.2-0.35 s on two.
  uint64_t CopyOntoHugePages(std::span<Literal> values) const;

  const std::vector<std::shared_ptr<const SafetensorsFile>>& shards() const { return shards_; }
  bool sharded() const { return index_path_.has_value(); }
  const std::optional<std::filesystem::path>& index_path() const { return index_path_; }
  // The index's "metadata" (string values kept as they are, others as JSON text), e.g.
  // total_size. Empty for a single file.
  const std::map<std::string, std::string>& index_metadata() const { return index_metadata_; }
  // Sum of all tensors' byte sizes.
  uint64_t total_bytes() const;

 private:
  struct Entry {
    const SafetensorsFile* file;
    const SafetensorsTensorInfo* info;
  };
  Status AddShard(std::shared_ptr<const SafetensorsFile> shard);
  // The shard whose mapped image `value` views, or null (a copy, an empty value).
  const SafetensorsFile* ShardViewedBy(const Literal& value) const;

  std::vector<std::shared_ptr<const SafetensorsFile>> shards_;
  std::map<std::string, Entry, std::less<>> entries_;
  std::vector<std::string> names_;
  std::optional<std::filesystem::path> index_path_;
  std::map<std::string, std::string> index_metadata_;
};

struct CheckpointWriteOptions {
  // Split into shards of at most this many tensor bytes (a larger tensor gets a shard of its
  // own); 0 writes one model.safetensors.
  uint64_t max_shard_bytes = 0;
  // Each shard's tensor layout: kGivenOrder keeps the caller's order within a dtype (stacked
  // experts one after another, so that loading views them instead of copying).
  SafetensorsLayout layout = SafetensorsLayout::kReference;
  // Stored in every shard's __metadata__. "format": "pt" is added when absent because
  // transformers refuses safetensors files whose metadata lacks a known format.
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` into `dir` (created if needed) as model.safetensors, or as
// model-00001-of-0000N.safetensors shards plus model.safetensors.index.json, in the layout
// transformers writes, so the result loads in other tools too.
Status WriteCheckpoint(const std::filesystem::path& dir, std::span<const NamedTensor> tensors,
                       const CheckpointWriteOptions& options = {});

// transformers' default shard size (save_pretrained's max_shard_size="5GB").
inline constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000;

// A tensor a CheckpointStreamWriter is to be handed: its name and type.
struct PlannedTensor {
  std::string name;
  TensorType type;
};

// Writes a checkpoint folder as WriteCheckpoint does (the same bytes for the same tensors and
// options), but takes each tensor's bytes separately, in any order, so that a caller making
// tensors one at a time (quantize) never holds more than one: the headers are computed up front
// from the planned names and types and every tensor is written at its place in its shard.
// Shards fill greedily in `groups` order; a group (a stacked weight's experts) is never split
// across shards, so loading can still view it as one run. Shards are written under temporary
// names and renamed into place by Finish; a writer destroyed unfinished removes them.
class CheckpointStreamWriter {
 public:
  static StatusOr<std::unique_ptr<CheckpointStreamWriter>> Create(
      const std::filesystem::path& dir, std::span<const std::vector<PlannedTensor>> groups,
      const CheckpointWriteOptions& options = {});
  ~CheckpointStreamWriter();
  CheckpointStreamWriter(const CheckpointStreamWriter&) = delete;
  CheckpointStreamWriter& operator=(const CheckpointStreamWriter&) = delete;

  // `bytes` must be the planned tensor's whole contents (its type's byte size); each tensor is
  // written once.
  Status Write(std::string_view name, std::span<const std::byte> bytes);
  // Refuses when a planned tensor was never written; otherwise syncs and renames the shards
  // into place and writes the index (several shards).
  Status Finish();
  size_t num_shards() const { return shards_.size(); }

 private:
  struct Shard;
  CheckpointStreamWriter() = default;
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<Shard>> shards_;
  // tensor name -> (shard, entry index in that shard)
  std::map<std::string, std::pair<size_t, size_t>, std::less<>> where_;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
};

}  // namespace tlaloc::io
