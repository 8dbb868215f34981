// GGUF Q4_0 / Q4_K / Q6_K blocks split into the packed tensors of nn/gguf_linear.h: the quants
// copied as they are (2 per byte; Q6_K's ql/qh bytes in llama.cpp's order), the scales expanded
// as llama.cpp's dequantize_row_* computes them (d * sc and dmin * m in f32, exact), so the
// program's dequantisation gives llama.cpp's (and io::DequantizeGgml's) weights bit for bit.
#include <cstring>

#include "models/decoder/gguf_import_internal.h"
#include "tlaloc/support/half.h"

namespace tlaloc::models::decoder {

namespace {

float F16At(const std::byte* p) {
  uint16_t h = 0;
  std::memcpy(&h, p, 2);
  return HalfBitsToFloat(h);
}

void PutF32(std::byte* p, float v) { std::memcpy(p, &v, 4); }

// The j-th 6-bit scale and minimum of a Q4_K super-block's 12 packed bytes (ggml's
// get_scale_min_k4).
void ScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace

std::optional<QuantFormat> PackedFormatOf(io::GgmlType t) {
  for (const QuantFormatInfo& f : kQuantFormats)
    if (f.ggml_type == static_cast<uint32_t>(t) && f.format != QuantFormat::kQ8_0) return f.format;
  return std::nullopt;
}

Status RepackGgml(io::GgmlType t, std::span<const std::byte> blocks, std::vector<std::byte>& q,
                  std::vector<std::byte>& scale) {
  const int64_t block_bytes = io::GgmlBlockBytes(t);
  if (!PackedFormatOf(t) || static_cast<int64_t>(blocks.size()) % block_bytes != 0)
    return InvalidArgument("RepackGgml: " + std::to_string(blocks.size()) + " bytes of " +
                           std::string(io::GgmlTypeName(t)) +
                           " (expected whole blocks of Q4_0, Q4_K or Q6_K)");
  const int64_t n = static_cast<int64_t>(blocks.size()) / block_bytes;
  q.clear();
  scale.clear();
  for (int64_t i = 0; i < n; ++i) {
    const std::byte* b = blocks.data() + i * block_bytes;
    switch (t) {
      case io::GgmlType::kQ4_0:  // d f16, qs[16]
        scale.insert(scale.end(), b, b + 2);
        q.insert(q.end(), b + 2, b + 18);
        break;
      case io::GgmlType::kQ4_K: {  // d f16, dmin f16, scales[12], qs[128]
        const float d = F16At(b), dmin = F16At(b + 2);
        const auto* packed = reinterpret_cast<const uint8_t*>(b + 4);
        const size_t at = scale.size();
        scale.resize(at + 8 * 2 * 4);
        for (int j = 0; j < 8; ++j) {
          uint8_t sc = 0, m = 0;
          ScaleMinK4(j, packed, &sc, &m);
          PutF32(scale.data() + at + j * 8, d * sc);
          PutF32(scale.data() + at + j * 8 + 4, dmin * m);
        }
        q.insert(q.end(), b + 16, b + 144);
        break;
      }
      case io::GgmlType::kQ6_K: {  // ql[128], qh[64], scales[16] (s8), d f16
        const float d = F16At(b + 208);
        const size_t at = scale.size();
        scale.resize(at + 16 * 4);
        for (int j = 0; j < 16; ++j)
          PutF32(scale.data() + at + j * 4, d * static_cast<int8_t>(b[192 + j]));
        q.insert(q.end(), b, b + 192);
        break;
      }
      default:
        break;
    }
  }
  return OkStatus();
}

}  // namespace tlaloc::models::decoder
