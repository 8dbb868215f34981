// Helpers for the io tests: temporary folders, hand-built safetensors bytes, the resident set.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc::io::testing {

// A fresh folder under the system temp dir, removed when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tlaloc_io_XXXXXX").string();
    char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// This process's resident bytes (/proc/self/statm), or -1 where there is none.
inline int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = -1;
  if (!(statm >> size >> resident)) return -1;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// 8-byte little-endian length, `header` as given (no padding), then `data`.
inline std::vector<std::byte> BuildSafetensors(const std::string& header,
                                               const std::vector<uint8_t>& data = {},
                                               std::optional<uint64_t> declared_length = {}) {
  std::vector<std::byte> out(8);
  uint64_t n = declared_length.value_or(header.size());
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  for (uint8_t b : data) out.push_back(static_cast<std::byte>(b));
  return out;
}

inline void WriteBytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

inline std::string ReadText(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace tlaloc::io::testing

// Asserts that a StatusOr / Status failed with a message containing every given fragment.
#define EXPECT_ERROR_CONTAINS(expr, ...)                                            \
  do {                                                                              \
    auto tl_result_ = (expr);                                                       \
    ::tlaloc::Status tl_st_ = ::tlaloc::io::testing::StatusOf(tl_result_);          \
    EXPECT_FALSE(tl_st_.ok()) << #expr << " unexpectedly succeeded";                \
    for (const char* tl_frag_ : {__VA_ARGS__})                                      \
      EXPECT_NE(tl_st_.message().find(tl_frag_), std::string::npos)                 \
          << "message \"" << tl_st_.message() << "\" lacks \"" << tl_frag_ << "\""; \
  } while (0)

namespace tlaloc::io::testing {
inline Status StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const StatusOr<T>& s) {
  return s.ok() ? OkStatus() : s.status();
}
}  // namespace tlaloc::io::testing
