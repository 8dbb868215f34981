// Checkpoint folders: single-file and sharded safetensors, reading and writing.
#include "tlaloc/io/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

#include "io/io_util.h"
#include "io/safetensors_layout.h"
#include "tlaloc/support/huge_pages.h"
#include "tlaloc/support/memory_info.h"
#include "tlaloc/support/thread_pool.h"

namespace tlaloc::io {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A shard name from an index must name a file beside the index, never a path elsewhere.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

std::string ShardFileName(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

// Removes the files a previous save left in `dir` that this one did not write (`keep`), which
// would otherwise be picked up (or confuse) on load.
void RemoveStaleCheckpointFiles(const fs::path& dir, const std::set<std::string>& keep) {
  std::error_code ec;
  const std::regex shard_pattern(R"(model-\d{5}-of-\d{5}\.safetensors)");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    bool ours = name == kSingleSafetensorsName || name == kSafetensorsIndexName ||
                std::regex_match(name, shard_pattern);
    if (ours && !keep.count(name)) fs::remove(e.path(), ec);
  }
}

Status WriteIndex(const fs::path& dir, const json& weight_map, uint64_t total) {
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  return WriteStringAtomically(dir / kSafetensorsIndexName, index.dump(2) + "\n");
}

}  // namespace

const SafetensorsTensorInfo* Checkpoint::Find(std::string_view name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second.info;
}

const SafetensorsFile* Checkpoint::ShardOf(std::string_view name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second.file;
}

std::optional<Literal> Checkpoint::ViewOfRun(std::span<const std::string> names,
                                             const TensorType& type) const {
  if (names.empty()) return std::nullopt;
  const SafetensorsFile* shard = ShardOf(names[0]);
  std::vector<const SafetensorsTensorInfo*> parts;
  for (const std::string& name : names) {
    if (ShardOf(name) != shard || shard == nullptr) return std::nullopt;
    parts.push_back(shard->Find(name));
  }
  return shard->ViewOfRun(parts, type);
}

StatusOr<Literal> Checkpoint::Get(std::string_view name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::string where = index_path_       ? index_path_->string()
                        : shards_.empty() ? std::string("checkpoint")
                                          : shards_[0]->source();
    return NotFound(where + ": no tensor named \"" + std::string(name) + "\"");
  }
  return it->second.file->Load(*it->second.info);
}

void Checkpoint::ReleasePages(std::string_view name) const {
  auto it = entries_.find(name);
  if (it != entries_.end()) it->second.file->ReleasePages(*it->second.info);
}

namespace {

// TLALOC_PREFAULT=0: load neither prefaults views nor copies them (PrefaultViews,
// CopyOntoHugePages).
bool PrefaultOff() {
  const char* env = std::getenv("TLALOC_PREFAULT");
  return env && std::string_view(env) == "0";
}

}  // namespace

const SafetensorsFile* Checkpoint::ShardViewedBy(const Literal& value) const {
  if (!value.valid() || value.byte_size() == 0) return nullptr;
  // A view's bytes lie inside its shard's image.
  for (const auto& shard : shards_) {
    const std::span<const std::byte> image = shard->bytes();
    if (value.data() >= image.data() &&
        value.data() + value.byte_size() <= image.data() + image.size())
      return shard.get();
  }
  return nullptr;
}

namespace {

// `advise` (SafetensorsFile::Prefault or ReadAhead) on each of `values` that views a shard
// (`shard_of`), unless TLALOC_PREFAULT=0 or their bytes exceed the memory available (where it
// would only evict pages read earlier). Returns the bytes advised.
template <typename ShardOf>
uint64_t AdviseViews(std::span<const Literal> values, const ShardOf& shard_of,
                     bool (SafetensorsFile::*advise)(const std::byte*, size_t) const) {
  if (PrefaultOff()) return 0;
  std::vector<std::pair<const SafetensorsFile*, const Literal*>> views;
  uint64_t total = 0;
  for (const Literal& v : values)
    if (const SafetensorsFile* shard = shard_of(v)) {
      views.emplace_back(shard, &v);
      total += static_cast<uint64_t>(v.byte_size());
    }
  const std::optional<uint64_t> available = AvailableMemoryBytes();
  if (total == 0 || (available && total > *available)) return 0;
  uint64_t done = 0;
  for (const auto& [shard, v] : views)
    if ((shard->*advise)(v->data(), static_cast<size_t>(v->byte_size())))
      done += static_cast<uint64_t>(v->byte_size());
  return done;
}

}  // namespace

uint64_t Checkpoint::PrefaultViews(std::span<const Literal> values) const {
  return AdviseViews(
      values, [this](const Literal& v) { return ShardViewedBy(v); }, &SafetensorsFile::Prefault);
}

uint64_t Checkpoint::ReadAheadViews(std::span<const Literal> values) const {
  return AdviseViews(
      values, [this](const Literal& v) { return ShardViewedBy(v); }, &SafetensorsFile::ReadAhead);
}

uint64_t Checkpoint::CopyOntoHugePages(std::span<Literal> values) const {
  if (PrefaultOff()) return 0;
  if (const char* env = std::getenv("TLALOC_HUGE_PAGES"); env && std::string_view(env) == "0")
    return 0;
  if (!HugePagesOffered()) return 0;
  constexpr uint64_t kAlign = 64;  // each copy at a 64-byte boundary, as Literal's storage is
  constexpr int64_t kPiece = int64_t{2} << 20;
  // The views, each with its shard (a converted weight views none: in memory of its own).
  std::vector<std::pair<const SafetensorsFile*, Literal*>> views;
  uint64_t total = 0;
  for (Literal& v : values)
    if (const SafetensorsFile* shard = ShardViewedBy(v)) {
      views.emplace_back(shard, &v);
      total += (static_cast<uint64_t>(v.byte_size()) + kAlign - 1) / kAlign * kAlign;
    }
  const std::optional<uint64_t> available = AvailableMemoryBytes();
  if (total == 0 || (available && total > *available)) return 0;
  std::byte* block = AllocateOnHugePages(static_cast<size_t>(total));
  if (block == nullptr) return 0;
  const std::shared_ptr<void> owner(block, [](void* p) { std::free(p); });
  uint64_t offset = 0;
  // One value at a time, so that only the view being copied is resident twice.
  for (auto& [shard, v] : views) {
    const size_t size = static_cast<size_t>(v->byte_size());
    // Split between the pool's threads (one part each, at least 2 MiB): each huge page of the
    // block is faulted in (and zeroed, or compacted for) by the thread that copies into it, so
    // the faults run side by side as the copies do. Each source part is mapped in one call first
    // (a page fault per 4 KiB would slow the copy).
    const std::byte* from = v->data();
    std::byte* to = block + offset;
    const SafetensorsFile* file = shard;  // clang 14 captures no structured binding
    DefaultThreadPool().ParallelFor(static_cast<int64_t>(size), kPiece, [&](int64_t b, int64_t e) {
      file->Prefault(from + b, static_cast<size_t>(e - b));
      std::memcpy(to + b, from + b, static_cast<size_t>(e - b));
    });
    // Its pages leave the resident set, with those it shares with its neighbours: a norm's few
    // hundred bytes hold no whole page, and reading them mapped their 2 MiB folio whole (84 MB
    // of Qwen3-0.6B's file pages stayed resident so). Safe at load: nothing has written into
    // the mapping, so a page read again is the file's.
    shard->ReleasePages(v->data(), size, SafetensorsFile::PageSpan::kWithPartialPages);
    *v = Literal::View(v->type(), block + offset, owner);
    offset += (size + kAlign - 1) / kAlign * kAlign;
  }
  return total;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, e] : entries_) total += e.info->byte_size();
  return total;
}

Status Checkpoint::AddShard(std::shared_ptr<const SafetensorsFile> shard) {
  for (const auto& t : shard->tensors()) {
    auto [it, inserted] = entries_.emplace(t.name, Entry{shard.get(), &t});
    if (!inserted)
      return InvalidArgument(shard->source() + ": tensor \"" + t.name + "\" is also stored in " +
                             it->second.file->source());
  }
  shards_.push_back(std::move(shard));
  return OkStatus();
}

StatusOr<Checkpoint> Checkpoint::Open(const fs::path& path) {
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) return NotFound(path.string() + ": no such file or folder");

  fs::path index_file;
  fs::path single_file;
  if (fs::is_directory(status)) {
    if (fs::exists(path / kSafetensorsIndexName)) {
      index_file = path / kSafetensorsIndexName;
    } else if (fs::exists(path / kSingleSafetensorsName)) {
      single_file = path / kSingleSafetensorsName;
    } else {
      std::vector<fs::path> found;
      for (const auto& e : fs::directory_iterator(path, ec))
        if (e.path().extension() == ".safetensors") found.push_back(e.path());
      if (ec) return InvalidArgument(path.string() + ": cannot list folder: " + ec.message());
      if (found.empty())
        return NotFound(path.string() + ": no " + std::string(kSingleSafetensorsName) + ", " +
                        std::string(kSafetensorsIndexName) + " or other .safetensors file");
      if (found.size() > 1) {
        std::sort(found.begin(), found.end());
        std::string list;
        for (const auto& f : found) list += (list.empty() ? "" : ", ") + f.filename().string();
        return InvalidArgument(path.string() + ": several .safetensors files (" + list +
                               ") but no " + std::string(kSafetensorsIndexName) +
                               " saying how they combine");
      }
      single_file = found[0];
    }
  } else if (path.extension() == ".json") {
    index_file = path;
  } else {
    single_file = path;
  }

  Checkpoint ckpt;
  if (!single_file.empty()) {
    TL_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(single_file));
    TL_RETURN_IF_ERROR(ckpt.AddShard(std::move(file)));
  } else {
    const std::string src = index_file.string();
    TL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_file));
    json index;
    try {
      index = json::parse(text);
    } catch (const json::exception& e) {
      return InvalidArgument(src + ": not valid JSON: " + e.what());
    }
    if (!index.is_object()) return InvalidArgument(src + ": must be a JSON object");
    if (index.contains("metadata")) {
      const json& m = index["metadata"];
      if (!m.is_object() && !m.is_null())
        return InvalidArgument(src + ": \"metadata\" must be an object");
      if (m.is_object())
        for (auto it = m.begin(); it != m.end(); ++it)
          ckpt.index_metadata_[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
    }
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      return InvalidArgument(src + ": missing \"weight_map\" object (tensor name -> shard file)");
    const json& weight_map = index["weight_map"];
    std::map<std::string, std::string> assigned;  // tensor -> shard file name
    std::set<std::string> shard_names;
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
      if (!it->is_string())
        return InvalidArgument(src + ": weight_map entry \"" + it.key() +
                               "\" must name a shard file (a string)");
      const std::string& shard = it->get_ref<const std::string&>();
      if (!IsPlainFileName(shard))
        return InvalidArgument(src + ": weight_map entry \"" + it.key() + "\" names shard \"" +
                               shard + "\", which is not a file name in the index's folder");
      assigned[it.key()] = shard;
      shard_names.insert(shard);
    }
    const fs::path dir = index_file.parent_path();
    for (const auto& name : shard_names) {
      TL_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(dir / name));
      for (const auto& t : file->tensors()) {
        auto a = assigned.find(t.name);
        if (a == assigned.end())
          return InvalidArgument(src + ": shard " + name + " holds tensor \"" + t.name +
                                 "\", which the weight_map does not list");
        if (a->second != name)
          return InvalidArgument(src + ": shard " + name + " holds tensor \"" + t.name +
                                 "\", which the weight_map assigns to " + a->second);
      }
      TL_RETURN_IF_ERROR(ckpt.AddShard(std::move(file)));
    }
    for (const auto& [tensor, shard] : assigned)
      if (!ckpt.Contains(tensor))
        return InvalidArgument(src + ": weight_map lists tensor \"" + tensor + "\" in shard " +
                               shard + ", which does not hold it");
    ckpt.index_path_ = index_file;
  }
  ckpt.names_.reserve(ckpt.entries_.size());
  for (const auto& [name, e] : ckpt.entries_) ckpt.names_.push_back(name);
  return ckpt;
}

namespace {
// Creates `dir` and returns every shard's __metadata__: the caller's, plus "format": "pt",
// without which transformers refuses a safetensors file.
StatusOr<std::map<std::string, std::string>> PrepareCheckpointFolder(
    const fs::path& dir, const CheckpointWriteOptions& options) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return InvalidArgument(dir.string() + ": cannot create folder: " + ec.message());
  std::map<std::string, std::string> metadata = options.metadata;
  metadata.emplace("format", "pt");
  return metadata;
}
}  // namespace

Status WriteCheckpoint(const fs::path& dir, std::span<const NamedTensor> tensors,
                       const CheckpointWriteOptions& options) {
  TL_ASSIGN_OR_RETURN(auto metadata, PrepareCheckpointFolder(dir, options));

  // Greedy split in the caller's order (the model's order), as transformers does.
  std::vector<std::vector<NamedTensor>> shards(1);
  uint64_t current = 0, total = 0;
  for (const auto& t : tensors) {
    uint64_t n = static_cast<uint64_t>(t.value.byte_size());
    if (options.max_shard_bytes > 0 && !shards.back().empty() &&
        current + n > options.max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(t);
    current += n;
    total += n;
  }

  std::set<std::string> keep;
  if (shards.size() == 1) {
    keep.insert(std::string(kSingleSafetensorsName));
    TL_RETURN_IF_ERROR(
        WriteSafetensors(dir / kSingleSafetensorsName, shards[0], metadata, options.layout));
  } else {
    json weight_map = json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      std::string name = ShardFileName(i, shards.size());
      keep.insert(name);
      TL_RETURN_IF_ERROR(WriteSafetensors(dir / name, shards[i], metadata, options.layout));
      for (const auto& t : shards[i]) weight_map[t.name] = name;
    }
    keep.insert(std::string(kSafetensorsIndexName));
    TL_RETURN_IF_ERROR(WriteIndex(dir, weight_map, total));
  }
  RemoveStaleCheckpointFiles(dir, keep);
  return OkStatus();
}

struct CheckpointStreamWriter::Shard {
  fs::path path;       // the final name
  fs::path temporary;  // written here until Finish
  int fd = -1;
  std::vector<SafetensorsEntry> entries;
  SafetensorsPlan plan;
  std::vector<bool> written;
};

namespace {

Status WriteAllAt(int fd, std::span<const std::byte> bytes, uint64_t offset, const fs::path& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus(n < 0 ? errno : EIO, path.string() + ": cannot write");
    bytes = bytes.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<CheckpointStreamWriter>> CheckpointStreamWriter::Create(
    const fs::path& dir, std::span<const std::vector<PlannedTensor>> groups,
    const CheckpointWriteOptions& options) {
  TL_ASSIGN_OR_RETURN(auto metadata, PrepareCheckpointFolder(dir, options));

  std::unique_ptr<CheckpointStreamWriter> w(new CheckpointStreamWriter());
  w->dir_ = dir;
  // Greedy split in the caller's order, as WriteCheckpoint does, a group at a time.
  std::vector<std::vector<SafetensorsEntry>> shards(1);
  uint64_t current = 0;
  for (const auto& group : groups) {
    uint64_t n = 0;
    for (const auto& t : group) n += static_cast<uint64_t>(t.type.byte_size());
    if (options.max_shard_bytes > 0 && !shards.back().empty() &&
        current + n > options.max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    for (const auto& t : group) shards.back().push_back({t.name, t.type});
    current += n;
    w->total_bytes_ += n;
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    auto shard = std::make_unique<Shard>();
    shard->path = dir / (shards.size() == 1 ? std::string(kSingleSafetensorsName)
                                            : ShardFileName(i, shards.size()));
    shard->entries = std::move(shards[i]);
    TL_ASSIGN_OR_RETURN(shard->plan, PlanSafetensors(shard->entries, metadata, options.layout));
    shard->written.assign(shard->entries.size(), false);
    for (size_t e = 0; e < shard->entries.size(); ++e)
      if (!w->where_.emplace(shard->entries[e].name, std::make_pair(i, e)).second)
        return InvalidArgument("checkpoint writer: tensor \"" + shard->entries[e].name +
                               "\" given twice");
    shard->temporary = TemporarySibling(shard->path);
    shard->fd = ::open(shard->temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    Shard& s = *shard;
    w->shards_.push_back(std::move(shard));  // from here the destructor removes the temporary
    if (s.fd < 0) {
      s.temporary.clear();
      return ErrnoStatus(errno, s.path.string() + ": cannot create");
    }
    const std::string& header = s.plan.header;
    const uint64_t size = s.plan.data_offset() + s.plan.data_size;
    if (::ftruncate(s.fd, static_cast<off_t>(size)) != 0)
      return ErrnoStatus(errno,
                         s.path.string() + ": cannot size to " + std::to_string(size) + " bytes");
    TL_RETURN_IF_ERROR(WriteAllAt(s.fd, SafetensorsLengthPrefix(header.size()), 0, s.path));
    TL_RETURN_IF_ERROR(WriteAllAt(
        s.fd, {reinterpret_cast<const std::byte*>(header.data()), header.size()}, 8, s.path));
  }
  return w;
}

CheckpointStreamWriter::~CheckpointStreamWriter() {
  for (const auto& s : shards_) {
    if (s->fd >= 0) ::close(s->fd);
    if (!finished_ && !s->temporary.empty()) ::unlink(s->temporary.c_str());
  }
}

Status CheckpointStreamWriter::Write(std::string_view name, std::span<const std::byte> bytes) {
  auto it = where_.find(name);
  if (it == where_.end())
    return InvalidArgument("checkpoint writer: tensor \"" + std::string(name) +
                           "\" was not planned");
  Shard& s = *shards_[it->second.first];
  const size_t e = it->second.second;
  const uint64_t expected = static_cast<uint64_t>(s.entries[e].type.byte_size());
  if (bytes.size() != expected)
    return InvalidArgument("checkpoint writer: tensor \"" + std::string(name) + "\" given " +
                           std::to_string(bytes.size()) + " bytes, planned as " +
                           std::to_string(expected));
  if (s.written[e])
    return InvalidArgument("checkpoint writer: tensor \"" + std::string(name) + "\" written twice");
  TL_RETURN_IF_ERROR(WriteAllAt(s.fd, bytes, s.plan.data_offset() + s.plan.offsets[e], s.path));
  s.written[e] = true;
  return OkStatus();
}

Status CheckpointStreamWriter::Finish() {
  for (const auto& s : shards_)
    for (size_t e = 0; e < s->entries.size(); ++e)
      if (!s->written[e])
        return FailedPrecondition("checkpoint writer: tensor \"" + s->entries[e].name +
                                  "\" was planned but never written");
  std::set<std::string> keep;
  json weight_map = json::object();
  for (const auto& s : shards_) {
    if (::fsync(s->fd) != 0) return ErrnoStatus(errno, s->path.string() + ": cannot sync");
    const int fd = s->fd;
    s->fd = -1;
    if (::close(fd) != 0) return ErrnoStatus(errno, s->path.string() + ": cannot close");
    TL_RETURN_IF_ERROR(RenameDurably(s->temporary, s->path));
    s->temporary.clear();
    const std::string file = s->path.filename().string();
    keep.insert(file);
    for (const auto& t : s->entries) weight_map[t.name] = file;
  }
  if (shards_.size() > 1) {
    keep.insert(std::string(kSafetensorsIndexName));
    TL_RETURN_IF_ERROR(WriteIndex(dir_, weight_map, total_bytes_));
  }
  RemoveStaleCheckpointFiles(dir_, keep);
  finished_ = true;
  return OkStatus();
}

}  // namespace tlaloc::io
