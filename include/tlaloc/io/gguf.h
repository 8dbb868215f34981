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
#include "tlaloc/ir/quant_format.h"
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

// The ggml tensor types Tlaloc reads (other types are refused by number); it writes F32, F16,
// BF16 and Q8_0. Quantized types store each row as blocks of consecutive elements (ggml's
// block_* structs, little-endian):
//   Q8_0: 32 elements, an f16 scale d then 32 int8 values q (34 bytes), value = q * d; the layout
//         of an int8 checkpoint's matrices (ir/quant_format.h's q8_0).
//   Q4_0 / Q4_1 / Q5_0 / Q5_1: 32 elements, 4 or 5 bits each, an f16 scale (and f16 minimum).
//   Q4_K / Q5_K / Q6_K ("K-quants"): 256-element super-blocks of 16 or 32 sub-blocks with
//         6- or 8-bit sub-block scales (and minimums) under f16 super-block scales.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};
// Q8_0's block in a file (its elements: ir/quant_format.h's kQ8_0BlockElements).
inline constexpr int64_t kQ8_0BlockBytes = QuantTraits(QuantFormat::kQ8_0).ggml_block_bytes;
// Whether Tlaloc reads ggml type number `t`.
bool IsKnownGgmlType(uint32_t t);
// Elements per block (1 for the float types) and bytes per block.
int64_t GgmlBlockElements(GgmlType t);
int64_t GgmlBlockBytes(GgmlType t);
// Whether `t` is a block-quantized type (not F32, F16 or BF16).
inline bool IsQuantized(GgmlType t) {
  return t != GgmlType::kF32 && t != GgmlType::kF16 && t != GgmlType::kBF16;
}
// Bytes of `elements` values stored as `t` (quantized: whole blocks).
uint64_t GgmlBytes(GgmlType t, int64_t elements);
std::string_view GgmlTypeName(GgmlType t);
// ggml's name of any type number ("Q2_K", "IQ4_XS", ...), "type N" for one it does not know:
// error messages name the type a file uses even when Tlaloc does not read it.
std::string GgmlTypeNumberName(uint32_t t);
// Dequantises `blocks` (whole blocks of a quantized type, `elements` values) to f32 exactly as
// ggml's dequantize_row_* does (the same float operations in the same order), so the values
// equal llama.cpp's and gguf-py's gguf.quants.dequantize bit for bit.
Status DequantizeGgml(GgmlType t, std::span<const std::byte> blocks, std::span<float> out);
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
// A copy of one tensor's data from the image ParseGguf read; a quantized tensor comes back
// dequantised to f32 (DequantizeGgml).
StatusOr<Literal> ReadGgufTensor(std::span<const std::byte> bytes, const GgufContents& contents,
                                 const GgufTensorInfo& info);

}  // namespace tlaloc::io
