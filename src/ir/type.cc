#include "tlaloc/ir/type.h"

namespace tlaloc {

int64_t NumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t TensorType::num_elements() const { return NumElements(dims); }

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
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
    case Kind::kTensor: return tensor.ToString();
    case Kind::kToken: return "!stablehlo.token";
    case Kind::kTuple: {
      std::string s = "tuple<";
      for (size_t i = 0; i < tuple.size(); ++i) s += (i ? ", " : "") + tuple[i].ToString();
      return s + ">";
    }
  }
  return "?";
}

}  // namespace tlaloc
