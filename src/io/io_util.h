// Small file helpers shared by the io layer (not part of the public API).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <span>
#include <string>

#include "tlaloc/support/status.h"

namespace tlaloc::io {

// A Status for a failed system call: "<what>: <strerror>" with a code that fits errno.
Status ErrnoStatus(int err, const std::string& what);

// Reads a whole (text) file.
StatusOr<std::string> ReadFileToString(const std::filesystem::path& path);

// Writes a file through a temporary sibling renamed into place. `write` is handed a sink that
// appends bytes; it returns an error to abandon the file.
using ByteSink = std::function<Status(std::span<const std::byte>)>;
Status WriteFileAtomically(const std::filesystem::path& path,
                           const std::function<Status(const ByteSink&)>& write);
Status WriteStringAtomically(const std::filesystem::path& path, const std::string& text);

}  // namespace tlaloc::io
