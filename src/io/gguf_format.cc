// GGUF type names, value constructors and the ggml <-> Tlaloc element type mapping, shared by the
// reader and the writer.
#include "tlaloc/io/gguf.h"

namespace tlaloc::io {

std::string_view GgufTypeName(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
      return "uint8";
    case GgufType::kInt8:
      return "int8";
    case GgufType::kUint16:
      return "uint16";
    case GgufType::kInt16:
      return "int16";
    case GgufType::kUint32:
      return "uint32";
    case GgufType::kInt32:
      return "int32";
    case GgufType::kFloat32:
      return "float32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUint64:
      return "uint64";
    case GgufType::kInt64:
      return "int64";
    case GgufType::kFloat64:
      return "float64";
  }
  return "unknown";
}

std::string_view GgmlTypeName(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return "F32";
    case GgmlType::kF16:
      return "F16";
    case GgmlType::kBF16:
      return "BF16";
    case GgmlType::kQ8_0:
      return "Q8_0";
  }
  return "unknown";
}

uint64_t GgmlBytes(GgmlType t, int64_t elements) {
  if (t == GgmlType::kQ8_0)
    return static_cast<uint64_t>(elements / kQ8_0BlockElements * kQ8_0BlockBytes);
  return static_cast<uint64_t>(elements) * (t == GgmlType::kF32 ? 4 : 2);
}

StatusOr<GgmlType> GgmlTypeFor(ElementType t) {
  switch (t) {
    case ElementType::kF32:
      return GgmlType::kF32;
    case ElementType::kF16:
      return GgmlType::kF16;
    case ElementType::kBF16:
      return GgmlType::kBF16;
    default:
      return InvalidArgument("GGUF: element type " + std::string(ShortName(t)) +
                             " has no ggml tensor type here (expected f32, f16 or bf16)");
  }
}

ElementType ElementTypeOf(GgmlType t) {
  switch (t) {
    case GgmlType::kF16:
      return ElementType::kF16;
    case GgmlType::kBF16:
      return ElementType::kBF16;
    case GgmlType::kQ8_0:  // read back dequantised
    case GgmlType::kF32:
      break;
  }
  return ElementType::kF32;
}

GgufValue GgufValue::U32(uint32_t v) {
  GgufValue x;
  x.type = GgufType::kUint32;
  x.integer = v;
  return x;
}

GgufValue GgufValue::I32(int32_t v) {
  GgufValue x;
  x.type = GgufType::kInt32;
  x.integer = v;
  return x;
}

GgufValue GgufValue::U64(uint64_t v) {
  GgufValue x;
  x.type = GgufType::kUint64;
  x.integer = static_cast<int64_t>(v);
  return x;
}

GgufValue GgufValue::F32(float v) {
  GgufValue x;
  x.type = GgufType::kFloat32;
  x.real = v;
  return x;
}

GgufValue GgufValue::Bool(bool v) {
  GgufValue x;
  x.type = GgufType::kBool;
  x.integer = v ? 1 : 0;
  return x;
}

GgufValue GgufValue::String(std::string v) {
  GgufValue x;
  x.type = GgufType::kString;
  x.text = std::move(v);
  return x;
}

GgufValue GgufValue::StringArray(std::vector<std::string> v) {
  GgufValue x;
  x.type = GgufType::kArray;
  x.array_type = GgufType::kString;
  x.texts = std::move(v);
  return x;
}

GgufValue GgufValue::I32Array(std::vector<int64_t> v) {
  GgufValue x;
  x.type = GgufType::kArray;
  x.array_type = GgufType::kInt32;
  x.integers = std::move(v);
  return x;
}

size_t GgufValue::array_size() const {
  if (!is_array()) return 0;
  if (array_type == GgufType::kString) return texts.size();
  if (array_type == GgufType::kFloat32 || array_type == GgufType::kFloat64) return reals.size();
  return integers.size();
}

std::vector<int64_t> GgufTensorInfo::dims() const {
  return std::vector<int64_t>(ne.rbegin(), ne.rend());
}

const GgufValue* GgufContents::Find(std::string_view key) const {
  for (const auto& kv : metadata)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

const GgufTensorInfo* GgufContents::FindTensor(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace tlaloc::io
