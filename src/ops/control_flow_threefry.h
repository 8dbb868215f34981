// Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011), the generator behind XLA's and JAX's THREE_FRY random bits.
#pragma once

#include <cstdint>
#include <utility>

namespace tlaloc::ops {

inline std::pair<uint32_t, uint32_t> Threefry2x32(uint32_t k0, uint32_t k1, uint32_t x0,
                                                  uint32_t x1) {
  constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  x0 += ks[0];
  x1 += ks[1];
  // Five groups of four rounds; after group g the key schedule injects ks[(g+1)%3],
  // ks[(g+2)%3] + g + 1.
  for (int g = 0; g < 5; ++g) {
    for (int r = 0; r < 4; ++r) {
      int rot = kRot[g % 2][r];
      x0 += x1;
      x1 = (x1 << rot) | (x1 >> (32 - rot));
      x1 ^= x0;
    }
    x0 += ks[(g + 1) % 3];
    x1 += ks[(g + 2) % 3] + static_cast<uint32_t>(g + 1);
  }
  return {x0, x1};
}

}  // namespace tlaloc::ops
