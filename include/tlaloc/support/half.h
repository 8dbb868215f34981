// IEEE binary16 and bfloat16 storage types. Arithmetic happens in float; conversions from float
// round to nearest even, as the StableHLO specification requires. Written here because C++20
// on GCC 12 has no portable std::float16_t / std::bfloat16_t arithmetic.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace tlaloc {

inline uint16_t FloatToBf16Bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

inline float Bf16BitsToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToHalfBits(float f);
float HalfBitsToFloat(uint16_t h);
uint16_t DoubleToHalfBits(double d);
uint16_t DoubleToBf16Bits(double d);

struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) : bits(FloatToBf16Bits(f)) {}
  static bf16 FromBits(uint16_t b) {
    bf16 r;
    r.bits = b;
    return r;
  }
  explicit operator float() const { return Bf16BitsToFloat(bits); }
  float f() const { return Bf16BitsToFloat(bits); }
};

struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float f) : bits(FloatToHalfBits(f)) {}
  static f16 FromBits(uint16_t b) {
    f16 r;
    r.bits = b;
    return r;
  }
  explicit operator float() const { return HalfBitsToFloat(bits); }
  float f() const { return HalfBitsToFloat(bits); }
};

}  // namespace tlaloc
