// Small file helpers shared by the io layer (not part of the public API).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "tlaloc/io/model_config.h"
#include "tlaloc/support/atomic_file.h"
#include "tlaloc/support/status.h"

namespace tlaloc::io {

// A Status for a failed system call: "<what>: <strerror>" with a code that fits errno.
Status ErrnoStatus(int err, const std::string& what);

// Reads a whole (text) file.
StatusOr<std::string> ReadFileToString(const std::filesystem::path& path);

// Writes a file through a temporary sibling, fsync'ed and renamed into place (see
// tlaloc/support/atomic_file.h). `write` is handed a sink that appends bytes; it returns an
// error to abandon the file.
using ::tlaloc::ByteSink;
Status WriteFileAtomically(const std::filesystem::path& path,
                           const std::function<Status(const ByteSink&)>& write);
Status WriteStringAtomically(const std::filesystem::path& path, const std::string& text);


}  // namespace tlaloc::io
