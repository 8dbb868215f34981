// Tlaloc's quantised weight formats, one table (as ggml keeps one traits table per quantised
// type): how a matrix [R..., K] is stored as a quants tensor `X` plus a scales tensor
// `X_scale` (kQuantScaleSuffix), block by block along K.
//
//   format  quants                      scales                       bits/weight (Tlaloc, GGUF)
//   q8_0    s8 [R..., K]                f16 [R..., K/32]             8.5, 8.5
//   q4_0    u8 [R..., K/2]              f16 [R..., K/32]             4.5, 4.5
//   q4_k    u8 [R..., K/2]              f32 [R..., K/32, 2]          6,   4.5
//   q6_k    u8 [R..., K/256, 192]       f32 [R..., K/16]             8,   6.5625
//
// q8_0 is the int8 checkpoint's layout (config.json quantization_config "tlaloc_int8", written
// by `tlaloc quantize`; GGUF Q8_0's blocks as they are). q4_0, q4_k and q6_k are the GGUF 4- and
// 6-bit matrices the GGUF import keeps packed (quant_method "tlaloc_gguf", its `formats` naming
// each matrix's format; nn/gguf_linear.h's composite): their quants are ggml's bytes, their
// scales unpacked to f16 / f32 (q4_k: a (scale, min) pair per 32; q6_k: d * scale per 16), so
// Tlaloc stores more bits per weight than the GGUF file.
//
// The name is what config.json's formats, the composites' attributes and the CLI say.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tlaloc/ir/element_type.h"
#include "tlaloc/ir/type.h"
#include "tlaloc/support/status.h"

namespace tlaloc {

enum class QuantFormat : uint8_t { kQ8_0, kQ4_0, kQ4_K, kQ6_K };

// What kernels need at compile time.
inline constexpr int64_t kQ8_0BlockElements = 32;     // q8_0 (and q4_0) block: 32 elements
inline constexpr int64_t kKQuantBlockElements = 256;  // q4_k / q6_k super-block
inline constexpr std::string_view kQuantScaleSuffix = "_scale";
// config.json quantization_config.quant_method of the two quantised checkpoint kinds.
inline constexpr std::string_view kTlalocInt8QuantMethod = "tlaloc_int8";
inline constexpr std::string_view kTlalocGgufQuantMethod = "tlaloc_gguf";

struct QuantFormatInfo {
  QuantFormat format;
  std::string_view name;       // "q8_0", ...: config.json formats, composite attributes
  std::string_view ggml_name;  // GGUF's type name, "Q8_0"
  uint32_t ggml_type;          // GGUF's type id (io::GgmlType)
  int64_t block;               // elements per block; K is a multiple of it
  ElementType quant_type;      // the quants tensor's element type
  int64_t quant_bytes;         // quant bytes per block
  bool quant_blocks_axis;      // quants [R..., K/block, quant_bytes] (else [R..., K/block * bytes])
  ElementType scale_type;      // the scales tensor's element type
  int64_t scale_bytes;         // its size (2 or 4)
  int64_t scale_group;         // elements one scale (pair) covers
  bool scale_pairs;            // scales [R..., K/group, 2] (scale, min) (else [R..., K/group])
  int64_t ggml_block_bytes;    // bytes of one block in a GGUF file

  // Scale elements per block.
  constexpr int64_t scales_per_block() const { return block / scale_group * (scale_pairs ? 2 : 1); }
  // Bits a weight takes in Tlaloc's tensors (quants and scales), and in a GGUF file.
  constexpr double bits_per_weight() const {
    return static_cast<double>(quant_bytes * 8 + scales_per_block() * 8 * scale_bytes) /
           static_cast<double>(block);
  }
  constexpr double ggml_bits_per_weight() const {
    return static_cast<double>(ggml_block_bytes * 8) / static_cast<double>(block);
  }
};

inline constexpr QuantFormatInfo kQuantFormats[] = {
    {QuantFormat::kQ8_0, "q8_0", "Q8_0", 8, kQ8_0BlockElements, ElementType::kS8, 32, false,
     ElementType::kF16, 2, 32, false, 34},
    {QuantFormat::kQ4_0, "q4_0", "Q4_0", 2, kQ8_0BlockElements, ElementType::kU8, 16, false,
     ElementType::kF16, 2, 32, false, 18},
    {QuantFormat::kQ4_K, "q4_k", "Q4_K", 12, kKQuantBlockElements, ElementType::kU8, 128, false,
     ElementType::kF32, 4, 32, true, 144},
    {QuantFormat::kQ6_K, "q6_k", "Q6_K", 14, kKQuantBlockElements, ElementType::kU8, 192, true,
     ElementType::kF32, 4, 16, false, 210},
};

constexpr const QuantFormatInfo& QuantTraits(QuantFormat f) {
  return kQuantFormats[static_cast<int>(f)];
}
constexpr std::string_view QuantFormatName(QuantFormat f) { return QuantTraits(f).name; }

static_assert(QuantTraits(QuantFormat::kQ6_K).format == QuantFormat::kQ6_K,
              "kQuantFormats follows QuantFormat's order");
static_assert(QuantTraits(QuantFormat::kQ8_0).bits_per_weight() == 8.5);
static_assert(QuantTraits(QuantFormat::kQ4_K).bits_per_weight() == 6.0);

// The format named `name` ("q4_k"), or nullopt.
std::optional<QuantFormat> FindQuantFormat(std::string_view name);
// The same, or InvalidArgument naming `name`, `what` it came from and the known formats.
StatusOr<QuantFormat> ParseQuantFormat(std::string_view name, std::string_view what = "format");
// "q8_0, q4_0, q4_k, q6_k".
std::string KnownQuantFormats();

// "X" -> "X_scale"; "X_scale" -> "X" (nullopt for a name without the suffix).
std::string QuantScaleName(std::string_view weight_name);
std::optional<std::string_view> QuantWeightOfScale(std::string_view scale_name);

// The {quants, scales} types of a matrix [R..., K] stored in `f`; InvalidArgument when K is not
// a positive multiple of the block.
StatusOr<std::pair<TensorType, TensorType>> QuantStorageTypes(QuantFormat f,
                                                              const std::vector<int64_t>& dims);
// The format and row length K of (quants, scales), whose leading dimensions agree, or nullopt
// when they are in none of the layouts above.
struct QuantStorage {
  QuantFormat format;
  int64_t k;
};
std::optional<QuantStorage> QuantFormatOf(const TensorType& quants, const TensorType& scales);

// "q4_k: u8 [..., K/2] with f32 [..., K/32, 2]" (error messages, docs).
std::string QuantLayoutText(QuantFormat f);

}  // namespace tlaloc
