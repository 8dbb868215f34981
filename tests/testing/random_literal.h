// Normally distributed f32 or bf16 literals for the fusion tests, whose first elements can be
// set to the special values (NaN, infinities, -0, the largest finite values) that a fused
// kernel must treat as the ops it replaces do.
#pragma once

#include <initializer_list>
#include <random>
#include <vector>

#include "tlaloc/ir/literal.h"
#include "tlaloc/support/half.h"

namespace tlaloc::testing {

// `leading` overwrites the first elements (as many as there are), before any bf16 rounding.
inline Literal RandomNormalLiteral(const std::vector<int64_t>& dims, ElementType et,
                                   std::mt19937& rng, float stddev,
                                   std::initializer_list<float> leading = {}) {
  std::normal_distribution<float> dist(0.0f, stddev);
  int64_t n = 1;
  for (int64_t x : dims) n *= x;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  size_t i = 0;
  for (float special : leading)
    if (i < v.size()) v[i++] = special;
  if (et == ElementType::kF32) return Literal::FromVector<float>(dims, v);
  Literal out(TensorType(et, dims));
  auto* bits = reinterpret_cast<uint16_t*>(out.data());
  for (int64_t j = 0; j < n; ++j) bits[j] = FloatToBf16Bits(v[static_cast<size_t>(j)]);
  return out;
}

}  // namespace tlaloc::testing
