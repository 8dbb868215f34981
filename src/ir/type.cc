#include "tlaloc/ir/type.h"

#include <cstdio>
#include <cstdlib>

#include "tlaloc/support/checked_math.h"

namespace tlaloc {

namespace {

// An unchecked shape reached a size computation: a missing CheckShape at some input boundary.
// Dying loudly beats computing with a wrapped (undefined) product.
[[noreturn]] void ShapeOverflow(const std::vector<int64_t>& dims, const char* what) {
  std::fprintf(stderr, "tlaloc: %s of shape [%s] overflows int64\n", what,
               DimsToString(dims).c_str());
  std::abort();
}

}  // namespace

int64_t NumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (!CheckedMul(n, d, &n)) ShapeOverflow(dims, "element count");
  return n;
}

bool ShapeFits(const std::vector<int64_t>& dims, int64_t element_size) {
  if (element_size < 0) return false;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return false;
    if (d != 0 && !CheckedMul(n, d, &n)) return false;
  }
  // The count must fit on its own even for a 0-byte element type.
  return CheckedMul(n, element_size > 0 ? element_size : int64_t{1}, &n);
}

Status CheckShape(const std::vector<int64_t>& dims, ElementType et) {
  if (ShapeFits(dims, ElementSize(et))) return OkStatus();
  for (int64_t d : dims)
    if (d < 0) return InvalidArgument("shape " + DimsToString(dims) + " has a negative dimension");
  return InvalidArgument("shape " + DimsToString(dims) + " of " + std::string(MlirName(et)) +
                         " overflows 64-bit element or byte counts");
}

int64_t TensorType::num_elements() const { return NumElements(dims); }

int64_t TensorType::byte_size() const {
  int64_t bytes = 0;
  if (!CheckedMul(num_elements(), static_cast<int64_t>(ElementSize(element_type)), &bytes))
    ShapeOverflow(dims, "byte size");
  return bytes;
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    if (!CheckedMul(strides[i + 1], dims[i + 1], &strides[i])) ShapeOverflow(dims, "stride");
  return strides;
}

std::string DimsToString(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += "x";
    s += std::to_string(dims[i]);
  }
  return s;
}

std::string TensorType::ToString() const {
  std::string s = "tensor<";
  for (int64_t d : dims) s += std::to_string(d) + "x";
  s += MlirName(element_type);
  s += ">";
  return s;
}

std::string Type::ToString() const {
  switch (kind) {
    case Kind::kTensor:
      return tensor.ToString();
    case Kind::kToken:
      return "!stablehlo.token";
    case Kind::kTuple: {
      std::string s = "tuple<";
      for (size_t i = 0; i < tuple.size(); ++i) s += (i ? ", " : "") + tuple[i].ToString();
      return s + ">";
    }
  }
  return "?";
}

}  // namespace tlaloc
