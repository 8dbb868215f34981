// Shared pieces of the reduction and control-flow op definitions: recognising region bodies that
// are a single binary op or compare (so they can run without the interpreter per element),
// scalar arithmetic with StableHLO semantics for those bodies, running bodies of elementwise
// ops on whole vectors of element pairs, and index helpers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tlaloc/ir/op_registry.h"

namespace tlaloc::ops {

// ---- Binary bodies ---------------------------------------------------------------------------

enum class BinaryKind { kAdd, kMul, kMax, kMin, kAnd, kOr, kXor };

// Name of the StableHLO op for `k` ("stablehlo.add", ...).
const char* BinaryOpName(BinaryKind k);
std::optional<BinaryKind> BinaryKindFromOpName(const std::string& name);

// Recognises a two-argument region whose body is `%r = op %a0, %a1; return %r` for one of the
// ops above (operands in either order: they are all commutative), with the result type equal
// to the argument types. `in_order` (optional) reports whether the operands are (a0, a1).
std::optional<BinaryKind> MatchBinaryBody(const Region& region, bool* in_order = nullptr);

template <typename T>
inline T ApplyBinary(BinaryKind k, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (k) {
      case BinaryKind::kAdd:  // i1 addition is or, multiplication is and (as XLA does)
      case BinaryKind::kOr:
      case BinaryKind::kMax:
        return a || b;
      case BinaryKind::kMul:
      case BinaryKind::kAnd:
      case BinaryKind::kMin:
        return a && b;
      case BinaryKind::kXor:
        return a != b;
    }
    return a;
  } else if constexpr (kIsHalfLike<T>) {
    float r = ApplyBinary<float>(k, a.f(), b.f());
    return T(r);
  } else if constexpr (std::is_floating_point_v<T>) {
    switch (k) {
      case BinaryKind::kAdd:
        return a + b;
      case BinaryKind::kMul:
        return a * b;
      case BinaryKind::kMax:
        if (std::isnan(a)) return a;
        if (std::isnan(b)) return b;
        if (a == b) return std::signbit(a) ? b : a;  // max(-0, +0) = +0
        return a > b ? a : b;
      case BinaryKind::kMin:
        if (std::isnan(a)) return a;
        if (std::isnan(b)) return b;
        if (a == b) return std::signbit(a) ? a : b;  // min(-0, +0) = -0
        return a < b ? a : b;
      default:
        return a;  // bitwise ops are rejected for floats by MatchBinaryBody's callers
    }
  } else {
    using U = std::make_unsigned_t<T>;
    switch (k) {
      case BinaryKind::kAdd:
        return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case BinaryKind::kMul:
        // Promote to at least unsigned int so narrow types never multiply as signed int.
        using W = std::common_type_t<U, unsigned>;
        return static_cast<T>(
            static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
      case BinaryKind::kMax:
        return a > b ? a : b;
      case BinaryKind::kMin:
        return a < b ? a : b;
      case BinaryKind::kAnd:
        return static_cast<T>(a & b);
      case BinaryKind::kOr:
        return static_cast<T>(a | b);
      case BinaryKind::kXor:
        return static_cast<T>(a ^ b);
    }
    return a;
  }
}

// True when `k` is defined for element type `et` (no bitwise ops on floats).
bool BinaryKindSupports(BinaryKind k, ElementType et);

// ---- Compare bodies --------------------------------------------------------------------------

enum class CompareDir { kEQ, kNE, kLT, kLE, kGT, kGE };
enum class CompareKind { kFloat, kTotalOrder, kSigned, kUnsigned, kDefault };

struct CompareSpec {
  CompareDir dir = CompareDir::kLT;
  CompareKind kind = CompareKind::kDefault;
  bool swapped = false;  // compare(a1, a0) instead of compare(a0, a1)
};

// Recognises a comparator region of 2 * n scalar arguments whose body is
// `%r = stablehlo.compare DIR, %a0, %a1 [, TYPE]; return %r` (or with %a1, %a0).
std::optional<CompareSpec> MatchCompareBody(const Region& region);

// Total order on floats as StableHLO's TOTALORDER defines it: -NaN < -Inf < ... < -0 < +0 <
// ... < +Inf < +NaN, ordered by the sign-magnitude bit pattern.
template <typename T>
inline int64_t TotalOrderKey(T v) {
  if constexpr (kIsHalfLike<T>) {
    int64_t bits = v.bits;
    return (bits & 0x8000) ? -(bits & 0x7fff) - 1 : bits;
  } else if constexpr (std::is_same_v<T, float>) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    int64_t mag = u & 0x7fffffffu;
    return (u >> 31) ? -mag - 1 : mag;
  } else {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    int64_t mag = static_cast<int64_t>(u & 0x7fffffffffffffffull);
    return (u >> 63) ? -mag - 1 : mag;
  }
}

// x DIR y for any ordered type (one switch shared by every comparison kind).
template <typename V>
inline bool ApplyCompareDir(CompareDir dir, V x, V y) {
  switch (dir) {
    case CompareDir::kEQ:
      return x == y;
    case CompareDir::kNE:
      return x != y;
    case CompareDir::kLT:
      return x < y;
    case CompareDir::kLE:
      return x <= y;
    case CompareDir::kGT:
      return x > y;
    case CompareDir::kGE:
      return x >= y;
  }
  return false;
}

template <typename T>
inline bool ApplyCompare(const CompareSpec& c, T a, T b) {
  if (c.swapped) std::swap(a, b);
  if constexpr (kIsFloatLike<T>) {
    if (c.kind == CompareKind::kTotalOrder) {
      int64_t x = TotalOrderKey(a), y = TotalOrderKey(b);
      return ApplyCompareDir(c.dir, x, y);
    }
    double x = ToDouble(a), y = ToDouble(b);
    return ApplyCompareDir(c.dir, x, y);
  } else {
    return ApplyCompareDir(c.dir, a, b);
  }
}

// ---- Index helpers ---------------------------------------------------------------------------

// Advances a row-major multi-index over `dims`; false after the last one.
inline bool NextIndex(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// A scalar literal holding element i of `l`.
Literal ElementAsScalar(const Literal& l, int64_t i);
// Copies element `src_i` of `src` to element `dst_i` of `dst` (same element type).
inline void CopyElement(const Literal& src, int64_t src_i, Literal& dst, int64_t dst_i) {
  int size = ElementSize(src.element_type());
  std::memcpy(dst.data() + dst_i * size, src.data() + src_i * size, size);
}

// The `dimensions` of a reduce its shape rule accepted (reduction.cc).
std::vector<int64_t> ReduceDimensions(const Operation& op);

// Validates a dimension list: each in [0, rank), no repeats. `what` names it in errors.
Status CheckDimensionList(const std::vector<int64_t>& dims, int64_t rank, const std::string& what);

// ---- Vectorised region bodies ------------------------------------------------------------------

// True when every op of the region's body is elementwise (OpTraits) or a constant, and every
// value in it is a scalar tensor defined inside the region: such a body can run once on vectors
// of many element pairs instead of once per pair.
bool RegionIsVectorizable(const Region& region);

// Runs a vectorisable region with each block argument bound to a rank-1 literal of length m
// (the body's scalars, m at a time). Constants are broadcast; the ops' own eval functions do the
// work, never reusing operand buffers.
StatusOr<std::vector<Literal>> RunRegionVectorized(const Region& region, std::vector<Literal> args,
                                                   int64_t m, EvalContext& ctx);

// Element types of the values a region's terminator returns, or an error.
StatusOr<std::vector<Type>> RegionReturnTypes(const Region& region);

// ---- Shape rules of reduce and reduce_window ---------------------------------------------------

// Checks that the operands are N inputs of one shape followed by N scalar init values; returns N.
StatusOr<size_t> CheckInputsThenInits(const InferInput& in);

// Checks a reduction body of N inputs once it has a block: it takes 2N arguments and, once it has
// a terminator, returns N scalars. Returns their element types, or an empty list while the body
// has no block or no terminator yet.
StatusOr<std::vector<ElementType>> ReductionBodyResults(const Region& body, size_t n);

}  // namespace tlaloc::ops
