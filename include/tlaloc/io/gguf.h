// GGUF (version 3): the single-file model format of llama.cpp and Ollama. A file is a header
// (magic "GGUF", version, tensor and key counts), typed key/value metadata, one info record per
// tensor (name, dims innermost-first, ggml type, offset), then the tensor data, each tensor
// starting at a multiple of general.alignment (32 by default).
//
// Writing: WriteGguf lays out any set of metadata and tensors; models::ExportGguf
// (models/gguf_export.h) turns a Hugging Face Qwen3 folder (config.json, safetensors,
// tokenizer.json) into the metadata and tensor names llama.cpp's `qwen3` architecture loads.
// Reading: ParseGguf validates an image (used by tests and the fuzz target), so a file Tlaloc
// writes can be checked without llama.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tlaloc/ir/element_type.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/support/status.h"

namespace tlaloc::io {

inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint32_t kGgufDefaultAlignment = 32;

// Metadata value types, numbered as the format numbers them.
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view GgufTypeName(GgufType t);

// The ggml tensor types Tlaloc reads and writes (other quantized types are refused by number).
// Q8_0: blocks of 32 consecutive elements of a row, each an f16 scale d then 32 int8 values q
// (34 bytes), value = q * d; the layout of an int8 checkpoint's matrices (io::WeightQuantization).
enum class GgmlType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30 };
inline constexpr int64_t kQ8_0BlockElements = 32;
inline constexpr int64_t kQ8_0BlockBytes = 34;
// Bytes of `elements` values stored as `t` (Q8_0: whole blocks).
uint64_t GgmlBytes(GgmlType t, int64_t elements);
std::string_view GgmlTypeName(GgmlType t);
StatusOr<GgmlType> GgmlTypeFor(ElementType t);
ElementType ElementTypeOf(GgmlType t);

// One metadata value. Integers and bools are held in `integer` (uint64 values as their bits),
// floats in `real`, strings in `text`; arrays (of one non-array type) in the plural fields.
struct GgufValue {
  GgufType type = GgufType::kUint32;
  GgufType array_type = GgufType::kUint32;  // arrays only
  int64_t integer = 0;
  double real = 0;
  std::string text;
  std::vector<int64_t> integers;
  std::vector<double> reals;
  std::vector<std::string> texts;

  static GgufValue U32(uint32_t v);
  static GgufValue I32(int32_t v);
  static GgufValue U64(uint64_t v);
  static GgufValue F32(float v);
  static GgufValue Bool(bool v);
  static GgufValue String(std::string v);
  static GgufValue StringArray(std::vector<std::string> v);
  static GgufValue I32Array(std::vector<int64_t> v);

  bool is_array() const { return type == GgufType::kArray; }
  size_t array_size() const;
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

// A tensor to write: `value` in Tlaloc's (outermost-first) dims, stored as `type` (converted,
// rounding to nearest even, when its element type differs). Q8_0: `value` is s8 [..., K] (K a
// multiple of 32) and `q8_scales` f16 [..., K / 32], written as they are.
struct GgufTensorToWrite {
  std::string name;
  Literal value;
  GgmlType type = GgmlType::kF32;
  Literal q8_scales = Literal();
};

// The file bytes are streamed to `path` through a temporary file renamed into place. Writes
// general.alignment itself when `metadata` lacks it. Refuses duplicate keys or tensor names.
Status WriteGguf(const std::filesystem::path& path, std::span<const GgufKeyValue> metadata,
                 std::span<const GgufTensorToWrite> tensors);

// A tensor's info record as read.
struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // dims, innermost first
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // within the data section
  uint64_t byte_size = 0;

  // Tlaloc's (outermost-first) dims.
  std::vector<int64_t> dims() const;
};

struct GgufContents {
  uint32_t version = 0;
  uint32_t alignment = kGgufDefaultAlignment;
  std::vector<GgufKeyValue> metadata;   // file order
  std::vector<GgufTensorInfo> tensors;  // file order
  uint64_t data_offset = 0;             // where the data section starts in the image

  // nullptr when absent.
  const GgufValue* Find(std::string_view key) const;
  const GgufTensorInfo* FindTensor(std::string_view name) const;
};

// Parses and validates a whole GGUF image: magic, version (2 or 3), every key, value and tensor
// record within the buffer and of a known type, the alignment, and each tensor's data inside
// the image and aligned. `source` (a file name) starts every error message.
StatusOr<GgufContents> ParseGguf(std::span<const std::byte> bytes,
                                 std::string_view source = "<buffer>");
// A copy of one tensor's data from the image ParseGguf read; a Q8_0 tensor comes back
// dequantised to f32 (q * d, exact).
StatusOr<Literal> ReadGgufTensor(std::span<const std::byte> bytes, const GgufContents& contents,
                                 const GgufTensorInfo& info);

}  // namespace tlaloc::io
