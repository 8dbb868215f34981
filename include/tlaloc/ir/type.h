// Static tensor types (and the token type side-effecting ops thread through).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tlaloc/ir/element_type.h"

namespace tlaloc {

struct TensorType {
  ElementType element_type = ElementType::kF32;
  std::vector<int64_t> dims;

  TensorType() = default;
  TensorType(ElementType et, std::vector<int64_t> d) : element_type(et), dims(std::move(d)) {}

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t num_elements() const;
  int64_t byte_size() const { return num_elements() * ElementSize(element_type); }
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
// Product of dims, 1 for a scalar.
int64_t NumElements(const std::vector<int64_t>& dims);
// "2x3" style, "" for a scalar.
std::string DimsToString(const std::vector<int64_t>& dims);

}  // namespace tlaloc
