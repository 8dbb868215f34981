// Element types of Tlaloc's tensors: exactly the StableHLO ones the project supports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tlaloc/support/half.h"

namespace tlaloc {

enum class ElementType : uint8_t {
  kPred,
  kS8,
  kS16,
  kS32,
  kS64,
  kU8,
  kU16,
  kU32,
  kU64,
  kF16,
  kBF16,
  kF32,
  kF64,
};

inline constexpr ElementType kAllElementTypes[] = {
    ElementType::kPred, ElementType::kS8,  ElementType::kS16, ElementType::kS32,
    ElementType::kS64,  ElementType::kU8,  ElementType::kU16, ElementType::kU32,
    ElementType::kU64,  ElementType::kF16, ElementType::kBF16, ElementType::kF32,
    ElementType::kF64};

// Size of one element in bytes (pred is stored as one byte, 0 or 1).
int ElementSize(ElementType t);
bool IsFloat(ElementType t);
bool IsSignedInt(ElementType t);
bool IsUnsignedInt(ElementType t);
inline bool IsInteger(ElementType t) { return IsSignedInt(t) || IsUnsignedInt(t); }
// Bit width of the value (pred: 1).
int BitWidth(ElementType t);

// The MLIR spelling: i1, i8, ui8, f16, bf16, f32, ...
std::string_view MlirName(ElementType t);
std::optional<ElementType> ElementTypeFromMlirName(std::string_view name);
// Short names used in the CLI and tests: pred, s8, u8, f16, bf16, f32, ...
std::string_view ShortName(ElementType t);
std::optional<ElementType> ElementTypeFromShortName(std::string_view name);

// C++ storage type of an element type.
template <ElementType T> struct NativeTypeOf;
template <> struct NativeTypeOf<ElementType::kPred> { using type = bool; };
template <> struct NativeTypeOf<ElementType::kS8> { using type = int8_t; };
template <> struct NativeTypeOf<ElementType::kS16> { using type = int16_t; };
template <> struct NativeTypeOf<ElementType::kS32> { using type = int32_t; };
template <> struct NativeTypeOf<ElementType::kS64> { using type = int64_t; };
template <> struct NativeTypeOf<ElementType::kU8> { using type = uint8_t; };
template <> struct NativeTypeOf<ElementType::kU16> { using type = uint16_t; };
template <> struct NativeTypeOf<ElementType::kU32> { using type = uint32_t; };
template <> struct NativeTypeOf<ElementType::kU64> { using type = uint64_t; };
template <> struct NativeTypeOf<ElementType::kF16> { using type = f16; };
template <> struct NativeTypeOf<ElementType::kBF16> { using type = bf16; };
template <> struct NativeTypeOf<ElementType::kF32> { using type = float; };
template <> struct NativeTypeOf<ElementType::kF64> { using type = double; };
template <ElementType T> using NativeType = typename NativeTypeOf<T>::type;

template <typename T> struct ElementTypeOfNative;
template <> struct ElementTypeOfNative<bool> { static constexpr ElementType value = ElementType::kPred; };
template <> struct ElementTypeOfNative<int8_t> { static constexpr ElementType value = ElementType::kS8; };
template <> struct ElementTypeOfNative<int16_t> { static constexpr ElementType value = ElementType::kS16; };
template <> struct ElementTypeOfNative<int32_t> { static constexpr ElementType value = ElementType::kS32; };
template <> struct ElementTypeOfNative<int64_t> { static constexpr ElementType value = ElementType::kS64; };
template <> struct ElementTypeOfNative<uint8_t> { static constexpr ElementType value = ElementType::kU8; };
template <> struct ElementTypeOfNative<uint16_t> { static constexpr ElementType value = ElementType::kU16; };
template <> struct ElementTypeOfNative<uint32_t> { static constexpr ElementType value = ElementType::kU32; };
template <> struct ElementTypeOfNative<uint64_t> { static constexpr ElementType value = ElementType::kU64; };
template <> struct ElementTypeOfNative<f16> { static constexpr ElementType value = ElementType::kF16; };
template <> struct ElementTypeOfNative<bf16> { static constexpr ElementType value = ElementType::kBF16; };
template <> struct ElementTypeOfNative<float> { static constexpr ElementType value = ElementType::kF32; };
template <> struct ElementTypeOfNative<double> { static constexpr ElementType value = ElementType::kF64; };

// Calls fn.template operator()<NativeType>() for the element type `t`:
//   DispatchElementType(t, [&]<typename T>() { ... });
template <typename Fn>
decltype(auto) DispatchElementType(ElementType t, Fn&& fn) {
  switch (t) {
    case ElementType::kPred: return fn.template operator()<bool>();
    case ElementType::kS8: return fn.template operator()<int8_t>();
    case ElementType::kS16: return fn.template operator()<int16_t>();
    case ElementType::kS32: return fn.template operator()<int32_t>();
    case ElementType::kS64: return fn.template operator()<int64_t>();
    case ElementType::kU8: return fn.template operator()<uint8_t>();
    case ElementType::kU16: return fn.template operator()<uint16_t>();
    case ElementType::kU32: return fn.template operator()<uint32_t>();
    case ElementType::kU64: return fn.template operator()<uint64_t>();
    case ElementType::kF16: return fn.template operator()<f16>();
    case ElementType::kBF16: return fn.template operator()<bf16>();
    case ElementType::kF32: return fn.template operator()<float>();
    case ElementType::kF64: return fn.template operator()<double>();
  }
  return fn.template operator()<float>();
}

template <typename T> inline constexpr bool kIsHalfLike = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;
template <typename T> inline constexpr bool kIsFloatLike = kIsHalfLike<T> || std::is_floating_point_v<T>;

// Value conversions used by the interpreter and literals: half types go through float.
template <typename T>
inline double ToDouble(T v) {
  if constexpr (kIsHalfLike<T>) return static_cast<double>(v.f());
  else return static_cast<double>(v);
}
template <typename T>
inline T FromDouble(double d) {
  if constexpr (std::is_same_v<T, f16>) return f16::FromBits(DoubleToHalfBits(d));
  else if constexpr (std::is_same_v<T, bf16>) return bf16::FromBits(DoubleToBf16Bits(d));
  else return static_cast<T>(d);
}

}  // namespace tlaloc
