// libFuzzer target: any input is parsed as StableHLO text; parsing must never crash, hang or
// allocate without bound, and a module that parses must print to text that parses again to
// the same printed text. Seed it with the conformance programs:
//   build-fuzz/fuzz/stablehlo_parser_fuzz -max_len=65536 CORPUS
//   ../shared/conformance/stablehlo-testdata
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tlaloc::ParseOptions options;
  options.max_literal_bytes = int64_t{1} << 24;  // stay far below the fuzzer's memory limit
  auto module = tlaloc::ParseModule(text, "fuzz", options);
  if (!module.ok()) return 0;
  std::string once = tlaloc::PrintModule(**module);
  auto again = tlaloc::ParseModule(once, "printed", options);
  if (!again.ok()) {
    std::fprintf(stderr, "printed module does not parse: %s\n%s\n",
                 again.status().ToString().c_str(), once.c_str());
    std::abort();
  }
  if (tlaloc::PrintModule(**again) != once) {
    std::fprintf(stderr, "print -> parse -> print differs:\n%s\n", once.c_str());
    std::abort();
  }
  return 0;
}
