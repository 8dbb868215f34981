// libFuzzer target for the kernel repository files Tlaloc reads before trusting anything: the
// first input byte picks the file. Even: the rest is a variant's metadata.json
// (`ParseMetadata`); odd: a kernels.lock (`ParseLockfile`). Anything must parse or yield an
// error Status; a lockfile that parses must print and parse back to the same entries.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tlaloc/kernels/lockfile.h"
#include "tlaloc/kernels/repository.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "kernel_metadata_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

void CheckMetadata(std::string_view text) {
  auto meta = tlaloc::kernels::ParseMetadata(text, "tlaloc-universal", "fuzz/metadata.json");
  if (!meta.ok()) return;
  if (meta->name.empty()) Fail("metadata without a name parsed", std::string(text));
  if (meta->layers.empty()) Fail("metadata without layers parsed", std::string(text));
  for (const auto& [name, layer] : meta->layers) {
    if (name != layer.name) Fail("layer stored under another name", name);
    if (layer.results.empty()) Fail("layer without results parsed", name);
  }
}

void CheckLockfile(std::string_view text) {
  auto lock = tlaloc::kernels::ParseLockfile(text, "fuzz/kernels.lock");
  if (!lock.ok()) return;
  const std::string json = tlaloc::kernels::LockfileToJson(*lock);
  auto again = tlaloc::kernels::ParseLockfile(json, "round trip");
  if (!again.ok()) Fail("printed lockfile does not parse", again.status().ToString());
  if (tlaloc::kernels::LockfileToJson(*again) != json)
    Fail("round trip changed the lockfile", json);
  for (const auto& e : lock->entries)
    if (e.commit.size() != 40) Fail("commit id of the wrong length parsed", e.commit);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0)
    CheckMetadata(text);
  else
    CheckLockfile(text);
  return 0;
}
