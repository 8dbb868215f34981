// llama.cpp's Q8_0 arithmetic written out plainly, the reference the q8_0 products' tests hold
// the kernels and decompositions to: ggml's x86 quantize_row_q8_0 (d = f16(amax / 127),
// q = round-half-even(x * (127 / amax))), exact block sums, each scaled block sum rounded and
// added in block order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tlaloc/support/half.h"

namespace tlaloc::q8test {

// One activation row of k (a multiple of 32) quantised per 32-block.
struct Q8Row {
  std::vector<int8_t> q;
  std::vector<float> d;
};

inline Q8Row QuantizeRow(const float* x, int64_t k) {
  Q8Row row{std::vector<int8_t>(static_cast<size_t>(k)), std::vector<float>(k / 32)};
  for (int64_t b = 0; b < k / 32; ++b) {
    float amax = 0;
    for (int e = 0; e < 32; ++e) amax = std::max(amax, std::fabs(x[b * 32 + e]));
    row.d[b] = HalfBitsToFloat(FloatToHalfBits(amax / 127.0f));
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    for (int e = 0; e < 32; ++e) {
      volatile float p = x[b * 32 + e] * id;  // rounded to f32 before nearbyint, as ggml does
      row.q[b * 32 + e] = static_cast<int8_t>(std::nearbyint(p));
    }
  }
  return row;
}

// The quantised row against one weight row w [k] with its f16 scales [k / 32].
inline float Dot(const Q8Row& x, const int8_t* w, const uint16_t* scales, int64_t k) {
  float acc = 0;
  for (int64_t b = 0; b < k / 32; ++b) {
    int32_t s = 0;
    for (int e = 0; e < 32; ++e) s += int32_t{x.q[b * 32 + e]} * w[b * 32 + e];
    volatile float p = static_cast<float>(s) * (x.d[b] * HalfBitsToFloat(scales[b]));
    acc += p;
  }
  return acc;
}

}  // namespace tlaloc::q8test
