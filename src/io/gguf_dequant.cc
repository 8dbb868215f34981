// ggml's block-quantized tensor types dequantised to f32, written after ggml-quants.c's
// dequantize_row_* reference functions: the same products and differences in the same order
// (no fused multiply-add: this file is compiled without contraction, see below), so the values
// equal llama.cpp's and gguf-py's bit for bit.
#include <cstring>

#include "tlaloc/io/gguf.h"
#include "tlaloc/support/half.h"

// a * b - c must round twice, as in ggml's C and in numpy; a compiler allowed to contract it
// into one fma would change the last bit.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tlaloc::io {
namespace {

float F16At(const uint8_t* p) {
  uint16_t h = 0;
  std::memcpy(&h, p, 2);
  return HalfBitsToFloat(h);
}

void Q4_0(const uint8_t* b, float* y) {
  const float d = F16At(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void Q4_1(const uint8_t* b, float* y) {
  const float d = F16At(b), m = F16At(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Q5_0 / Q5_1: the fifth bit of element j is bit j of the 32-bit qh.
void Q5(const uint8_t* b, float* y, bool with_min) {
  const float d = F16At(b), m = with_min ? F16At(b + 2) : 0.0f;
  const uint8_t* p = b + (with_min ? 4 : 2);
  uint32_t qh = 0;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  for (int j = 0; j < 16; ++j) {
    const int xh0 = static_cast<int>(((qh >> j) << 4) & 0x10);
    const int xh1 = static_cast<int>((qh >> (j + 12)) & 0x10);
    if (with_min) {
      y[j] = static_cast<float>((qs[j] & 0x0F) | xh0) * d + m;
      y[j + 16] = static_cast<float>((qs[j] >> 4) | xh1) * d + m;
    } else {
      y[j] = static_cast<float>(((qs[j] & 0x0F) | xh0) - 16) * d;
      y[j + 16] = static_cast<float>(((qs[j] >> 4) | xh1) - 16) * d;
    }
  }
}

void Q8_0(const uint8_t* b, float* y) {
  const float d = F16At(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// The j-th 6-bit scale and minimum of a Q4_K / Q5_K super-block's 12 packed bytes.
void ScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q4_K (fifth bits absent) and Q5_K: 8 sub-blocks of 32, value = d * scale * q - dmin * min.
void QK(const uint8_t* b, float* y, bool five) {
  const float d = F16At(b), dmin = F16At(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* q = b + (five ? 48 : 16);
  int is = 0;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 256; j += 64) {
    uint8_t sc = 0, m = 0;
    ScaleMinK4(is + 0, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    ScaleMinK4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) {
      const int hi = five && (qh[l] & u1) ? 16 : 0;
      *y++ = d1 * static_cast<float>((q[l] & 0xF) + hi) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int hi = five && (qh[l] & u2) ? 16 : 0;
      *y++ = d2 * static_cast<float>((q[l] >> 4) + hi) - m2;
    }
    q += 32;
    is += 2;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

// Q6_K: 16 sub-blocks of 16 with int8 scales, value = d * scale * (q - 32).
void Q6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = F16At(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = static_cast<int8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * sc[is + 0] * static_cast<float>(q1);
      y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
      y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
      y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

Status DequantizeGgml(GgmlType t, std::span<const std::byte> blocks, std::span<float> out) {
  if (!IsQuantized(t))
    return InvalidArgument("DequantizeGgml: " + std::string(GgmlTypeName(t)) +
                           " is not a quantized type");
  const int64_t per_block = GgmlBlockElements(t), block_bytes = GgmlBlockBytes(t);
  const auto n = static_cast<int64_t>(out.size());
  if (n % per_block != 0 || static_cast<uint64_t>(blocks.size()) != GgmlBytes(t, n))
    return InvalidArgument("DequantizeGgml: " + std::to_string(blocks.size()) + " bytes of " +
                           std::string(GgmlTypeName(t)) + " for " + std::to_string(n) +
                           " values (expected whole blocks of " + std::to_string(per_block) +
                           " values in " + std::to_string(block_bytes) + " bytes each)");
  const auto* src = reinterpret_cast<const uint8_t*>(blocks.data());
  float* y = out.data();
  for (int64_t i = 0; i < n / per_block; ++i, src += block_bytes, y += per_block) {
    switch (t) {
      case GgmlType::kQ4_0:
        Q4_0(src, y);
        break;
      case GgmlType::kQ4_1:
        Q4_1(src, y);
        break;
      case GgmlType::kQ5_0:
        Q5(src, y, /*with_min=*/false);
        break;
      case GgmlType::kQ5_1:
        Q5(src, y, /*with_min=*/true);
        break;
      case GgmlType::kQ8_0:
        Q8_0(src, y);
        break;
      case GgmlType::kQ4_K:
        QK(src, y, /*five=*/false);
        break;
      case GgmlType::kQ5_K:
        QK(src, y, /*five=*/true);
        break;
      case GgmlType::kQ6_K:
        Q6_K(src, y);
        break;
      default:
        break;
    }
  }
  return OkStatus();
}

}  // namespace tlaloc::io
