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
    case GgmlType::kQ4_0:
      return "Q4_0";
    case GgmlType::kQ4_1:
      return "Q4_1";
    case GgmlType::kQ5_0:
      return "Q5_0";
    case GgmlType::kQ5_1:
      return "Q5_1";
    case GgmlType::kQ8_0:
      return "Q8_0";
    case GgmlType::kQ4_K:
      return "Q4_K";
    case GgmlType::kQ5_K:
      return "Q5_K";
    case GgmlType::kQ6_K:
      return "Q6_K";
  }
  return "unknown";
}

bool IsKnownGgmlType(uint32_t t) {
  switch (static_cast<GgmlType>(t)) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return true;
  }
  return false;
}

std::string GgmlTypeNumberName(uint32_t t) {
  if (IsKnownGgmlType(t)) return std::string(GgmlTypeName(static_cast<GgmlType>(t)));
  // ggml.h's enum ggml_type for the types Tlaloc does not read.
  static constexpr std::pair<uint32_t, const char*> kOthers[] = {
      {9, "Q8_1"},    {10, "Q2_K"},    {11, "Q3_K"},  {15, "Q8_K"},   {16, "IQ2_XXS"},
      {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"}, {20, "IQ4_NL"}, {21, "IQ3_S"},
      {22, "IQ2_S"},  {23, "IQ4_XS"},  {24, "I8"},    {25, "I16"},    {26, "I32"},
      {27, "I64"},    {28, "F64"},     {29, "IQ1_M"}, {34, "TQ1_0"},  {35, "TQ2_0"},
      {39, "MXFP4"}};
  for (const auto& [number, name] : kOthers)
    if (number == t) return name;
  return "type " + std::to_string(t);
}

// The ggml types Tlaloc stores (ir/quant_format.h's table), or nullptr: the other quantised
// types are only read (dequantised), so their blocks are known here alone.
namespace {
const QuantFormatInfo* StoredFormat(GgmlType t) {
  for (const QuantFormatInfo& f : kQuantFormats)
    if (f.ggml_type == static_cast<uint32_t>(t)) return &f;
  return nullptr;
}
}  // namespace

int64_t GgmlBlockElements(GgmlType t) {
  if (const QuantFormatInfo* f = StoredFormat(t)) return f->block;
  switch (t) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return 1;
    case GgmlType::kQ5_K:
      return kKQuantBlockElements;
    default:
      return 32;
  }
}

int64_t GgmlBlockBytes(GgmlType t) {
  if (const QuantFormatInfo* f = StoredFormat(t)) return f->ggml_block_bytes;
  switch (t) {
    case GgmlType::kF32:
      return 4;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return 2;
    case GgmlType::kQ4_1:
      return 20;  // f16 d, f16 m, 16 bytes of nibbles
    case GgmlType::kQ5_0:
      return 22;  // f16 d, 4 bytes of fifth bits, 16 bytes of nibbles
    case GgmlType::kQ5_1:
      return 24;  // f16 d, f16 m, 4 + 16 bytes
    case GgmlType::kQ5_K:
      return 176;  // as Q4_K (144 bytes) plus 32 bytes of fifth bits
    default:
      break;
  }
  return 1;
}

uint64_t GgmlBytes(GgmlType t, int64_t elements) {
  return static_cast<uint64_t>(elements / GgmlBlockElements(t) * GgmlBlockBytes(t));
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
    default:  // F32, and the quantized types, read back dequantised
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
