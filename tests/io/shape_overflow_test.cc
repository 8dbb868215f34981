// Shapes whose element or byte counts overflow int64 must be refused by the readers with a
// Status. The inputs hide the overflowing product behind a zero dim, which the readers' own
// running products missed (found by gguf_fuzz: UBSan signed overflow in NumElements).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tlaloc/io/gguf.h"
#include "tlaloc/io/safetensors.h"

namespace tlaloc::io {
namespace {

template <typename T>
void Put(std::vector<std::byte>* out, T v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out->insert(out->end(), p, p + sizeof(T));
}

// A GGUF v3 image with one F32 tensor "t" of the given ne (ggml order: innermost first), no
// metadata, and no data bytes (the tensors hold 0 elements).
std::vector<std::byte> GgufWithTensor(const std::vector<uint64_t>& ne) {
  std::vector<std::byte> out;
  Put<uint32_t>(&out, 0x46554747);  // "GGUF"
  Put<uint32_t>(&out, 3);
  Put<uint64_t>(&out, 1);  // tensors
  Put<uint64_t>(&out, 0);  // metadata
  Put<uint64_t>(&out, 1);  // name length
  out.push_back(std::byte{'t'});
  Put<uint32_t>(&out, static_cast<uint32_t>(ne.size()));
  for (uint64_t n : ne) Put<uint64_t>(&out, n);
  Put<uint32_t>(&out, 0);  // F32
  Put<uint64_t>(&out, 0);  // data offset
  out.resize((out.size() + 31) / 32 * 32);
  return out;
}

TEST(ShapeOverflow, GgufRefusesProductHiddenBehindZeroDim) {
  // dims() is [2^40, 2^40, 0]: 0 elements, but 2^80 before the zero is reached.
  auto bytes = GgufWithTensor({0, uint64_t{1} << 40, uint64_t{1} << 40});
  auto contents = ParseGguf(bytes, "overflow.gguf");
  if (contents.ok()) {
    // Before the fix the header passed and reading the tensor overflowed int64.
    for (const auto& info : contents->tensors) (void)ReadGgufTensor(bytes, *contents, info);
  }
  ASSERT_FALSE(contents.ok());
  EXPECT_NE(contents.status().message().find("overflows 64-bit"), std::string::npos)
      << contents.status().ToString();
}

TEST(ShapeOverflow, GgufReadsEmptyTensorWithModestDims) {
  auto bytes = GgufWithTensor({0, 3, 5});
  auto contents = ParseGguf(bytes, "empty.gguf");
  ASSERT_TRUE(contents.ok()) << contents.status().ToString();
  auto literal = ReadGgufTensor(bytes, *contents, contents->tensors.at(0));
  ASSERT_TRUE(literal.ok()) << literal.status().ToString();
  EXPECT_EQ(literal->num_elements(), 0);
}

std::vector<std::byte> Safetensors(const std::string& header) {
  std::vector<std::byte> out;
  Put<uint64_t>(&out, header.size());
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  return out;
}

TEST(ShapeOverflow, SafetensorsRefusesProductHiddenBehindZeroDim) {
  auto bytes = Safetensors(
      R"({"t":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})");
  auto file = SafetensorsFile::FromBytes(bytes, "overflow.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("overflows 64-bit"), std::string::npos)
      << file.status().ToString();
  EXPECT_FALSE(ParseSafetensorsHeader(bytes, "overflow.safetensors").ok());
}

TEST(ShapeOverflow, SafetensorsReadsEmptyTensorWithModestDims) {
  auto bytes = Safetensors(R"({"t":{"dtype":"F32","shape":[0,3,5],"data_offsets":[0,0]}})");
  auto file = SafetensorsFile::FromBytes(bytes, "empty.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto literal = (*file)->Get("t");
  ASSERT_TRUE(literal.ok()) << literal.status().ToString();
  EXPECT_EQ(literal->num_elements(), 0);
}

}  // namespace
}  // namespace tlaloc::io
