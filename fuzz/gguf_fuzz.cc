// libFuzzer target for the GGUF reader: any byte string must either parse into records whose
// tensor data lies inside the buffer and reads back (quantized types dequantised to f32), or
// yield an error Status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "tlaloc/io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto contents = tlaloc::io::ParseGguf(bytes, "fuzz");
  if (!contents.ok()) return 0;
  for (const auto& info : contents->tensors) {
    if (contents->data_offset + info.offset + info.byte_size > size) std::abort();
    auto literal = tlaloc::io::ReadGgufTensor(bytes, *contents, info);
    if (!literal.ok()) std::abort();
    // Quantized data comes back dequantised to f32, every other type as stored.
    const uint64_t want = tlaloc::io::IsQuantized(info.type)
                              ? static_cast<uint64_t>(literal->num_elements()) * sizeof(float)
                              : info.byte_size;
    if (static_cast<uint64_t>(literal->byte_size()) != want) std::abort();
    if (tlaloc::io::IsQuantized(info.type) &&
        tlaloc::io::GgmlBytes(info.type, literal->num_elements()) != info.byte_size)
      std::abort();
  }
  for (const auto& kv : contents->metadata)
    if (kv.value.is_array() && kv.value.array_size() > size) std::abort();
  return 0;
}
