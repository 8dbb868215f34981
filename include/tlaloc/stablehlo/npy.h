// NumPy .npy files (format versions 1-3) to and from Literals, for `tlaloc run --input`.
// Little- and big-endian data of bool, int8..64, uint8..64, float16/32/64 are read; bf16 has no
// standard NumPy dtype and is refused with a message saying so.
#pragma once

#include <string>
#include <string_view>

#include "tlaloc/ir/literal.h"
#include "tlaloc/support/status.h"

namespace tlaloc {

StatusOr<Literal> ParseNpy(std::string_view bytes, std::string_view source_name = "<npy>");
StatusOr<Literal> ReadNpyFile(const std::string& path);
StatusOr<std::string> SerializeNpy(const Literal& literal);
Status WriteNpyFile(const std::string& path, const Literal& literal);

}  // namespace tlaloc
