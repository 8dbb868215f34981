// What stablehlo.dot_general and stablehlo.dot mean, in the pieces their reference evaluation
// (reduction_dot.cc) and the CPU layer's kernel (cpu/dot_kernels.cc) share: the dimension
// numbers, the contraction's [batch, m, k] x [batch, k, n] shape, the accumulation type, and
// packing operands into it and storing the accumulated result.
#pragma once

#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "reduction_kernels.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/op_registry.h"
#include "tlaloc/ir/typed_builder.h"

namespace tlaloc::ops {

using DotDims = hlo::DotDimensionNumbers;

StatusOr<DotDims> ReadDotDims(const AttrDict& attrs);
// The dimension numbers of a dot_general (its attribute) or a dot (vector/matrix products).
StatusOr<DotDims> DotDimsOf(const Operation& op, std::span<const Literal> operands);
// Free dimensions of an operand: those neither batching nor contracting, in order.
std::vector<int64_t> FreeDims(int64_t rank, const std::vector<int64_t>& batch,
                              const std::vector<int64_t>& contract);

// The contraction as batch products of [m, k] and [k, n] matrices: lhs_order and rhs_order list
// the source dimensions in the packed row-major order ([batch, free, contracting] for lhs,
// [batch, contracting, free] for rhs).
struct DotShape {
  int64_t batch = 1, m = 1, k = 1, n = 1;
  std::vector<int64_t> lhs_free, rhs_free, lhs_order, rhs_order;
};
DotShape ShapeOfDot(const DotDims& d, const Literal& lhs, const Literal& rhs);

// Accumulation type: f64 if anything is f64, f32 for other floats, wrapping u64 for integers.
enum class DotAcc { kF32, kF64, kU64 };
DotAcc AccumulationOf(const Literal& lhs, const Literal& rhs, ElementType result);

template <typename A, typename T>
inline A ToAcc(T v) {
  if constexpr (std::is_same_v<A, uint64_t>) {
    if constexpr (std::is_same_v<T, bool>) {
      return v ? 1 : 0;
    } else if constexpr (kIsFloatLike<T>) {
      return static_cast<uint64_t>(static_cast<int64_t>(ToDouble(v)));
    } else {
      return static_cast<uint64_t>(v);  // sign-extends signed types; wraps later
    }
  } else if constexpr (kIsHalfLike<T>) {
    return static_cast<A>(v.f());
  } else {
    return static_cast<A>(v);
  }
}

// Copies `src` into `out` (converted to A) with its dimensions permuted into `order` (the
// source dimensions in packed row-major order). The innermost packed dimension is walked with
// its stride; the others with an odometer.
template <typename A>
void PackOperand(const Literal& src, const std::vector<int64_t>& order, std::vector<A>& out) {
  const std::vector<int64_t>& dims = src.dims();
  std::vector<int64_t> strides = RowMajorStrides(dims);
  std::vector<int64_t> pdims, pstrides;
  bool identity = true;
  for (size_t k = 0; k < order.size(); ++k) {
    pdims.push_back(dims[order[k]]);
    pstrides.push_back(strides[order[k]]);
    identity = identity && order[k] == static_cast<int64_t>(k);
  }
  int64_t n = src.num_elements();
  out.resize(n);
  if (n == 0) return;
  DispatchElementType(src.element_type(), [&]<typename T>() {
    const T* p = src.span<T>().data();
    if (identity) {
      if constexpr (std::is_same_v<T, A>) {
        std::memcpy(out.data(), p, n * sizeof(A));
      } else {
        for (int64_t i = 0; i < n; ++i) out[i] = ToAcc<A>(p[i]);
      }
      return;
    }
    int64_t inner = pdims.empty() ? 1 : pdims.back();
    int64_t inner_stride = pdims.empty() ? 0 : pstrides.back();
    std::vector<int64_t> outer_dims(pdims.begin(), pdims.empty() ? pdims.end() : pdims.end() - 1);
    std::vector<int64_t> idx(outer_dims.size(), 0);
    int64_t i = 0;
    do {
      int64_t off = 0;
      for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * pstrides[k];
      for (int64_t j = 0; j < inner; ++j) out[i++] = ToAcc<A>(p[off + j * inner_stride]);
    } while (NextIndex(idx, outer_dims));
  });
}

template <typename A>
void StoreResult(const std::vector<A>& acc, Literal& result) {
  DispatchElementType(result.element_type(), [&]<typename T>() {
    T* out = result.span<T>().data();
    if constexpr (std::is_same_v<T, A>) {
      if (!acc.empty()) std::memcpy(out, acc.data(), acc.size() * sizeof(A));
      return;
    }
    for (size_t i = 0; i < acc.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        out[i] = acc[i] != A(0);
      } else if constexpr (std::is_same_v<A, uint64_t>) {
        if constexpr (kIsFloatLike<T>) {
          out[i] = FromDouble<T>(static_cast<double>(static_cast<int64_t>(acc[i])));
        } else {
          out[i] = static_cast<T>(acc[i]);  // truncation = wrap-around in the result type
        }
      } else {
        out[i] = FromDouble<T>(static_cast<double>(acc[i]));
      }
    }
  });
}

}  // namespace tlaloc::ops
