// GGUF packed-weight products (matmul_gguf4.h). The dequantisation repeats the composite's
// decomposition step for step (nn/gguf_linear.cc): integer unpacking, then the f32 products and
// differences in the same order, each rounded on its own (no contraction into fused multiply-add,
// see the pragma), so every dequantised weight has the decomposition's bits; the dot products
// are then the f32 kernels' own.
#include "ops/matmul_gguf4.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/reduction_matmul.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/support/half.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tlaloc::ops {

namespace {

void Q4_0Row(const uint8_t* q, const uint16_t* scale, int64_t k, float* y) {
  for (int64_t b = 0; b < k / 32; ++b, q += 16, y += 32) {
    const float d = HalfBitsToFloat(scale[b]);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(q[j] & 0x0F) - 8.0f;
      y[j + 16] = static_cast<float>(q[j] >> 4) - 8.0f;
    }
    for (int j = 0; j < 32; ++j) y[j] *= d;
  }
}

void Q4_KRow(const uint8_t* q, const float* scale, int64_t k, float* y) {
  for (int64_t b = 0; b < k / 64; ++b, q += 32, y += 64) {
    const float d1 = scale[4 * b], m1 = scale[4 * b + 1];
    const float d2 = scale[4 * b + 2], m2 = scale[4 * b + 3];
    for (int j = 0; j < 32; ++j) {
      y[j] = d1 * static_cast<float>(q[j] & 0x0F) - m1;
      y[j + 32] = d2 * static_cast<float>(q[j] >> 4) - m2;
    }
  }
}

void Q6_KRow(const uint8_t* q, const float* scale, int64_t k, float* y) {
  for (int64_t b = 0; b < k / 256; ++b, q += 192) {
    const uint8_t* ql = q;
    const uint8_t* qh = q + 128;
    for (int h = 0; h < 2; ++h, ql += 64, qh += 32, y += 128, scale += 8) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = static_cast<float>(q1);
        y[l + 32] = static_cast<float>(q2);
        y[l + 64] = static_cast<float>(q3);
        y[l + 96] = static_cast<float>(q4);
      }
      for (int e = 0; e < 128; ++e) y[e] *= scale[e / 16];
    }
  }
}

}  // namespace

int64_t GgufPackedRowBytes(GgufPacked f, int64_t k) {
  return f == GgufPacked::kQ6_K ? k / 256 * 192 : k / 2;
}

int64_t GgufScaleRowBytes(GgufPacked f, int64_t k) {
  switch (f) {
    case GgufPacked::kQ4_0:
      return k / 32 * 2;
    case GgufPacked::kQ4_K:
      return k / 32 * 8;
    case GgufPacked::kQ6_K:
      return k / 16 * 4;
  }
  return 0;
}

void GgufDequantizeRows(GgufPacked f, const uint8_t* q, const void* scale, int64_t k, int64_t r0,
                        int64_t nb, float* out) {
  const int64_t qb = GgufPackedRowBytes(f, k), sb = GgufScaleRowBytes(f, k);
  const auto* s = static_cast<const uint8_t*>(scale);
  for (int64_t r = r0; r < r0 + nb; ++r, out += k) {
    const uint8_t* qr = q + r * qb;
    const uint8_t* sr = s + r * sb;
    switch (f) {
      case GgufPacked::kQ4_0:
        Q4_0Row(qr, reinterpret_cast<const uint16_t*>(sr), k, out);
        break;
      case GgufPacked::kQ4_K:
        Q4_KRow(qr, reinterpret_cast<const float*>(sr), k, out);
        break;
      case GgufPacked::kQ6_K:
        Q6_KRow(qr, reinterpret_cast<const float*>(sr), k, out);
        break;
    }
  }
}

void GgufMatmul(GgufPacked f, const float* x, int64_t m, const uint8_t* q, const void* scale,
                int64_t n, int64_t k, float* c, EvalContext& ctx) {
  auto dequantise = [&](int64_t j0, int64_t nb, float* out) {
    GgufDequantizeRows(f, q, scale, k, j0, nb, out);
  };
  if (m > kMaxVectors) {
    // Prefill: BLAS's 256 x 256 blocks on 256 dequantised rows at a time (the calls ViewMatmul
    // makes, so its bits), else the whole matrix dequantised and ViewMatmul.
    if (BlasMatmulTransposedBlocks(x, m, k, n, dequantise, c, ctx)) return;
    Literal dense_buffer = Literal::Uninitialized(TensorType(ElementType::kF32, {n, k}));
    float* dense = dense_buffer.span<float>().data();
    ctx.ParallelFor(
        n, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)),
        [&](int64_t begin, int64_t end) { dequantise(begin, end - begin, dense + begin * k); });
    MatrixView a{reinterpret_cast<const std::byte*>(x), ElementType::kF32, m * k, k, 1};
    MatrixView b{reinterpret_cast<const std::byte*>(dense), ElementType::kF32, n * k, 1, k};
    ViewMatmul(a, b, 1, m, k, n, c, ctx);
    return;
  }
  // Decode: each thread streams its share of rows once; a row is dequantised into a buffer that
  // stays in L1 and dotted with every vector by the f32 kernel (the same per-pair arithmetic as
  // ViewMatmul's matrix-vector paths).
  const int64_t block = std::max<int64_t>(4, (int64_t{1} << 16) / std::max<int64_t>(k, 1) / 4 * 4);
  ParallelShares(ctx, n, block, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = begin; r < end; ++r) {
      dequantise(r, 1, row.data());
      for (int64_t v = 0; v < m; ++v) c[v * n + r] = DotF32(x + v * k, row.data(), k);
    }
  });
}

}  // namespace tlaloc::ops
