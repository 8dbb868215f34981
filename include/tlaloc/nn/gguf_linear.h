// GGUF 4- and 6-bit weight matrices kept packed (the storage of cpu/matmul_gguf4.h, written by
// the GGUF import) and their program form: the composite `tlaloc.gguf_linear`
// {format = "q4_0" | "q4_k" | "q6_k"} on (x f32 [..., K], q u8, scale), whose decomposition is
// StableHLO throughout:
//   w = GgufDequantize(q, scale)      integer unpacking (shift_right_logical, and, or, concatenate,
//                                     convert), then the scales: f32 [N, K]
//   y = dot_general(x, w, contracting {last} x {1})                        f32 [..., N]
// The interpreter runs it as cpu::GgufMatmul with the decomposition's bits (interp/fusion_gguf.cc);
// XLA runs the decomposition.
//
// Per row of K weights: ir/quant_format.h's q4_0, q4_k and q6_k (cpu::GgufMatmul reads them):
//   q4_0: q u8 [N, K / 2],          scale f16 [N, K / 32]          4.5 bits a weight
//   q4_k: q u8 [N, K / 2],          scale f32 [N, K / 32, 2]       6 bits (scale, min per 32)
//   q6_k: q u8 [N, K / 256, 192],   scale f32 [N, K / 16]          8 bits
// The format follows from the types alone (GgufFormatOf), so nn::Linear and nn::Embedding pick
// the form from the weight and its `_scale` tensor.
#pragma once

#include <optional>
#include <string_view>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/ir/quant_format.h"

namespace tlaloc::nn {

// A GGUF packed format: a QuantFormat other than kQ8_0 (the int8 form, nn/int8_linear.h).
using GgufFormat = QuantFormat;

inline constexpr const char* kGgufLinearComposite = "tlaloc.gguf_linear";

inline std::string_view GgufFormatName(GgufFormat f) { return QuantFormatName(f); }
// "q4_0", "q4_k" or "q6_k"; nullopt for any other name (q8_0 included).
std::optional<GgufFormat> ParseGgufFormat(std::string_view name);

// The packed format of (q, scale) and its row length K, or nullopt when they are none of the
// three layouts above (q's and scale's leading dimensions agree, any number of them).
using GgufPackedInfo = QuantStorage;
std::optional<GgufPackedInfo> GgufFormatOf(const TensorType& q, const TensorType& scale);

// The tensor types a matrix [n, k] is stored as in `f` (k a multiple of 32, 256 for the K
// formats): {q, scale}.
std::pair<TensorType, TensorType> GgufPackedTypes(GgufFormat f, int64_t n, int64_t k);

// The dequantisation in StableHLO: q [R..., P], scale [R..., S(, 2)] -> f32 [R..., K].
Tensor GgufDequantize(const Tensor& q, const Tensor& scale);

// x [..., K] times the packed matrix: the composite (a private decomposition function per shape
// in x's module), or where x's builder has no module the decomposition inline. Result f32.
Tensor GgufLinear(const Tensor& x, const Tensor& q, const Tensor& scale);

}  // namespace tlaloc::nn
