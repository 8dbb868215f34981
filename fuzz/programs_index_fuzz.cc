// libFuzzer target for the programs recorder's index (`ParseProgramIndex`, what `tlaloc aot`
// reads from TLALOC_PROGRAMS_DIR/index.tsv): any text must give entries or an error Status.
// Every entry names a .mlir file inside the folder (no '/'), counts of at least one, and each
// file once; the same text must parse to the same entries again.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string_view>

#include "tlaloc/pjrt/program_recorder.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "programs_index_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto entries = tlaloc::pjrt::ParseProgramIndex(text, "index.tsv");
  if (!entries.ok()) {
    if (entries.status().message().find("index.tsv:") == std::string::npos) {
      Fail("an error does not name index.tsv:LINE");
    }
    return 0;
  }
  std::set<std::string> files;
  for (const auto& e : *entries) {
    if (e.file.find('/') != std::string::npos) Fail("a file name leaves the folder");
    if (e.file.size() < 6 || e.file.substr(e.file.size() - 5) != ".mlir") Fail("not a .mlir");
    if (e.num_replicas < 1 || e.num_partitions < 1 || e.bytes < 0) Fail("a count out of range");
    if (!files.insert(e.file).second) Fail("a file listed twice");
  }
  auto again = tlaloc::pjrt::ParseProgramIndex(text, "index.tsv");
  if (!again.ok() || again->size() != entries->size()) Fail("parsing is not stable");
  return 0;
}
