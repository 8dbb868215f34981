// Products with GGUF 4- and 6-bit weight matrices kept packed (nn/gguf_linear.h gives the
// storage and the program form, tlaloc.gguf_linear): each row of w is dequantised with exactly
// the arithmetic of the composite's decomposition (and of llama.cpp's dequantize_row_*), then
// multiplied with the f32 kernels of reduction_matmul.h, so the results are bit for bit the
// decomposition's (dequantise, then dot_general) while the matrix stays 4.5 to 8 bits a weight.
#pragma once

#include <cstdint>

#include "tlaloc/ir/op_registry.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/support/status.h"

namespace tlaloc::cpu {

// The packed forms (per row of K weights), ir/quant_format.h's table rows:
//   kQ4_0: q u8 [K / 2]: each 32-block's 16 bytes, element j the low nibble of byte j, element
//          j + 16 its high nibble; scale f16 [K / 32]; w = (nibble - 8) * d.
//   kQ4_K: q u8 [K / 2]: each 64 elements' 32 bytes, element j the low nibble of byte j, element
//          j + 32 its high nibble; scale f32 [K / 32, 2] = (d * sc, dmin * m) per 32-block;
//          w = sc * nibble - m (two roundings, no fused multiply-add).
//   kQ6_K: q u8 [K / 256, 192]: a super-block's ql (128 bytes) then qh (64), llama.cpp's order;
//          scale f32 [K / 16] = d * sc per 16-block; w = scale * (q6 - 32).
// q8_0 is the int8 kernels' (reduction_matmul.h's Int8Matmul, reduction_matmul_q8.h), not these.
inline constexpr bool IsGgufPacked(QuantFormat f) { return f != QuantFormat::kQ8_0; }

// Bytes of quants and of scales per row of k weights (k a multiple of the format's block), from
// the format's table row; any QuantFormat.
constexpr int64_t QuantRowBytes(QuantFormat f, int64_t k) {
  return k / QuantTraits(f).block * QuantTraits(f).quant_bytes;
}
constexpr int64_t QuantScaleRowBytes(QuantFormat f, int64_t k) {
  const QuantFormatInfo& t = QuantTraits(f);
  return k / t.block * t.scales_per_block() * t.scale_bytes;
}

// Rows [r0, r0 + nb) of w [n, k] dequantised to out [nb, k] (f32, row-major); `f` a GGUF packed
// format (IsGgufPacked).
void GgufDequantizeRows(QuantFormat f, const uint8_t* q, const void* scale, int64_t k, int64_t r0,
                        int64_t nb, float* out);

// c [m, n] = x [m, k] (f32, row-major) times dequant(w) transposed, bit for bit ViewMatmul's
// with the dequantised f32 matrix: up to kMaxVectors rows of x stream w once (a row dequantised
// into a buffer in L1, then the f32 matrix-vector kernel's dot); more dequantise 256 rows of w
// at a time for BLAS's blocks (or all of w where ViewMatmul takes another path).
// InvalidArgument for q8_0 (not a GGUF packed format).
Status GgufMatmul(QuantFormat f, const float* x, int64_t m, const uint8_t* q, const void* scale,
                  int64_t n, int64_t k, float* c, EvalContext& ctx);

}  // namespace tlaloc::cpu
