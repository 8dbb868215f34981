// Shared pieces of the elementwise op area (elementwise*.cc): element-kind checks, typed
// parallel map loops, wrap-around integer arithmetic and the factories that build the OpDefs of
// the many ops that differ only in their scalar function.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "bulk_math.h"
#include "op_helpers.h"
#include "tlaloc/ir/typed_builder.h"

namespace tlaloc::ops::ew {

// Element kinds an op accepts (a bit set).
enum Kinds : unsigned {
  kPredK = 1,
  kSignedK = 2,
  kUnsignedK = 4,
  kFloatK = 8,
  kIntK = kSignedK | kUnsignedK,
  kNumericK = kIntK | kFloatK,
  kIntOrPredK = kIntK | kPredK,
  kAnyK = kNumericK | kPredK,
};

template <typename T>
constexpr unsigned KindOf() {
  if constexpr (std::is_same_v<T, bool>)
    return kPredK;
  else if constexpr (kIsFloatLike<T>)
    return kFloatK;
  else if constexpr (std::is_signed_v<T>)
    return kSignedK;
  else
    return kUnsignedK;
}
unsigned KindOf(ElementType et);
// "expected <what> of float type, got tensor<2xi32>" style errors.
Status CheckKinds(const Type& t, unsigned allowed, const std::string& what);
std::string KindsToString(unsigned kinds);

// Loops of at least this many elements are split over the interpreter's threads.
inline constexpr int64_t kGrain = 1 << 14;

template <typename Body>
void ParallelRange(EvalContext& ctx, int64_t n, Body&& body) {
  if (n <= 0) return;
  if (n <= kGrain) {
    body(int64_t{0}, n);
    return;
  }
  ctx.ParallelFor(n, kGrain, [&](int64_t b, int64_t e) { body(b, e); });
}

// Arithmetic happens in float for f16/bf16 (then rounds to nearest even), natively otherwise.
template <typename T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<f16> {
  using type = float;
};
template <>
struct ComputeTypeOf<bf16> {
  using type = float;
};
template <typename T>
using ComputeType = typename ComputeTypeOf<T>::type;

template <typename T>
inline ComputeType<T> Up(T v) {
  if constexpr (kIsHalfLike<T>)
    return v.f();
  else
    return v;
}
template <typename T>
inline T Down(ComputeType<T> v) {
  if constexpr (kIsHalfLike<T>)
    return T(v);
  else
    return v;
}

// Transcendental functions of f32 (and of f16/bf16, which compute in float) are evaluated in
// double and rounded once: correctly rounded in all but rare cases, where glibc's float versions
// may be 1 ULP off.
template <typename F>
auto InDouble(F f) {
  return [f](auto... x) {
    using C = std::common_type_t<decltype(x)...>;
    if constexpr (std::is_same_v<C, float>)
      return static_cast<float>(f(static_cast<double>(x)...));
    else
      return f(x...);
  };
}

// Integer arithmetic that wraps: done in an unsigned type at least as wide as int, so neither
// signed overflow nor the promotion of small unsigned types to int can be undefined.
template <typename T>
using WideUnsigned =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
template <typename T>
inline T WrapAdd(T a, T b) {
  return static_cast<T>(static_cast<WideUnsigned<T>>(a) + static_cast<WideUnsigned<T>>(b));
}
template <typename T>
inline T WrapSub(T a, T b) {
  return static_cast<T>(static_cast<WideUnsigned<T>>(a) - static_cast<WideUnsigned<T>>(b));
}
template <typename T>
inline T WrapMul(T a, T b) {
  return static_cast<T>(static_cast<WideUnsigned<T>>(a) * static_cast<WideUnsigned<T>>(b));
}
template <typename T>
inline T WrapNeg(T a) {
  return WrapSub<T>(T{0}, a);
}

// IEEE-754 maximum / minimum: NaN propagates, -0 orders below +0; on i1 they are or / and.
template <typename C>
inline C Maximum(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) {
    return a || b;
  } else if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == b) return std::signbit(a) ? b : a;  // max(-0, +0) = +0
    return a > b ? a : b;
  } else {
    return a > b ? a : b;
  }
}

template <typename C>
inline C Minimum(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) {
    return a && b;
  } else if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == b) return std::signbit(a) ? a : b;  // min(-0, +0) = -0
    return a < b ? a : b;
  } else {
    return a < b ? a : b;
  }
}

// Typed map loops. Operands flagged `scalar` are rank-0 values broadcast to every element.
template <typename In, typename Out, typename F>
void Map1(EvalContext& ctx, const Literal& a, Literal& out, F f) {
  const In* x = reinterpret_cast<const In*>(a.data());
  Out* y = reinterpret_cast<Out*>(out.data());
  ParallelRange(ctx, out.num_elements(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = f(x[i]);
  });
}

template <typename A, typename B, typename Out, typename F>
void Map2(EvalContext& ctx, const Literal& a, const Literal& b, Literal& out, F f) {
  const A* x = reinterpret_cast<const A*>(a.data());
  const B* z = reinterpret_cast<const B*>(b.data());
  Out* y = reinterpret_cast<Out*>(out.data());
  ParallelRange(ctx, out.num_elements(), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = f(x[i], z[i]);
  });
}

template <typename A, typename B, typename C, typename Out, typename F>
void Map3(EvalContext& ctx, const Literal& a, const Literal& b, const Literal& c, Literal& out,
          F f) {
  const int64_t n = out.num_elements();
  const A* x = reinterpret_cast<const A*>(a.data());
  const B* z = reinterpret_cast<const B*>(b.data());
  const C* w = reinterpret_cast<const C*>(c.data());
  // Scalar operands are read at index 0 (stride 0).
  const int64_t sa = a.num_elements() == n ? 1 : 0;
  const int64_t sb = b.num_elements() == n ? 1 : 0;
  const int64_t sc = c.num_elements() == n ? 1 : 0;
  Out* y = reinterpret_cast<Out*>(out.data());
  ParallelRange(ctx, n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = f(x[i * sa], z[i * sb], w[i * sc]);
  });
}

// Error for a kind the op's checked shape rule should already have refused.
Status UnsupportedElementType(const Operation& op, ElementType et);

// Defines an op with one result, elementwise trait and the "same type or functional" pretty
// syntax. `kinds` restricts operand element types (checked on operand 0; all operands must have
// the same type). `result_pred` makes the result i1 of the operand's shape (is_finite).
OpDef& DefineSameType(OpRegistry& r, const std::string& name, int num_operands, unsigned kinds,
                      EvalFn eval, bool result_pred = false);

// Lets a result take over the buffer of an operand that dies here (same type), so chains of
// elementwise ops on donated or temporary values need no new buffers. Each element is read
// before it is written, so computing in place is safe.
inline void ReuseDeadOperand(std::span<const Literal> in, std::vector<Literal>& out,
                             EvalContext& ctx) {
  for (size_t k = 0; k < in.size(); ++k)
    if (ctx.CanReuseOperand(static_cast<int>(k)) && in[k].type() == out[0].type()) {
      out[0] = in[k];
      return;
    }
}

// Eval of a unary op whose scalar function `f` is called on the compute type (float for halves)
// of every element type in `Kinds`.
template <unsigned Kinds, typename F>
EvalFn UnaryEval(F f) {
  return [f](const Operation& op, std::span<const Literal> in, std::vector<Literal>& out,
             EvalContext& ctx) -> Status {
    return DispatchElementType(in[0].element_type(), [&]<typename T>() -> Status {
      if constexpr ((KindOf<T>() & Kinds) != 0) {
        ReuseDeadOperand(in, out, ctx);
        Map1<T, T>(ctx, in[0], out[0], [&](T v) { return Down<T>(f(Up(v))); });
        return OkStatus();
      } else {
        return UnsupportedElementType(op, in[0].element_type());
      }
    });
  };
}

// Eval of a float unary op that also has a bulk f32 loop giving, bit for bit, what `f` gives on
// the compute type (`kernel` of the installed vmath::Bulk(), see bulk_math.h): f32 tensors go
// through the loop directly, f16/bf16 ones through it in blocks of floats (rounded back as `f`'s
// results are), others through `f`.
template <typename F>
EvalFn FloatUnaryEvalWithF32Kernel(F f, vmath::F32Kernel vmath::BulkKernels::*kernel) {
  return [f, kernel](const Operation& op, std::span<const Literal> in, std::vector<Literal>& out,
                     EvalContext& ctx) -> Status {
    const vmath::F32Kernel f32_kernel = vmath::Bulk().*kernel;
    return DispatchElementType(in[0].element_type(), [&]<typename T>() -> Status {
      if constexpr (KindOf<T>() != kFloatK) {
        return UnsupportedElementType(op, in[0].element_type());
      } else {
        ReuseDeadOperand(in, out, ctx);  // the kernels allow in == out
        const T* x = reinterpret_cast<const T*>(in[0].data());
        T* y = reinterpret_cast<T*>(out[0].data());
        if constexpr (std::is_same_v<T, float>) {
          ParallelRange(ctx, out[0].num_elements(),
                        [&](int64_t b, int64_t e) { f32_kernel(x + b, y + b, e - b); });
        } else if constexpr (std::is_same_v<ComputeType<T>, float>) {
          ParallelRange(ctx, out[0].num_elements(), [&](int64_t b, int64_t e) {
            constexpr int64_t kBlock = 512;
            float block[kBlock];
            for (int64_t i = b; i < e; i += kBlock) {
              const int64_t m = std::min(kBlock, e - i);
              for (int64_t k = 0; k < m; ++k) block[k] = Up(x[i + k]);
              f32_kernel(block, block, m);
              for (int64_t k = 0; k < m; ++k) y[i + k] = Down<T>(block[k]);
            }
          });
        } else {
          Map1<T, T>(ctx, in[0], out[0], [&](T v) { return Down<T>(f(Up(v))); });
        }
        return OkStatus();
      }
    });
  };
}

// bf16 operands widened to f32 in blocks, f applied, the results rounded back: the same values as
// Down(f(Up(a), Up(b))) element by element, with the widening and rounding vectorised (they were
// most of a bf16 multiply's time). The output may be either operand's buffer: each block is read
// whole before it is written.
template <typename F>
void Bf16Map2(EvalContext& ctx, const Literal& a, const Literal& b, Literal& out, F f) {
  const auto* x = reinterpret_cast<const uint16_t*>(a.data());
  const auto* z = reinterpret_cast<const uint16_t*>(b.data());
  auto* y = reinterpret_cast<uint16_t*>(out.data());
  const vmath::BulkKernels& bulk = vmath::Bulk();
  ParallelRange(ctx, out.num_elements(), [&](int64_t lo, int64_t hi) {
    constexpr int64_t kBlock = 512;
    float xa[kBlock], xb[kBlock];
    for (int64_t i = lo; i < hi; i += kBlock) {
      const int64_t m = std::min(kBlock, hi - i);
      bulk.bf16_to_f32(x + i, xa, m);
      bulk.bf16_to_f32(z + i, xb, m);
      for (int64_t k = 0; k < m; ++k) xa[k] = f(xa[k], xb[k]);
      bulk.f32_to_bf16(xa, y + i, m);
    }
  });
}

// Eval of a binary op with scalar function f(a, b) on compute types.
template <unsigned Kinds, typename F>
EvalFn BinaryEval(F f) {
  return [f](const Operation& op, std::span<const Literal> in, std::vector<Literal>& out,
             EvalContext& ctx) -> Status {
    return DispatchElementType(in[0].element_type(), [&]<typename T>() -> Status {
      if constexpr (std::is_same_v<T, bf16> && (Kinds & kFloatK) != 0) {
        ReuseDeadOperand(in, out, ctx);
        Bf16Map2(ctx, in[0], in[1], out[0], f);
        return OkStatus();
      } else if constexpr ((KindOf<T>() & Kinds) != 0) {
        ReuseDeadOperand(in, out, ctx);
        Map2<T, T, T>(ctx, in[0], in[1], out[0],
                      [&](T a, T b) { return Down<T>(f(Up(a), Up(b))); });
        return OkStatus();
      } else {
        return UnsupportedElementType(op, in[0].element_type());
      }
    });
  };
}

// The area's file-local registration helpers, called by RegisterElementwiseOps.
void RegisterElementwiseMathOps(OpRegistry& r);
void RegisterElementwiseArithmeticOps(OpRegistry& r);
void RegisterElementwiseBitwiseOps(OpRegistry& r);
void RegisterElementwiseCompareOps(OpRegistry& r);
void RegisterElementwiseConvertOps(OpRegistry& r);
void RegisterChloOps(OpRegistry& r);

}  // namespace tlaloc::ops::ew
