// libFuzzer target for the safetensors header parser and tensor views: any byte string must
// either parse into tensors whose views stay inside the buffer, or yield an error Status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "tlaloc/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto header = tlaloc::io::ParseSafetensorsHeader(bytes, "fuzz");
  auto file = tlaloc::io::SafetensorsFile::FromBytes(bytes, "fuzz");
  if (header.ok() != file.ok()) std::abort();  // both paths must agree
  if (!file.ok()) return 0;
  uint64_t covered = 0;
  for (const auto& info : (*file)->tensors()) {
    auto literal = (*file)->Get(info.name);
    if (!literal.ok()) std::abort();
    if (static_cast<uint64_t>(literal->byte_size()) != info.byte_size()) std::abort();
    // Touch the first and last byte so ASan sees any view outside the buffer.
    if (literal->byte_size() > 0) {
      volatile std::byte first = literal->data()[0];
      volatile std::byte last = literal->data()[literal->byte_size() - 1];
      (void)first;
      (void)last;
    }
    covered += info.byte_size();
  }
  if (covered != (*file)->header().data_size) std::abort();
  return 0;
}
