// Overflow-checked integer arithmetic for sizes computed from untrusted input (file headers,
// program text): signed overflow is undefined behaviour, so products of shapes read from a file
// must be checked rather than trusted.
#pragma once

#include <type_traits>

namespace tlaloc {

// *out = a * b; false when the exact product does not fit in T (*out is then unspecified).
template <typename T>
[[nodiscard]] inline bool CheckedMul(T a, T b, T* out) {
  static_assert(std::is_integral_v<T>);
  return !__builtin_mul_overflow(a, b, out);
}

// *out = a + b; false when the exact sum does not fit in T (*out is then unspecified).
template <typename T>
[[nodiscard]] inline bool CheckedAdd(T a, T b, T* out) {
  static_assert(std::is_integral_v<T>);
  return !__builtin_add_overflow(a, b, out);
}

}  // namespace tlaloc
