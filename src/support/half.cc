#include "tlaloc/support/half.h"

#include <cmath>

namespace tlaloc {

uint16_t FloatToHalfBits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow or inf
  if (abs < 0x38800000u) {
    // Subnormal or zero in half: scale into integer and round to nearest even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half of min subnormal
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23);  // 14 + (113 - exp) ... derived: 125-exp+1
    // value = mant * 2^(exp-150); half subnormal unit is 2^-24 => q = mant * 2^(exp-126)
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias exponent and round mantissa from 23 to 10 bits.
  uint32_t r = abs - 0x38000000u;  // exponent bias 127 -> 15
  uint32_t rounded = r + 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

float HalfBitsToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {
      float v = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -v : v;
    }
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(out);
}

// double -> half/bf16 without double rounding: round |d| to float by truncation and set the
// sticky bit when inexact ("round to odd"), then round once more to the narrow type.
static float RoundToOddFloat(double d) {
  double ad = std::abs(d);
  float af = static_cast<float>(ad);
  if (static_cast<double>(af) > ad) af = std::nextafter(af, 0.0f);
  if (static_cast<double>(af) != ad) af = std::bit_cast<float>(std::bit_cast<uint32_t>(af) | 1u);
  return std::signbit(d) ? -af : af;  // keeps the sign of -0
}

uint16_t DoubleToHalfBits(double d) {
  if (std::isnan(d) || std::isinf(d)) return FloatToHalfBits(static_cast<float>(d));
  return FloatToHalfBits(RoundToOddFloat(d));
}

uint16_t DoubleToBf16Bits(double d) {
  if (std::isnan(d) || std::isinf(d)) return FloatToBf16Bits(static_cast<float>(d));
  return FloatToBf16Bits(RoundToOddFloat(d));
}

}  // namespace tlaloc
