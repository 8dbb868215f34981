// Where a safetensors file puts each tensor, computed from names and types alone, so that the
// buffered writer and the streaming one (checkpoint_stream.h) lay files out byte for byte alike.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/io/safetensors.h"
#include "tlaloc/ir/type.h"
#include "tlaloc/support/status.h"

namespace tlaloc::io {

struct SafetensorsEntry {
  std::string name;
  TensorType type;
};

struct SafetensorsPlan {
  std::string header;             // JSON, padded to a multiple of 8
  std::vector<size_t> order;      // indices into the entries, in data order
  std::vector<uint64_t> offsets;  // per entry: its first byte within the data region
  uint64_t data_size = 0;

  // Where the data region starts in the file: after the 8-byte length and the header.
  uint64_t data_offset() const { return 8 + header.size(); }
};

StatusOr<SafetensorsPlan> PlanSafetensors(std::span<const SafetensorsEntry> entries,
                                          const std::map<std::string, std::string>& metadata,
                                          SafetensorsLayout layout);

// The 8-byte little-endian header length that starts every file.
std::array<std::byte, 8> SafetensorsLengthPrefix(uint64_t n);

}  // namespace tlaloc::io
