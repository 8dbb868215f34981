#include "tlaloc/ir/literal.h"

#include <charconv>
#include <cmath>

#include "tlaloc/support/buffer_cache.h"
#include "tlaloc/support/half.h"

namespace tlaloc {

// Storage is 64-byte aligned so BLAS and vector loops see aligned rows.
Literal::Literal(TensorType type)
    : type_(std::move(type)), data_(AllocateTensorStorage(type_.byte_size(), /*zeroed=*/true)) {}

Literal Literal::Uninitialized(TensorType type) {
  Literal l;
  l.type_ = std::move(type);
  l.data_ = AllocateTensorStorage(l.type_.byte_size(), /*zeroed=*/false);
  return l;
}

Literal Literal::TypeOnly(TensorType type) {
  Literal l;
  l.type_ = std::move(type);
  return l;
}

Literal Literal::View(TensorType type, std::byte* data, std::shared_ptr<void> owner) {
  Literal l;
  l.type_ = std::move(type);
  l.data_ = std::shared_ptr<std::byte>(std::move(owner), data);
  return l;
}

Literal Literal::FromDoubles(ElementType et, std::vector<int64_t> dims,
                             const std::vector<double>& values) {
  Literal l(TensorType(et, std::move(dims)));
  int64_t n = std::min<int64_t>(l.num_elements(), static_cast<int64_t>(values.size()));
  for (int64_t i = 0; i < n; ++i) l.SetFromDouble(i, values[i]);
  return l;
}

double Literal::GetAsDouble(int64_t i) const {
  return DispatchElementType(element_type(),
                             [&]<typename T>() -> double { return ToDouble(span<T>()[i]); });
}

void Literal::SetFromDouble(int64_t i, double v) {
  DispatchElementType(element_type(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>)
      span<T>()[i] = v != 0;
    else if constexpr (std::is_integral_v<T>)
      span<T>()[i] = static_cast<T>(static_cast<int64_t>(v));
    else
      span<T>()[i] = FromDouble<T>(v);
  });
}

int64_t Literal::GetAsInt64(int64_t i) const {
  return DispatchElementType(element_type(), [&]<typename T>() -> int64_t {
    if constexpr (kIsFloatLike<T>)
      return static_cast<int64_t>(ToDouble(span<T>()[i]));
    else
      return static_cast<int64_t>(span<T>()[i]);
  });
}

Literal Literal::Clone() const {
  Literal l = data_ ? Uninitialized(type_) : Literal(type_);
  if (data_) std::memcpy(l.data(), data(), static_cast<size_t>(byte_size()));
  return l;
}

StatusOr<Literal> Literal::Reshaped(std::vector<int64_t> dims) const {
  if (NumElements(dims) != num_elements())
    return InvalidArgument("cannot view " + type_.ToString() + " with shape [" +
                           DimsToString(dims) + "]: element counts differ");
  Literal l = *this;
  l.type_.dims = std::move(dims);
  return l;
}

bool Literal::BitwiseEquals(const Literal& other) const {
  if (!(type_ == other.type_)) return false;
  return std::memcmp(data(), other.data(), static_cast<size_t>(byte_size())) == 0;
}

std::string FormatElement(const Literal& l, int64_t i) {
  return DispatchElementType(l.element_type(), [&]<typename T>() -> std::string {
    T v = l.span<T>()[i];
    if constexpr (std::is_same_v<T, bool>) {
      return v ? "true" : "false";
    } else if constexpr (std::is_integral_v<T>) {
      return std::to_string(v);
    } else {
      char buf[64];
      std::to_chars_result r;
      if constexpr (kIsHalfLike<T>) {
        float f = v.f();
        if (std::isnan(f)) return "nan";
        r = std::to_chars(buf, buf + sizeof(buf), f);
      } else {
        if (std::isnan(v)) return "nan";
        r = std::to_chars(buf, buf + sizeof(buf), v);
      }
      return std::string(buf, r.ptr);
    }
  });
}

std::string Literal::ToString(int64_t max_elements) const {
  std::string s = type_.ToString() + " [";
  int64_t n = num_elements();
  for (int64_t i = 0; i < n && i < max_elements; ++i) {
    if (i) s += ", ";
    s += FormatElement(*this, i);
  }
  if (n > max_elements) s += ", ...";
  return s + "]";
}

Literal ConvertElementType(const Literal& x, ElementType to) {
  if (x.element_type() == to) return x;
  Literal out = Literal::Uninitialized(TensorType(to, x.dims()));
  const int64_t n = x.num_elements();
  const ElementType from = x.element_type();
  if (from == ElementType::kF32 && to == ElementType::kBF16) {
    auto src = x.span<float>();
    auto dst = out.span<uint16_t>();
    for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBf16Bits(src[i]);
  } else if (from == ElementType::kBF16 && to == ElementType::kF32) {
    auto src = x.span<uint16_t>();
    auto dst = out.span<float>();
    for (int64_t i = 0; i < n; ++i) dst[i] = Bf16BitsToFloat(src[i]);
  } else if (from == ElementType::kF32 && to == ElementType::kF16) {
    auto src = x.span<float>();
    auto dst = out.span<uint16_t>();
    for (int64_t i = 0; i < n; ++i) dst[i] = FloatToHalfBits(src[i]);
  } else if (from == ElementType::kF16 && to == ElementType::kF32) {
    auto src = x.span<uint16_t>();
    auto dst = out.span<float>();
    for (int64_t i = 0; i < n; ++i) dst[i] = HalfBitsToFloat(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out.SetFromDouble(i, x.GetAsDouble(i));
  }
  return out;
}

}  // namespace tlaloc
