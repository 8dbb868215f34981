// GGUF writer: the header, metadata and tensor infos are serialised into one buffer, then each
// tensor's data is streamed (converted to its ggml type chunk by chunk) at aligned offsets.
#include <cstring>
#include <set>

#include "io/io_util.h"
#include "tlaloc/io/gguf.h"

namespace tlaloc::io {

namespace {

constexpr std::string_view kAlignmentKey = "general.alignment";

class Bytes {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));  // little-endian hosts only, as ggml itself
  }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out_.insert(out_.end(), p, p + s.size());
  }
  void PadTo(uint64_t alignment) {
    while (out_.size() % alignment != 0) out_.push_back(std::byte{0});
  }
  std::vector<std::byte>& data() { return out_; }

 private:
  std::vector<std::byte> out_;
};

Status PutScalar(Bytes& b, GgufType type, const GgufValue& v, std::string_view key) {
  switch (type) {
    case GgufType::kUint8:
      b.Put<uint8_t>(static_cast<uint8_t>(v.integer));
      return OkStatus();
    case GgufType::kInt8:
      b.Put<int8_t>(static_cast<int8_t>(v.integer));
      return OkStatus();
    case GgufType::kUint16:
      b.Put<uint16_t>(static_cast<uint16_t>(v.integer));
      return OkStatus();
    case GgufType::kInt16:
      b.Put<int16_t>(static_cast<int16_t>(v.integer));
      return OkStatus();
    case GgufType::kUint32:
      b.Put<uint32_t>(static_cast<uint32_t>(v.integer));
      return OkStatus();
    case GgufType::kInt32:
      b.Put<int32_t>(static_cast<int32_t>(v.integer));
      return OkStatus();
    case GgufType::kUint64:
      b.Put<uint64_t>(static_cast<uint64_t>(v.integer));
      return OkStatus();
    case GgufType::kInt64:
      b.Put<int64_t>(v.integer);
      return OkStatus();
    case GgufType::kFloat32:
      b.Put<float>(static_cast<float>(v.real));
      return OkStatus();
    case GgufType::kFloat64:
      b.Put<double>(v.real);
      return OkStatus();
    case GgufType::kBool:
      b.Put<uint8_t>(v.integer != 0 ? 1 : 0);
      return OkStatus();
    case GgufType::kString:
      b.PutString(v.text);
      return OkStatus();
    case GgufType::kArray:
      break;
  }
  return InvalidArgument("GGUF writer: key \"" + std::string(key) + "\" has a value of type " +
                         std::to_string(static_cast<uint32_t>(type)) + " (expected a scalar type)");
}

Status PutValue(Bytes& b, const GgufValue& v, std::string_view key) {
  b.Put<uint32_t>(static_cast<uint32_t>(v.type));
  if (!v.is_array()) return PutScalar(b, v.type, v, key);
  if (v.array_type == GgufType::kArray)
    return InvalidArgument("GGUF writer: key \"" + std::string(key) +
                           "\" is an array of arrays, which Tlaloc does not write");
  b.Put<uint32_t>(static_cast<uint32_t>(v.array_type));
  b.Put<uint64_t>(v.array_size());
  GgufValue element;
  for (size_t i = 0; i < v.array_size(); ++i) {
    if (v.array_type == GgufType::kString) {
      b.PutString(v.texts[i]);
      continue;
    }
    if (v.array_type == GgufType::kFloat32 || v.array_type == GgufType::kFloat64)
      element.real = v.reals[i];
    else
      element.integer = v.integers[i];
    TL_RETURN_IF_ERROR(PutScalar(b, v.array_type, element, key));
  }
  return OkStatus();
}

// Streams `value` converted to `type` in chunks, so a large matrix never needs a second copy.
Status StreamTensor(const GgufTensorToWrite& t, const ByteSink& sink) {
  if (t.type == GgmlType::kQ8_0) {  // each block: its f16 scale, then its 32 int8 values
    const auto q = t.value.span<int8_t>();
    const auto d = t.q8_scales.span<uint16_t>();
    std::vector<std::byte> buf;
    const int64_t blocks = static_cast<int64_t>(d.size());
    constexpr int64_t kChunkBlocks = 2048;
    for (int64_t start = 0; start < blocks; start += kChunkBlocks) {
      const int64_t end = std::min(blocks, start + kChunkBlocks);
      buf.resize(static_cast<size_t>((end - start) * kQ8_0BlockBytes));
      for (int64_t b = start; b < end; ++b) {
        std::byte* dst = buf.data() + (b - start) * kQ8_0BlockBytes;
        std::memcpy(dst, &d[b], 2);
        std::memcpy(dst + 2, q.data() + b * kQ8_0BlockElements, kQ8_0BlockElements);
      }
      TL_RETURN_IF_ERROR(sink(buf));
    }
    return OkStatus();
  }
  const ElementType to = ElementTypeOf(t.type);
  const Literal& v = t.value;
  if (v.element_type() == to) return sink({v.data(), static_cast<size_t>(v.byte_size())});
  constexpr int64_t kChunk = 1 << 16;
  std::vector<std::byte> buf;
  const int64_t n = v.num_elements();
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t end = std::min(n, start + kChunk);
    buf.resize(static_cast<size_t>(GgmlBytes(t.type, end - start)));
    for (int64_t i = start; i < end; ++i) {
      // f32 -> f16/bf16 goes through float so it rounds once, to nearest even.
      const float f = v.element_type() == ElementType::kF32 ? v.span<float>()[i]
                                                            : static_cast<float>(v.GetAsDouble(i));
      std::byte* dst = buf.data() + GgmlBytes(t.type, i - start);
      if (t.type == GgmlType::kF32) {
        std::memcpy(dst, &f, 4);
      } else {
        const uint16_t h = t.type == GgmlType::kF16 ? FloatToHalfBits(f) : FloatToBf16Bits(f);
        std::memcpy(dst, &h, 2);
      }
    }
    TL_RETURN_IF_ERROR(sink(buf));
  }
  return OkStatus();
}

}  // namespace

Status WriteGguf(const std::filesystem::path& path, std::span<const GgufKeyValue> metadata,
                 std::span<const GgufTensorToWrite> tensors) {
  uint64_t alignment = kGgufDefaultAlignment;
  std::set<std::string_view> keys;
  for (const auto& kv : metadata) {
    if (!keys.insert(kv.key).second)
      return InvalidArgument("GGUF writer: key \"" + kv.key + "\" given twice");
    if (kv.key == kAlignmentKey) {
      if (kv.value.type != GgufType::kUint32 || kv.value.integer <= 0 ||
          (kv.value.integer & (kv.value.integer - 1)) != 0)
        return InvalidArgument("GGUF writer: general.alignment must be a uint32 power of two");
      alignment = static_cast<uint64_t>(kv.value.integer);
    }
  }
  std::set<std::string_view> names;
  for (const auto& t : tensors) {
    if (!names.insert(t.name).second)
      return InvalidArgument("GGUF writer: tensor \"" + t.name + "\" given twice");
    if (!t.value.valid())
      return InvalidArgument("GGUF writer: tensor \"" + t.name + "\" has no data");
    if (IsQuantized(t.type) && t.type != GgmlType::kQ8_0)
      return Unimplemented("GGUF writer: tensor \"" + t.name + "\" asks for " +
                           std::string(GgmlTypeName(t.type)) +
                           " (Tlaloc writes F32, F16, BF16 and Q8_0)");
    if (t.type == GgmlType::kQ8_0) {
      const auto& dims = t.value.dims();
      std::vector<int64_t> scale_dims = dims;
      if (!scale_dims.empty()) scale_dims.back() /= kQ8_0BlockElements;
      if (t.value.element_type() != ElementType::kS8 || dims.empty() ||
          dims.back() % kQ8_0BlockElements != 0 || !t.q8_scales.valid() ||
          t.q8_scales.element_type() != ElementType::kF16 || t.q8_scales.dims() != scale_dims)
        return InvalidArgument("GGUF writer: Q8_0 tensor \"" + t.name + "\" is " +
                               t.value.type().ToString() + " with scales " +
                               (t.q8_scales.valid() ? t.q8_scales.type().ToString() : "none") +
                               " (expected " + QuantLayoutText(QuantFormat::kQ8_0) +
                               ", K a multiple of " + std::to_string(kQ8_0BlockElements) + ")");
    } else if (!GgmlTypeFor(t.value.element_type()).ok())
      return InvalidArgument("GGUF writer: tensor \"" + t.name + "\" is " +
                             std::string(ShortName(t.value.element_type())) +
                             "; only f32, f16 and bf16 convert to " +
                             std::string(GgmlTypeName(t.type)));
    if (t.value.dims().empty() || t.value.dims().size() > 4)
      return InvalidArgument("GGUF writer: tensor \"" + t.name + "\" has rank " +
                             std::to_string(t.value.dims().size()) + " (ggml takes 1 to 4)");
  }

  const bool add_alignment = keys.count(kAlignmentKey) == 0;
  Bytes head;
  head.Put<uint32_t>(0x46554747);  // "GGUF"
  head.Put<uint32_t>(kGgufVersion);
  head.Put<uint64_t>(tensors.size());
  head.Put<uint64_t>(metadata.size() + (add_alignment ? 1 : 0));
  if (add_alignment) {
    head.PutString(kAlignmentKey);
    TL_RETURN_IF_ERROR(
        PutValue(head, GgufValue::U32(static_cast<uint32_t>(alignment)), kAlignmentKey));
  }
  for (const auto& kv : metadata) {
    head.PutString(kv.key);
    TL_RETURN_IF_ERROR(PutValue(head, kv.value, kv.key));
  }
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    head.PutString(t.name);
    const auto& dims = t.value.dims();
    head.Put<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (auto it = dims.rbegin(); it != dims.rend(); ++it) head.Put<uint64_t>(*it);
    head.Put<uint32_t>(static_cast<uint32_t>(t.type));
    head.Put<uint64_t>(offset);
    sizes.push_back(GgmlBytes(t.type, t.value.num_elements()));
    offset += (sizes.back() + alignment - 1) / alignment * alignment;
  }
  head.PadTo(alignment);

  return WriteFileAtomically(path, [&](const ByteSink& sink) -> Status {
    TL_RETURN_IF_ERROR(sink(head.data()));
    static const std::vector<std::byte> zeros(kGgufDefaultAlignment * 8);
    for (size_t i = 0; i < tensors.size(); ++i) {
      TL_RETURN_IF_ERROR(StreamTensor(tensors[i], sink));
      uint64_t pad = (alignment - sizes[i] % alignment) % alignment;
      while (pad > 0) {
        const uint64_t n = std::min<uint64_t>(pad, zeros.size());
        TL_RETURN_IF_ERROR(sink({zeros.data(), static_cast<size_t>(n)}));
        pad -= n;
      }
    }
    return OkStatus();
  });
}

}  // namespace tlaloc::io
