// Static tensor types (and the token type side-effecting ops thread through).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tlaloc/ir/element_type.h"
#include "tlaloc/support/status.h"

namespace tlaloc {

struct TensorType {
  ElementType element_type = ElementType::kF32;
  std::vector<int64_t> dims;

  TensorType() = default;
  TensorType(ElementType et, std::vector<int64_t> d) : element_type(et), dims(std::move(d)) {}

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t num_elements() const;
  // Both abort on int64 overflow: shapes from input are checked with CheckShape first.
  int64_t byte_size() const;
  // "tensor<2x3xf32>"
  std::string ToString() const;
  bool operator==(const TensorType&) const = default;
};

// A value's type: a tensor, a !stablehlo.token, or a tuple of types.
struct Type {
  enum class Kind : uint8_t { kTensor, kToken, kTuple };
  Kind kind = Kind::kTensor;
  TensorType tensor;
  std::vector<Type> tuple;

  Type() = default;
  Type(TensorType t) : tensor(std::move(t)) {}  // NOLINT: a tensor type is a type
  static Type Token() {
    Type t;
    t.kind = Kind::kToken;
    return t;
  }
  static Type Tuple(std::vector<Type> elements) {
    Type t;
    t.kind = Kind::kTuple;
    t.tuple = std::move(elements);
    return t;
  }
  bool is_tensor() const { return kind == Kind::kTensor; }
  bool is_token() const { return kind == Kind::kToken; }
  std::string ToString() const;
  bool operator==(const Type&) const = default;
};

// Row-major strides (in elements) of a shape.
std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims);
// Product of dims, 1 for a scalar. Aborts (rather than overflow, which is undefined) when the
// product does not fit in int64; parsers reject such shapes earlier with CheckShape.
int64_t NumElements(const std::vector<int64_t>& dims);
// Whether every dim is non-negative and the product of the non-zero dims times element_size fits
// in int64. Checking the non-zero dims makes every partial product (element counts in any order,
// strides, byte sizes) fit too, even when a zero dim makes the total 0.
bool ShapeFits(const std::vector<int64_t>& dims, int64_t element_size = 1);
// OK, or InvalidArgument("shape AxB of f32 overflows 64-bit element or byte counts") when
// !ShapeFits(dims, ElementSize(et)). For every shape that comes from outside input.
Status CheckShape(const std::vector<int64_t>& dims, ElementType et);
// "2x3" style, "" for a scalar.
std::string DimsToString(const std::vector<int64_t>& dims);

}  // namespace tlaloc
