// safetensors header parsing and validation, file mapping and zero-copy tensor access.
#include "tlaloc/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "io/io_util.h"
#include "tlaloc/support/page_release.h"

namespace tlaloc::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and is viewed in place");

namespace {

using nlohmann::json;

struct DtypeEntry {
  std::string_view name;
  ElementType type;
};

constexpr DtypeEntry kDtypes[] = {
    {"BOOL", ElementType::kPred}, {"U8", ElementType::kU8},     {"I8", ElementType::kS8},
    {"U16", ElementType::kU16},   {"I16", ElementType::kS16},   {"U32", ElementType::kU32},
    {"I32", ElementType::kS32},   {"U64", ElementType::kU64},   {"I64", ElementType::kS64},
    {"F16", ElementType::kF16},   {"BF16", ElementType::kBF16}, {"F32", ElementType::kF32},
    {"F64", ElementType::kF64},
};

// Types the format defines that Tlaloc's IR has no element type for, with what they are.
struct UnsupportedDtype {
  std::string_view name;
  std::string_view what;
};
constexpr UnsupportedDtype kUnsupportedDtypes[] = {
    {"F4", "a 4-bit float"},           {"F6_E2M3", "a 6-bit float"},
    {"F6_E3M2", "a 6-bit float"},      {"F8_E5M2", "an 8-bit float"},
    {"F8_E4M3", "an 8-bit float"},     {"F8_E8M0", "an 8-bit scale type"},
    {"F8_E4M3FNUZ", "an 8-bit float"}, {"F8_E5M2FNUZ", "an 8-bit float"},
    {"C64", "a complex type"},
};

std::string JsonKind(const json& j) {
  if (j.is_number_integer()) return "integer " + j.dump();
  if (j.is_number_float()) return "number " + j.dump();
  if (j.is_string()) return "string " + j.dump();
  return std::string(j.type_name());
}

// A non-negative integer that fits in int64 (shapes and offsets are stored as int64/uint64 and
// sizes must stay representable in the IR's int64 arithmetic).
bool AsCount(const json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = v;
    return true;
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    *out = static_cast<uint64_t>(v);
    return true;
  }
  return false;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Parses one tensor entry; `where` is "<source>: tensor \"name\"".
StatusOr<SafetensorsTensorInfo> ParseTensorEntry(const std::string& name, const json& entry,
                                                 const std::string& where) {
  if (!entry.is_object())
    return InvalidArgument(where + ": entry must be an object, got " + JsonKind(entry));
  SafetensorsTensorInfo info;
  info.name = name;
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key)) return InvalidArgument(where + ": missing \"" + key + "\"");

  const json& dtype = entry.at("dtype");
  if (!dtype.is_string())
    return InvalidArgument(where + ": \"dtype\" must be a string, got " + JsonKind(dtype));
  auto et = ElementTypeFromSafetensorsDtype(dtype.get_ref<const std::string&>());
  if (!et.ok()) return InvalidArgument(where + ": " + et.status().message());
  info.dtype = *et;

  const json& shape = entry.at("shape");
  if (!shape.is_array())
    return InvalidArgument(where + ": \"shape\" must be an array, got " + JsonKind(shape));
  uint64_t elements = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    uint64_t d = 0;
    if (!AsCount(shape[i], &d))
      return InvalidArgument(where + ": shape[" + std::to_string(i) +
                             "] must be a non-negative integer below 2^63, got " +
                             JsonKind(shape[i]));
    info.shape.push_back(static_cast<int64_t>(d));
    if (__builtin_mul_overflow(elements, d, &elements)) overflow = true;
  }
  uint64_t bytes = 0;
  // ShapeFits also catches products hidden behind a zero dim, which the int64 shape code
  // (strides, element counts in another order) would still overflow on.
  if (overflow || !ShapeFits(info.shape, ElementSize(info.dtype)) ||
      elements > static_cast<uint64_t>(INT64_MAX) ||
      __builtin_mul_overflow(elements, static_cast<uint64_t>(ElementSize(info.dtype)), &bytes) ||
      bytes > static_cast<uint64_t>(INT64_MAX))
    return InvalidArgument(where + ": shape " + ShapeString(info.shape) + " of " +
                           std::string(dtype.get_ref<const std::string&>()) +
                           " overflows 64-bit element or byte counts");

  const json& offsets = entry.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2)
    return InvalidArgument(where + ": \"data_offsets\" must be an array [begin, end], got " +
                           (offsets.is_array() ? offsets.dump() : JsonKind(offsets)));
  for (int i = 0; i < 2; ++i) {
    uint64_t v = 0;
    if (!AsCount(offsets[i], &v))
      return InvalidArgument(where + ": data_offsets[" + std::to_string(i) +
                             "] must be a non-negative integer below 2^63, got " +
                             JsonKind(offsets[i]));
    (i == 0 ? info.data_begin : info.data_end) = v;
  }
  if (info.data_end < info.data_begin)
    return InvalidArgument(where + ": data_offsets [" + std::to_string(info.data_begin) + "," +
                           std::to_string(info.data_end) + "] end before they begin");
  if (info.byte_size() != bytes)
    return InvalidArgument(where + ": shape " + ShapeString(info.shape) + " of " +
                           std::string(SafetensorsDtypeName(info.dtype)) + " needs " +
                           std::to_string(bytes) + " bytes but data_offsets [" +
                           std::to_string(info.data_begin) + "," + std::to_string(info.data_end) +
                           "] cover " + std::to_string(info.byte_size()));
  return info;
}

// Mapped file pages; unmapped when the last Literal or file object lets go.
struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

}  // namespace

std::string_view SafetensorsDtypeName(ElementType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.name;
  return "?";
}

StatusOr<ElementType> ElementTypeFromSafetensorsDtype(std::string_view dtype) {
  for (const auto& d : kDtypes)
    if (d.name == dtype) return d.type;
  for (const auto& u : kUnsupportedDtypes)
    if (u.name == dtype)
      return Unimplemented("dtype " + std::string(dtype) + " (" + std::string(u.what) +
                           ") is not supported: Tlaloc has no such element type");
  return InvalidArgument("unknown dtype \"" + std::string(dtype) +
                         "\" (expected one of BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, "
                         "BF16, F32, F64)");
}

const SafetensorsTensorInfo* SafetensorsHeader::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors[it->second];
}

StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::span<const std::byte> bytes,
                                                   std::string_view source) {
  const std::string src(source);
  if (bytes.size() < 8)
    return InvalidArgument(src + ": file is " + std::to_string(bytes.size()) +
                           " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);  // little-endian, checked above
  if (n > kSafetensorsMaxHeaderSize)
    return InvalidArgument(src + ": header length " + std::to_string(n) + " exceeds the " +
                           std::to_string(kSafetensorsMaxHeaderSize) + "-byte limit");
  if (n > bytes.size() - 8)
    return InvalidArgument(src + ": header length " + std::to_string(n) +
                           " reaches beyond the end of the file (" + std::to_string(bytes.size()) +
                           " bytes)");

  // Parse with a callback that records duplicate keys, which nlohmann would silently merge.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  int duplicate_depth = 0;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second && duplicate.empty()) {
        duplicate = key;
        duplicate_depth = depth;
      }
    }
    return true;
  };
  const char* text = reinterpret_cast<const char*>(bytes.data() + 8);
  json root;
  try {
    root = json::parse(text, text + n, callback);
  } catch (const json::exception& e) {
    return InvalidArgument(src + ": header is not valid JSON: " + e.what());
  }
  if (!root.is_object())
    return InvalidArgument(src + ": header must be a JSON object, got " + JsonKind(root));
  if (!duplicate.empty()) {
    if (duplicate_depth == 1)
      return InvalidArgument(src + ": tensor \"" + duplicate + "\" appears twice in the header");
    return InvalidArgument(src + ": key \"" + duplicate + "\" appears twice in one header entry");
  }

  SafetensorsHeader header;
  header.header_size = n;
  header.data_size = bytes.size() - 8 - n;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object())
        return InvalidArgument(src + ": \"__metadata__\" must be an object of strings, got " +
                               JsonKind(*it));
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          return InvalidArgument(src + ": __metadata__ entry \"" + m.key() +
                                 "\" must be a string, got " + JsonKind(*m));
        header.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    TL_ASSIGN_OR_RETURN(auto info,
                        ParseTensorEntry(it.key(), *it, src + ": tensor \"" + it.key() + "\""));
    header.tensors.push_back(std::move(info));
  }

  // The format requires the byte ranges, in offset order, to tile the data region exactly.
  std::sort(header.tensors.begin(), header.tensors.end(), [](const auto& a, const auto& b) {
    return std::tie(a.data_begin, a.data_end, a.name) < std::tie(b.data_begin, b.data_end, b.name);
  });
  uint64_t end = 0;
  const SafetensorsTensorInfo* prev = nullptr;
  for (const auto& t : header.tensors) {
    if (t.data_begin != end) {
      std::string what = t.data_begin < end ? "overlaps" : "leaves a gap after";
      return InvalidArgument(
          src + ": tensor \"" + t.name + "\" starts at data offset " +
          std::to_string(t.data_begin) + ", which " + what +
          (prev ? " tensor \"" + prev->name + "\" ending at " + std::to_string(end)
                : std::string(" the start of the data region (offset 0)")) +
          "; tensors must cover the data region without gaps or overlaps");
    }
    end = t.data_end;
    prev = &t;
  }
  if (end != header.data_size)
    return InvalidArgument(src + ": tensors cover " + std::to_string(end) +
                           " bytes of data but the file holds " + std::to_string(header.data_size) +
                           " bytes after the header" +
                           (end > header.data_size ? " (truncated file?)" : ""));
  for (size_t i = 0; i < header.tensors.size(); ++i) header.index_[header.tensors[i].name] = i;
  return header;
}

StatusOr<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::Open(
    const std::filesystem::path& path) {
  const std::string src = path.string();
  int fd = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, src + ": cannot open");
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, src + ": cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(src + ": not a regular file");
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->size = static_cast<size_t>(st.st_size);
  if (mapping->size > 0) {
    // Copy-on-write: Literal hands out mutable pointers; a stray write must not reach the file.
    void* addr = mmap(nullptr, mapping->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return ErrnoStatus(err, src + ": cannot map");
    }
    mapping->addr = addr;
#if defined(MADV_HUGEPAGE)
    // Pages read in through this mapping come in 2 MiB folios where the file system has them,
    // and are then mapped 2 MiB at a time (see include/tlaloc/support/huge_pages.h).
    (void)madvise(addr, mapping->size, MADV_HUGEPAGE);
#endif
  }
  ::close(fd);  // the mapping holds its own reference to the file

  auto file = std::shared_ptr<SafetensorsFile>(new SafetensorsFile());
  file->source_ = src;
  file->data_ = static_cast<std::byte*>(mapping->addr);
  file->size_ = mapping->size;
  file->owner_ = mapping;
  file->mapped_ = mapping->size > 0;
  TL_ASSIGN_OR_RETURN(file->header_, ParseSafetensorsHeader(file->bytes(), src));
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

StatusOr<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::FromBytes(
    std::span<const std::byte> bytes, std::string source) {
  TL_ASSIGN_OR_RETURN(auto header, ParseSafetensorsHeader(bytes, source));
  // A Literal gives 64-byte-aligned storage, so tensors keep the alignment they had in a file.
  Literal storage(TensorType(ElementType::kU8, {static_cast<int64_t>(bytes.size())}));
  if (!bytes.empty()) std::memcpy(storage.data(), bytes.data(), bytes.size());
  auto file = std::shared_ptr<SafetensorsFile>(new SafetensorsFile());
  file->source_ = std::move(source);
  file->data_ = storage.data();
  file->size_ = bytes.size();
  file->owner_ = storage.storage();
  file->header_ = std::move(header);
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

Literal SafetensorsFile::Load(const SafetensorsTensorInfo& info) const {
  std::byte* p = data_ + header_.data_offset() + info.data_begin;
  if (reinterpret_cast<uintptr_t>(p) % ElementSize(info.dtype) == 0)
    return Literal::View(info.type(), p, owner_);
  Literal copy(info.type());
  if (info.byte_size() > 0) std::memcpy(copy.data(), p, info.byte_size());
  return copy;
}

void SafetensorsFile::ReleasePages(const SafetensorsTensorInfo& info) const {
  ReleasePages(data_ + header_.data_offset() + info.data_begin, info.byte_size());
}

bool SafetensorsFile::ReleasePages(const std::byte* begin, size_t size, PageSpan span) const {
  if (!MapsRange(begin, size)) return false;
  // Whole pages only unless asked: a page shared with a neighbouring tensor stays. Widened, the
  // range stays inside the mapping (which starts on a page; its end may not be one).
  PageBounds pages = PagesInside(begin, size);
  if (span == PageSpan::kWithPartialPages) {
    pages = PagesTouching(begin, size);
    pages.begin = std::max(pages.begin, reinterpret_cast<uintptr_t>(data_));
    pages.end = std::min(pages.end, reinterpret_cast<uintptr_t>(data_ + size_));
  }
  if (pages.bytes() > 0)
    madvise(reinterpret_cast<void*>(pages.begin), pages.bytes(), MADV_DONTNEED);
  return true;
}

bool SafetensorsFile::MapsRange(const std::byte* begin, size_t size) const {
  return mapped_ && size > 0 && begin >= data_ && begin + size <= data_ + size_;
}

bool SafetensorsFile::Prefault(const std::byte* begin, size_t size) const {
  if (!MapsRange(begin, size)) return false;
    // Not in Debian 12's glibc headers yet; the kernel's value since 5.14.
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22;
#endif
  const uintptr_t first = PagesTouching(begin, size).begin;
  const size_t length = reinterpret_cast<uintptr_t>(begin) + size - first;
  void* at = reinterpret_cast<void*>(first);
  // EINVAL: an older kernel without the advice; read ahead at least, so faults are minor.
  if (madvise(at, length, MADV_POPULATE_READ) != 0 && errno == EINVAL)
    madvise(at, length, MADV_WILLNEED);
  return true;
}

bool SafetensorsFile::ReadAhead(const std::byte* begin, size_t size) const {
  if (!MapsRange(begin, size)) return false;
  const uintptr_t first = PagesTouching(begin, size).begin;
  const uintptr_t end = reinterpret_cast<uintptr_t>(begin) + size;
  // One call per 128 KiB: the kernel reads ahead at most the device's read-ahead window per
  // call (8 MiB here, 128 KiB by default) and drops the rest of a longer range. A 622 MB
  // table not in the page cache: 0.16 s of calls, 14 ms when it is.
  constexpr uintptr_t kStep = uintptr_t{128} << 10;
  for (uintptr_t at = first; at < end; at += kStep)
    if (madvise(reinterpret_cast<void*>(at), std::min<uintptr_t>(kStep, end - at), MADV_WILLNEED) !=
        0)
      return false;
  return true;
}

std::optional<Literal> SafetensorsFile::ViewOfRun(
    std::span<const SafetensorsTensorInfo* const> parts, const TensorType& type) const {
  if (parts.empty()) return std::nullopt;
  uint64_t end = parts[0]->data_begin;
  for (const SafetensorsTensorInfo* part : parts) {
    if (part->dtype != type.element_type || part->data_begin != end) return std::nullopt;
    end = part->data_end;
  }
  const int64_t bytes = NumElements(type.dims) * (BitWidth(type.element_type) / 8);
  std::byte* p = data_ + header_.data_offset() + parts[0]->data_begin;
  if (static_cast<int64_t>(end - parts[0]->data_begin) != bytes ||
      reinterpret_cast<uintptr_t>(p) % ElementSize(type.element_type) != 0)
    return std::nullopt;
  return Literal::View(type, p, owner_);
}

StatusOr<Literal> SafetensorsFile::Get(std::string_view name) const {
  const SafetensorsTensorInfo* info = Find(name);
  if (!info) return NotFound(source_ + ": no tensor named \"" + std::string(name) + "\"");
  return Load(*info);
}

}  // namespace tlaloc::io
