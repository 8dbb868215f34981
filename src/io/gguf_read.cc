// GGUF reader: a bounds-checked cursor over the image; every count is checked against the bytes
// left before anything is allocated for it, so a corrupt file yields an error, never a crash.
#include <cstring>
#include <set>

#include "tlaloc/io/gguf.h"
#include "tlaloc/support/checked_math.h"
#include "tlaloc/support/half.h"

namespace tlaloc::io {

namespace {

// ggml allows at most 4 dims; the version 2 and 3 layouts are the same.
constexpr uint32_t kMaxDims = 4;

class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, std::string_view source)
      : bytes_(bytes), source_(source) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return bytes_.size() - pos_; }

  Status Error(const std::string& what) const {
    return InvalidArgument(std::string(source_) + ": " + what + " (at byte " +
                           std::to_string(pos_) + ")");
  }

  template <typename T>
  Status Get(T* out, std::string_view what) {
    if (left() < sizeof(T)) return Error("file ends inside " + std::string(what));
    std::memcpy(out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return OkStatus();
  }

  Status GetString(std::string* out, std::string_view what) {
    uint64_t n = 0;
    TL_RETURN_IF_ERROR(Get(&n, what));
    if (n > left())
      return Error(std::string(what) + " claims " + std::to_string(n) + " bytes but only " +
                   std::to_string(left()) + " remain");
    out->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return OkStatus();
  }

 private:
  std::span<const std::byte> bytes_;
  std::string_view source_;
  uint64_t pos_ = 0;
};

// Smallest encoded size of one value of `type`, used to reject impossible array counts.
uint64_t MinEncodedSize(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    default:
      return 8;
  }
}

bool KnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

Status GetScalar(Cursor& c, GgufType type, GgufValue* v, const std::string& what) {
  switch (type) {
    case GgufType::kUint8: {
      uint8_t x;
      TL_RETURN_IF_ERROR(c.Get(&x, what));
      v->integer = x;
      return OkStatus();
    }
    case GgufType::kInt8: {
      int8_t x;
      TL_RETURN_IF_ERROR(c.Get(&x, what));
      v->integer = x;
      return OkStatus();
    }
    case GgufType::kUint16: {
      uint16_t x;
      TL_RETURN_IF_ERROR(c.Get(&x, what));
      v->integer = x;
      return OkStatus();
    }
    case GgufType::kInt16: {
      int16_t x;
      TL_RETURN_IF_ERROR(c.Get(&x, what));
      v->integer = x;
      return OkStatus();
    }
    case GgufType::kUint32: {
      uint32_t x;
      TL_RETURN_IF_ERROR(c.Get(&x, what));
      v->integer = x;
      return OkStatus();
    }
    case GgufType::kInt32: {
      int32_t x;
      TL_RETURN_IF_ERROR(c.Get(&x, what));
      v->integer = x;
      return OkStatus();
    }
    case GgufType::kUint64: {
      uint64_t x;
      TL_RETURN_IF_ERROR(c.Get(&x, what));
      v->integer = static_cast<int64_t>(x);
      return OkStatus();
    }
    case GgufType::kInt64:
      return c.Get(&v->integer, what);
    case GgufType::kFloat32: {
      float x;
      TL_RETURN_IF_ERROR(c.Get(&x, what));
      v->real = x;
      return OkStatus();
    }
    case GgufType::kFloat64:
      return c.Get(&v->real, what);
    case GgufType::kBool: {
      uint8_t x;
      TL_RETURN_IF_ERROR(c.Get(&x, what));
      if (x > 1) return c.Error(what + " is a bool of value " + std::to_string(x));
      v->integer = x;
      return OkStatus();
    }
    case GgufType::kString:
      return c.GetString(&v->text, what);
    case GgufType::kArray:
      break;
  }
  return c.Error(what + ": unexpected array");
}

Status GetValue(Cursor& c, GgufValue* v, const std::string& key) {
  uint32_t type = 0;
  const std::string what = "the value of \"" + key + "\"";
  TL_RETURN_IF_ERROR(c.Get(&type, what));
  if (!KnownType(type)) return c.Error(what + " has unknown type " + std::to_string(type));
  v->type = static_cast<GgufType>(type);
  if (!v->is_array()) return GetScalar(c, v->type, v, what);
  uint32_t elem = 0;
  uint64_t n = 0;
  TL_RETURN_IF_ERROR(c.Get(&elem, what));
  if (!KnownType(elem))
    return c.Error(what + " is an array of unknown type " + std::to_string(elem));
  if (elem == static_cast<uint32_t>(GgufType::kArray))
    return c.Error(what + " is an array of arrays, which Tlaloc does not read");
  v->array_type = static_cast<GgufType>(elem);
  TL_RETURN_IF_ERROR(c.Get(&n, what));
  if (n > c.left() / MinEncodedSize(v->array_type))
    return c.Error(what + " claims " + std::to_string(n) + " elements, more than the file holds");
  GgufValue element;
  for (uint64_t i = 0; i < n; ++i) {
    TL_RETURN_IF_ERROR(GetScalar(c, v->array_type, &element, what));
    if (v->array_type == GgufType::kString)
      v->texts.push_back(std::move(element.text));
    else if (v->array_type == GgufType::kFloat32 || v->array_type == GgufType::kFloat64)
      v->reals.push_back(element.real);
    else
      v->integers.push_back(element.integer);
  }
  return OkStatus();
}

}  // namespace

StatusOr<GgufContents> ParseGguf(std::span<const std::byte> bytes, std::string_view source) {
  Cursor c(bytes, source);
  GgufContents out;
  uint32_t magic = 0;
  TL_RETURN_IF_ERROR(c.Get(&magic, "the magic number"));
  if (magic != 0x46554747) return c.Error("not a GGUF file (expected the magic \"GGUF\")");
  TL_RETURN_IF_ERROR(c.Get(&out.version, "the version"));
  if (out.version != 2 && out.version != 3)
    return c.Error("GGUF version " + std::to_string(out.version) + " (expected 2 or 3)");
  uint64_t n_tensors = 0, n_kv = 0;
  TL_RETURN_IF_ERROR(c.Get(&n_tensors, "the tensor count"));
  TL_RETURN_IF_ERROR(c.Get(&n_kv, "the metadata count"));
  // Each key/value takes at least 13 bytes, each tensor info at least 24.
  if (n_kv > c.left() / 13 || n_tensors > c.left() / 24)
    return c.Error("header claims " + std::to_string(n_kv) + " keys and " +
                   std::to_string(n_tensors) + " tensors, more than the file holds");

  std::set<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    GgufKeyValue kv;
    TL_RETURN_IF_ERROR(c.GetString(&kv.key, "a metadata key"));
    if (!keys.insert(kv.key).second) return c.Error("metadata key \"" + kv.key + "\" repeated");
    TL_RETURN_IF_ERROR(GetValue(c, &kv.value, kv.key));
    out.metadata.push_back(std::move(kv));
  }
  if (const GgufValue* a = out.Find("general.alignment")) {
    if (a->type != GgufType::kUint32 || a->integer <= 0 || (a->integer & (a->integer - 1)) != 0)
      return c.Error("general.alignment must be a uint32 power of two");
    out.alignment = static_cast<uint32_t>(a->integer);
  }

  std::set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    TL_RETURN_IF_ERROR(c.GetString(&t.name, "a tensor name"));
    if (!names.insert(t.name).second) return c.Error("tensor \"" + t.name + "\" repeated");
    const std::string what = "tensor \"" + t.name + "\"";
    uint32_t n_dims = 0, type = 0;
    TL_RETURN_IF_ERROR(c.Get(&n_dims, what));
    if (n_dims == 0 || n_dims > kMaxDims)
      return c.Error(what + " has " + std::to_string(n_dims) + " dims (expected 1 to 4)");
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      TL_RETURN_IF_ERROR(c.Get(&ne, what));
      if (ne > (uint64_t{1} << 40) || (ne != 0 && elements > (uint64_t{1} << 60) / ne))
        return c.Error(what + " is impossibly large");
      elements *= ne;
      t.ne.push_back(ne);
    }
    TL_RETURN_IF_ERROR(c.Get(&type, what));
    if (!IsKnownGgmlType(type))
      return c.Error(what + " has ggml type " + GgmlTypeNumberName(type) + " (" +
                     std::to_string(type) +
                     "); Tlaloc reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K "
                     "and Q6_K");
    t.type = static_cast<GgmlType>(type);
    if (const int64_t block = GgmlBlockElements(t.type);
        t.ne[0] % static_cast<uint64_t>(block) != 0)
      return c.Error(what + " is " + std::string(GgmlTypeName(t.type)) + " with rows of " +
                     std::to_string(t.ne[0]) + " elements (expected a multiple of " +
                     std::to_string(block) + ")");
    // The running product above is 0 after a zero dim, which hides an overflowing product of
    // the others; the int64 shape code downstream multiplies them in other orders (found by
    // gguf_fuzz).
    if (Status s = CheckShape(t.dims(), ElementTypeOf(t.type)); !s.ok())
      return c.Error(what + ": " + s.message());
    TL_RETURN_IF_ERROR(c.Get(&t.offset, what));
    if (t.offset % out.alignment != 0)
      return c.Error(what + " starts at offset " + std::to_string(t.offset) +
                     ", not a multiple of the alignment " + std::to_string(out.alignment));
    t.byte_size = GgmlBytes(t.type, static_cast<int64_t>(elements));
    out.tensors.push_back(std::move(t));
  }
  out.data_offset = (c.pos() + out.alignment - 1) / out.alignment * out.alignment;
  if (out.data_offset > bytes.size() && !out.tensors.empty())
    return c.Error("file ends before the tensor data");
  const uint64_t data_size = out.data_offset <= bytes.size() ? bytes.size() - out.data_offset : 0;
  for (const auto& t : out.tensors) {
    if (t.offset > data_size || t.byte_size > data_size - t.offset)
      return InvalidArgument(std::string(source) + ": tensor \"" + t.name + "\" (" +
                             std::to_string(t.byte_size) + " bytes at data offset " +
                             std::to_string(t.offset) + ") lies past the end of the file");
  }
  return out;
}

StatusOr<Literal> ReadGgufTensor(std::span<const std::byte> bytes, const GgufContents& contents,
                                 const GgufTensorInfo& info) {
  // Checked: info may not come from ParseGguf, and a wrapped sum would pass the bound.
  uint64_t begin = 0, end = 0;
  if (!CheckedAdd(contents.data_offset, info.offset, &begin) ||
      !CheckedAdd(begin, info.byte_size, &end) || end > bytes.size())
    return InvalidArgument("GGUF tensor \"" + info.name + "\" lies past the end of the buffer");
  if (Status s = CheckShape(info.dims(), ElementTypeOf(info.type)); !s.ok())
    return InvalidArgument("GGUF tensor \"" + info.name + "\": " + s.message());
  Literal out(TensorType(ElementTypeOf(info.type), info.dims()));
  if (IsQuantized(info.type)) {
    if (GgmlBytes(info.type, out.num_elements()) != info.byte_size)
      return Internal("GGUF tensor \"" + info.name + "\": size mismatch");
    Status s =
        DequantizeGgml(info.type, bytes.subspan(contents.data_offset + info.offset, info.byte_size),
                       out.span<float>());
    if (!s.ok()) return s.WithContext("GGUF tensor \"" + info.name + "\"");
    return out;
  }
  if (static_cast<uint64_t>(out.byte_size()) != info.byte_size)
    return Internal("GGUF tensor \"" + info.name + "\": size mismatch");
  if (info.byte_size > 0)
    std::memcpy(out.data(), bytes.data() + contents.data_offset + info.offset, info.byte_size);
  return out;
}

}  // namespace tlaloc::io
