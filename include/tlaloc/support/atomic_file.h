// Atomic file writes: nothing Tlaloc writes is ever seen half-written. A file is written under a
// temporary name in its own folder (".NAME.tmp-PID-RANDOM"), fsync'ed, renamed over the target
// and the folder fsync'ed, so after a crash or a full disk the target is either the previous
// file or the complete new one. Errors name the target file and carry strerror.
//
// Crash-consistency tests: TLALOC_TEST_KILL_AFTER_WRITES=N makes the process SIGKILL itself
// right after its N-th write step (counted from 1 over the whole process): each half of a file's
// bytes written to its temporary (the hook writes in two halves, so a kill can tear a file),
// the moment before a RenameDurably and the moment after it. A process that ends without
// reaching N prints "TLALOC_TEST_KILL_AFTER_WRITES=N not reached: C write steps" to stderr.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "tlaloc/support/status.h"

namespace tlaloc {

// A Status for a failed system call: "<what>: <strerror(err)>", with a code that fits errno
// (ENOSPC: kResourceExhausted, EACCES: kPermissionDenied, ENOENT: kNotFound, ...).
Status ErrnoError(int err, const std::string& what);

// Appends bytes to the file being written; returns an error to abandon it.
using ByteSink = std::function<Status(std::span<const std::byte>)>;

// Writes `path` atomically: `write` is handed a sink for the contents. On any error (including
// one `write` returns) the temporary file is removed and `path` is left as it was.
Status WriteFileAtomic(const std::filesystem::path& path,
                       const std::function<Status(const ByteSink&)>& write);
Status WriteStringAtomic(const std::filesystem::path& path, std::string_view text);
// Copies `from` to `to` atomically (the copy is complete or absent).
Status CopyFileAtomic(const std::filesystem::path& from, const std::filesystem::path& to);

// rename(2) `from` over `to` (files, or a folder onto an absent or empty folder), then fsync
// the folders involved so the rename survives a crash.
Status RenameDurably(const std::filesystem::path& from, const std::filesystem::path& to);
// fsync a folder, making the creations, renames and removals in it durable.
Status SyncDirectory(const std::filesystem::path& dir);

// The temporary name WriteFileAtomic uses beside `path`; IsTemporaryName tells such names (so
// a folder's leftovers from a killed process can be recognised and removed).
std::filesystem::path TemporarySibling(const std::filesystem::path& path);
bool IsTemporaryName(std::string_view file_name);

}  // namespace tlaloc
