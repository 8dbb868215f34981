// Inputs npy_fuzz found (docs/RELIABILITY.md): each must give an error Status, not a crash.
#include <gtest/gtest.h>

#include <string>

#include "tlaloc/stablehlo/npy.h"

namespace tlaloc {
namespace {

std::string NpyWithHeader(const std::string& header) {
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header;
}

// 'shape' with no value at the end of the header made the tuple text empty, and taking its
// inside threw std::out_of_range (an abort through std::terminate).
TEST(NpyFuzzFindings, ShapeWithoutATupleIsRefused) {
  for (const std::string shape : {"", "'", "3", "(", ")"}) {
    auto lit = ParseNpy(NpyWithHeader("{'descr': '|u1', 'fortran_order': False, 'shape': " + shape),
                        "shape.npy");
    ASSERT_FALSE(lit.ok()) << "shape text '" << shape << "'";
    EXPECT_NE(lit.status().message().find("shape.npy"), std::string::npos)
        << lit.status().ToString();
  }
  // The reproducer as libFuzzer saved it.
  using namespace std::string_literals;  // the bytes hold NULs
  const std::string found =
      "\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'f              +                       "
      "\x93NUMPY\x01\x00v\x00{'[escr': '|b1', 'fortran_order':   False, 'shape': (\n2\x07, "s;
  ASSERT_EQ(found.size(), 135u);
  EXPECT_FALSE(ParseNpy(found, "found.npy").ok());
}

TEST(NpyFuzzFindings, WellFormedTuplesStillParse) {
  auto scalar =
      ParseNpy(NpyWithHeader("{'descr': '|u1', 'fortran_order': False, 'shape': (), }") + "\x07",
               "scalar.npy");
  ASSERT_TRUE(scalar.ok()) << scalar.status().ToString();
  EXPECT_EQ(scalar->num_elements(), 1);
  auto vec = ParseNpy(
      NpyWithHeader("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }") + "ab", "vec.npy");
  ASSERT_TRUE(vec.ok()) << vec.status().ToString();
  EXPECT_EQ(vec->num_elements(), 2);
}

}  // namespace
}  // namespace tlaloc
