// libFuzzer target for the .npy reader (`ParseNpy`, `tlaloc run --input`): any byte string must
// parse into a Literal whose data the file holds, or yield an error Status. What parses must
// serialize and parse back to the same type and bytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "tlaloc/stablehlo/npy.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "npy_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto literal = tlaloc::ParseNpy(bytes, "fuzz");
  if (!literal.ok()) return 0;
  if (static_cast<size_t>(literal->byte_size()) > size) Fail("more data than the file holds");
  auto written = tlaloc::SerializeNpy(*literal);
  if (!written.ok()) Fail("a parsed array does not serialize");
  auto again = tlaloc::ParseNpy(*written, "round trip");
  if (!again.ok()) Fail("a serialized array does not parse");
  if (!(again->type() == literal->type())) Fail("round trip changed the type");
  if (literal->byte_size() > 0 &&
      std::memcmp(again->data(), literal->data(), literal->byte_size()) != 0)
    Fail("round trip changed the data");
  auto rewritten = tlaloc::SerializeNpy(*again);
  if (!rewritten.ok() || *rewritten != *written) Fail("serializing is not stable");
  return 0;
}
