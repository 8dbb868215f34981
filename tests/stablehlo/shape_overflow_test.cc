// StableHLO text types and .npy headers refuse shapes whose non-zero dims overflow, even when
// a zero dim makes the element count 0 (the parsers' running products were 0 from there on).
#include <gtest/gtest.h>

#include <string>

#include "tlaloc/stablehlo/npy.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc {
namespace {

TEST(ShapeOverflow, TensorTypeRefusesProductHiddenBehindZeroDim) {
  auto t = ParseTypeText("tensor<0x1099511627776x1099511627776xf32>");
  ASSERT_FALSE(t.ok()) << t->ToString();
  EXPECT_NE(t.status().message().find("too many elements"), std::string::npos)
      << t.status().ToString();
  auto empty = ParseTypeText("tensor<0x1024x1024xf32>");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->tensor.num_elements(), 0);
}

std::string Npy(const std::string& shape) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  header.resize((header.size() + 10 + 1 + 63) / 64 * 64 - 10 - 1, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header;
}

TEST(ShapeOverflow, NpyRefusesProductHiddenBehindZeroDim) {
  auto lit = ParseNpy(Npy("(0, 1099511627776, 1099511627776)"), "overflow.npy");
  ASSERT_FALSE(lit.ok());
  EXPECT_NE(lit.status().message().find("too large"), std::string::npos) << lit.status().ToString();
  auto empty = ParseNpy(Npy("(0, 3, 5)"), "empty.npy");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->num_elements(), 0);
}

}  // namespace
}  // namespace tlaloc
