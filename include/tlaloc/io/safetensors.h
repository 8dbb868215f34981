// safetensors: Hugging Face's tensor file format (8-byte little-endian header length, a JSON
// header naming each tensor's dtype, shape and byte range, then the raw little-endian data).
// Reading maps the file and hands out Literals that view the mapping in place; the mapping
// stays alive as long as any such Literal does. Parsing works on a byte buffer too, so the
// header parser can be fuzzed without files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/ir/element_type.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/type.h"
#include "tlaloc/support/status.h"

namespace tlaloc::io {

// The reference implementation refuses headers above 100 MB; so do we.
inline constexpr uint64_t kSafetensorsMaxHeaderSize = 100'000'000;

// "F32", "BF16", "BOOL", ... for a Tlaloc element type (every one has a safetensors name).
std::string_view SafetensorsDtypeName(ElementType t);
// The element type of a safetensors dtype name. Names safetensors defines but Tlaloc's IR lacks
// (F8_E4M3, F4, C64, ...) are refused by name, as are names safetensors does not define.
StatusOr<ElementType> ElementTypeFromSafetensorsDtype(std::string_view dtype);

struct SafetensorsTensorInfo {
  std::string name;
  ElementType dtype = ElementType::kF32;
  std::vector<int64_t> shape;
  // Byte range within the data region (which starts right after the header).
  uint64_t data_begin = 0;
  uint64_t data_end = 0;

  uint64_t byte_size() const { return data_end - data_begin; }
  int64_t num_elements() const { return NumElements(shape); }
  TensorType type() const { return TensorType(dtype, shape); }
};

struct SafetensorsHeader {
  uint64_t header_size = 0;  // N: the JSON bytes, padding included
  uint64_t data_size = 0;    // bytes after the header; equal to the last tensor's end
  // Ordered by data offset (the order of the bytes in the file).
  std::vector<SafetensorsTensorInfo> tensors;
  // The optional "__metadata__" string map.
  std::map<std::string, std::string> metadata;

  uint64_t data_offset() const { return 8 + header_size; }
  // nullptr when absent.
  const SafetensorsTensorInfo* Find(std::string_view name) const;

 private:
  friend StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::span<const std::byte>,
                                                            std::string_view);
  std::map<std::string, size_t, std::less<>> index_;
};

// Parses and validates the header of a complete safetensors image (the whole file's bytes):
// the header length against the cap and the buffer, the JSON, every tensor's dtype, shape and
// byte range, and that the tensors cover the data region exactly, without gaps or overlaps, as
// the format requires. `source` (a file name) starts every error message.
StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::span<const std::byte> bytes,
                                                   std::string_view source = "<buffer>");

// One safetensors file (or buffer), validated, with zero-copy access to its tensors.
class SafetensorsFile {
 public:
  // Maps `path` copy-on-write: Literals view the file's pages without copying, and writes
  // through them (an in-place update) never reach the file.
  static StatusOr<std::shared_ptr<const SafetensorsFile>> Open(const std::filesystem::path& path);
  // Parses an in-memory image, copied once into aligned storage.
  static StatusOr<std::shared_ptr<const SafetensorsFile>> FromBytes(
      std::span<const std::byte> bytes, std::string source = "<buffer>");

  const std::string& source() const { return source_; }
  const SafetensorsHeader& header() const { return header_; }
  const std::vector<SafetensorsTensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const SafetensorsTensorInfo* Find(std::string_view name) const { return header_.Find(name); }
  // The whole image (the mapping).
  std::span<const std::byte> bytes() const { return {data_, size_}; }

  // The tensor as a Literal viewing the image in place. When its bytes are not aligned to the
  // element size (possible only in files not written by the reference writer) it is copied
  // into aligned storage instead, so typed spans stay valid.
  StatusOr<Literal> Get(std::string_view name) const;
  Literal Load(const SafetensorsTensorInfo& info) const;
  // Takes the mapped pages that lie wholly inside the tensor's bytes out of this process's
  // resident set (madvise MADV_DONTNEED); a later read maps them again from the file. For a
  // tensor copied elsewhere (stacked experts) whose view is no longer read, so that the copy
  // and the pages it came from are not both resident. Not for a tensor written in place
  // (its copy-on-write pages would be dropped); a no-op for an in-memory image.
  void ReleasePages(const SafetensorsTensorInfo& info) const;
  // Which pages ReleasePages takes: those wholly inside the range, or also the partial pages at
  // its ends (shared with neighbouring tensors, which a later read maps again from the file).
  enum class PageSpan { kWholePagesOnly, kWithPartialPages };
  // The same for the bytes [begin, begin + size) of the image; false, doing nothing, when the
  // range is not inside this file's mapping.
  bool ReleasePages(const std::byte* begin, size_t size,
                    PageSpan span = PageSpan::kWholePagesOnly) const;
  // Maps the file's pages under [begin, begin + size) into this process now, so that the first
  // product to read them does not stop at a page fault every 4 KiB (madvise
  // MADV_POPULATE_READ; on kernels before 5.14, MADV_WILLNEED's read-ahead). False, doing
  // nothing, when the range is not inside this file's mapping (an in-memory image, a copy).
  bool Prefault(const std::byte* begin, size_t size) const;
  // Asks the kernel to read the file's pages under [begin, begin + size) into the page cache in
  // the background (madvise MADV_WILLNEED), without mapping them into this process (its resident
  // set does not grow). False when the range is not inside this file's mapping (doing nothing)
  // or the kernel refused.
  bool ReadAhead(const std::byte* begin, size_t size) const;
  // `parts` (tensors of this file) as one tensor of `type`, viewing the image in place, when
  // they lie one after another in this order, hold type's dtype and fill exactly its bytes, and
  // the first is aligned; otherwise nullopt. Stacked experts written one after another
  // (SafetensorsLayout::kGivenOrder) load this way with no copy.
  std::optional<Literal> ViewOfRun(std::span<const SafetensorsTensorInfo* const> parts,
                                   const TensorType& type) const;

 private:
  SafetensorsFile() = default;
  // Whether [begin, begin + size) is non-empty and inside this file's mapping (not a buffer).
  bool MapsRange(const std::byte* begin, size_t size) const;
  std::string source_;
  std::shared_ptr<void> owner_;  // keeps the mapping (or buffer) alive
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;  // a file mapping (Open), not a buffer (FromBytes)
  SafetensorsHeader header_;
};

// A tensor to write.
struct NamedTensor {
  std::string name;
  Literal value;
};

// Where tensors' bytes go: kReference sorts them by descending dtype alignment (the reference's
// dtype order), then by name, as the reference writer does; kGivenOrder sorts by dtype
// alignment only and keeps the caller's order within a dtype, so that tensors given one after
// another (a model's experts, in expert order) lie one after another. Both are valid
// safetensors (readers take each tensor's offsets from the header).
enum class SafetensorsLayout { kReference, kGivenOrder };

// The bytes of a safetensors file as the reference writer lays them out (with kReference):
// tensors in the layout's order, the JSON header compact and in data order, "__metadata__"
// first (omitted when empty), padded with spaces to a multiple of 8.
StatusOr<std::vector<std::byte>> SerializeSafetensors(
    std::span<const NamedTensor> tensors, const std::map<std::string, std::string>& metadata = {},
    SafetensorsLayout layout = SafetensorsLayout::kReference);
// Writes the same bytes to `path`, streaming the tensor data, through a temporary file renamed
// into place so a crash never leaves a half-written checkpoint under the final name.
Status WriteSafetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                        const std::map<std::string, std::string>& metadata = {},
                        SafetensorsLayout layout = SafetensorsLayout::kReference);

}  // namespace tlaloc::io
