// Literal: a host tensor value (type + bytes). Used for dense constants in the IR, for the
// interpreter's buffers, and for inputs/outputs at the API boundary. Storage is shared and
// may be external (for example a memory-mapped checkpoint), so views cost no copy.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/ir/type.h"
#include "tlaloc/support/status.h"

namespace tlaloc {

class Literal {
 public:
  Literal() = default;
  // Zero-initialised tensor of `type`.
  explicit Literal(TensorType type);
  // A tensor of `type` whose elements are unspecified until written: for results that are
  // about to be overwritten whole, skipping the zero-fill (storage may be a reused block).
  static Literal Uninitialized(TensorType type);
  // A view of external memory kept alive by `owner`; no copy.
  static Literal View(TensorType type, std::byte* data, std::shared_ptr<void> owner);
  // A type with no storage (valid() is false): the slot of a result that its op replaces whole
  // (a view, the callee's values), so nothing is allocated for it.
  static Literal TypeOnly(TensorType type);

  template <typename T>
  static Literal FromVector(std::vector<int64_t> dims, const std::vector<T>& values) {
    Literal l(TensorType(ElementTypeOfNative<T>::value, std::move(dims)));
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < values.size() && i < static_cast<size_t>(l.num_elements()); ++i)
        l.data()[i] = static_cast<std::byte>(values[i] ? 1 : 0);
    } else if (!values.empty()) {  // an empty vector's data() may be null, which memcpy forbids
      std::memcpy(l.data(), values.data(),
                  std::min(values.size() * sizeof(T), static_cast<size_t>(l.byte_size())));
    }
    return l;
  }
  template <typename T>
  static Literal Scalar(T value) {
    return FromVector<T>({}, std::vector<T>{value});
  }
  // Element values given as doubles, converted (rounded) to `et`.
  static Literal FromDoubles(ElementType et, std::vector<int64_t> dims,
                             const std::vector<double>& values);

  const TensorType& type() const { return type_; }
  ElementType element_type() const { return type_.element_type; }
  const std::vector<int64_t>& dims() const { return type_.dims; }
  int64_t num_elements() const { return type_.num_elements(); }
  int64_t byte_size() const { return type_.byte_size(); }
  bool valid() const { return data_ != nullptr; }

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  template <typename T>
  std::span<T> span() {
    return {reinterpret_cast<T*>(data_.get()), static_cast<size_t>(num_elements())};
  }
  template <typename T>
  std::span<const T> span() const {
    return {reinterpret_cast<const T*>(data_.get()), static_cast<size_t>(num_elements())};
  }
  // Element i as a double (pred: 0/1).
  double GetAsDouble(int64_t i) const;
  void SetFromDouble(int64_t i, double v);
  // Element i as int64 (integers sign- or zero-extended; floats truncated).
  int64_t GetAsInt64(int64_t i) const;

  // A deep copy with its own storage.
  Literal Clone() const;
  // Same bytes viewed with other dims (same element count); shares storage.
  StatusOr<Literal> Reshaped(std::vector<int64_t> dims) const;
  // True when no other Literal shares this storage (safe to update in place).
  bool HasUniqueStorage() const { return data_.use_count() == 1; }
  const std::shared_ptr<std::byte>& storage() const { return data_; }

  // Bitwise equality of type and bytes.
  bool BitwiseEquals(const Literal& other) const;
  // "tensor<2xf32> [1, 2]" with at most `max_elements` shown.
  std::string ToString(int64_t max_elements = 64) const;

 private:
  TensorType type_;
  std::shared_ptr<std::byte> data_;
};

// `x` in element type `to` (itself when already of that type): f32 <-> bf16 / f16 directly
// (round to nearest even), other pairs through double.
Literal ConvertElementType(const Literal& x, ElementType to);

// Formats one element the way the printer and ToString do (shortest round-trip for floats).
std::string FormatElement(const Literal& l, int64_t i);

}  // namespace tlaloc
