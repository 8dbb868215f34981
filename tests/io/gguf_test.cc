// GGUF: the writer's layout read back by the reader and the reader's refusals of corrupt
// images (the Qwen3 export is tested in tests/models/gguf_export_test.cc).
#include "tlaloc/io/gguf.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io_test_util.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/model_config.h"

namespace tlaloc::io {
namespace {

namespace fs = std::filesystem;
using testing::ReadText;
using testing::TempDir;
using testing::WriteText;

std::vector<std::byte> ReadBytes(const fs::path& p) {
  std::string s = ReadText(p);
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

TEST(GgufWriter, RoundTripsMetadataAndTensors) {
  TempDir dir;
  std::vector<GgufKeyValue> kv = {
      {"general.architecture", GgufValue::String("qwen3")},
      {"a.u32", GgufValue::U32(4000000000u)},
      {"a.i32", GgufValue::I32(-7)},
      {"a.u64", GgufValue::U64(1ull << 40)},
      {"a.f32", GgufValue::F32(0.25f)},
      {"a.bool", GgufValue::Bool(true)},
      {"a.strings", GgufValue::StringArray({"x", "", "\xC4\xA0hello"})},
      {"a.ints", GgufValue::I32Array({1, -2, 3})},
  };
  Literal m = Literal::FromVector<float>({2, 3}, {1, -2, 3.5f, 0.1f, 65504, 1e-8f});
  Literal v = Literal::FromVector<float>({3}, {1, 2, 3});
  std::vector<GgufTensorToWrite> tensors = {{"m32", m, GgmlType::kF32},
                                            {"m16", m, GgmlType::kF16},
                                            {"mbf", m, GgmlType::kBF16},
                                            {"v", v, GgmlType::kF32}};
  ASSERT_TRUE(WriteGguf(dir / "t.gguf", kv, tensors).ok());

  auto bytes = ReadBytes(dir / "t.gguf");
  auto g = ParseGguf(bytes, "t.gguf");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->version, 3u);
  EXPECT_EQ(g->alignment, 32u);
  ASSERT_EQ(g->metadata.size(), kv.size() + 1);  // general.alignment added first
  EXPECT_EQ(g->metadata[0].key, "general.alignment");
  EXPECT_EQ(g->Find("general.architecture")->text, "qwen3");
  EXPECT_EQ(g->Find("a.u32")->integer, 4000000000);
  EXPECT_EQ(g->Find("a.u32")->type, GgufType::kUint32);
  EXPECT_EQ(g->Find("a.i32")->integer, -7);
  EXPECT_EQ(g->Find("a.u64")->integer, int64_t{1} << 40);
  EXPECT_EQ(g->Find("a.f32")->real, 0.25);
  EXPECT_EQ(g->Find("a.bool")->integer, 1);
  EXPECT_EQ(g->Find("a.strings")->texts, (std::vector<std::string>{"x", "", "\xC4\xA0hello"}));
  EXPECT_EQ(g->Find("a.ints")->array_type, GgufType::kInt32);
  EXPECT_EQ(g->Find("a.ints")->integers, (std::vector<int64_t>{1, -2, 3}));

  ASSERT_EQ(g->tensors.size(), 4u);
  EXPECT_EQ(g->data_offset % 32, 0u);
  for (const auto& t : g->tensors) EXPECT_EQ(t.offset % 32, 0u) << t.name;
  const GgufTensorInfo* m16 = g->FindTensor("m16");
  ASSERT_NE(m16, nullptr);
  EXPECT_EQ(m16->ne, (std::vector<uint64_t>{3, 2})) << "dims are stored innermost first";
  EXPECT_EQ(m16->dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m16->type, GgmlType::kF16);
  auto back32 = ReadGgufTensor(bytes, *g, *g->FindTensor("m32"));
  ASSERT_TRUE(back32.ok());
  EXPECT_TRUE(back32->BitwiseEquals(m));
  auto back16 = ReadGgufTensor(bytes, *g, *m16);
  auto backbf = ReadGgufTensor(bytes, *g, *g->FindTensor("mbf"));
  ASSERT_TRUE(back16.ok() && backbf.ok());
  EXPECT_EQ(back16->span<uint16_t>()[4], FloatToHalfBits(65504.0f));
  EXPECT_EQ(back16->span<uint16_t>()[3], FloatToHalfBits(0.1f));
  EXPECT_EQ(backbf->span<uint16_t>()[3], FloatToBf16Bits(0.1f));
  EXPECT_EQ(backbf->span<uint16_t>()[1], FloatToBf16Bits(-2.0f));
  // The file ends right after the last tensor, padded to the alignment.
  const GgufTensorInfo& last = g->tensors.back();
  EXPECT_EQ(bytes.size(), g->data_offset + (last.offset + last.byte_size + 31) / 32 * 32);
}

TEST(GgufWriter, RefusesDuplicatesAndBadTensors) {
  TempDir dir;
  Literal v = Literal::FromVector<float>({2}, {1, 2});
  std::vector<GgufKeyValue> twice = {{"k", GgufValue::U32(1)}, {"k", GgufValue::U32(2)}};
  EXPECT_ERROR_CONTAINS(WriteGguf(dir / "a.gguf", twice, {}), "\"k\" given twice");
  std::vector<GgufTensorToWrite> same = {{"t", v, GgmlType::kF32}, {"t", v, GgmlType::kF32}};
  EXPECT_ERROR_CONTAINS(WriteGguf(dir / "a.gguf", {}, same), "\"t\" given twice");
  std::vector<GgufTensorToWrite> ints = {
      {"i", Literal::FromVector<int32_t>({2}, {1, 2}), GgmlType::kF32}};
  EXPECT_ERROR_CONTAINS(WriteGguf(dir / "a.gguf", {}, ints), "\"i\"", "s32");
  std::vector<GgufKeyValue> align = {{"general.alignment", GgufValue::U32(24)}};
  EXPECT_ERROR_CONTAINS(WriteGguf(dir / "a.gguf", align, {}), "power of two");
  EXPECT_FALSE(fs::exists(dir / "a.gguf"));
}

TEST(GgufReader, RefusesCorruptImagesByName) {
  TempDir dir;
  std::vector<GgufKeyValue> kv = {{"general.name", GgufValue::String("x")},
                                  {"arr", GgufValue::StringArray({"a", "b"})}};
  std::vector<GgufTensorToWrite> tensors = {
      {"w", Literal::FromVector<float>({2, 2}, {1, 2, 3, 4}), GgmlType::kF32}};
  ASSERT_TRUE(WriteGguf(dir / "t.gguf", kv, tensors).ok());
  const auto good = ReadBytes(dir / "t.gguf");
  auto parsed = ParseGguf(good);
  ASSERT_TRUE(parsed.ok());
  const size_t data_end = parsed->data_offset + 16;  // one 2x2 f32 tensor

  // Every truncation before the end of the data is refused, never read past.
  for (size_t n = 0; n < data_end; ++n)
    EXPECT_FALSE(ParseGguf(std::span(good).first(n)).ok()) << "prefix of " << n << " bytes";

  auto patched = [&](size_t at, std::vector<uint8_t> with) {
    auto b = good;
    for (size_t i = 0; i < with.size(); ++i) b[at + i] = std::byte{with[i]};
    return b;
  };
  EXPECT_ERROR_CONTAINS(ParseGguf(patched(0, {'G', 'G', 'M', 'L'}), "f.gguf"), "f.gguf",
                        "not a GGUF file");
  EXPECT_ERROR_CONTAINS(ParseGguf(patched(4, {1, 0, 0, 0})), "GGUF version 1");
  EXPECT_ERROR_CONTAINS(ParseGguf(patched(16, {0xff, 0xff, 0xff, 0xff})), "more than the file");
  // The first key's value type follows magic, version, counts, and the key string.
  const size_t first_type = 24 + 8 + std::string("general.alignment").size();
  EXPECT_ERROR_CONTAINS(ParseGguf(patched(first_type, {99})), "unknown type 99");
}

// Q8_0 (an int8 checkpoint's blocks): each block of 32 written as its f16 scale then its 32
// int8 values; read back dequantised; malformed inputs refused by name.
TEST(GgufWriter, Q8_0BlocksRoundTrip) {
  TempDir dir;
  std::vector<int8_t> q(2 * 64);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<int8_t>(static_cast<int>(i % 255) - 127);
  Literal scales(TensorType(ElementType::kF16, {2, 2}));
  const uint16_t bits[4] = {0x3C00, 0x3800, 0x0001, 0x4400};  // 1, 0.5, smallest subnormal, 4
  std::memcpy(scales.data(), bits, sizeof bits);
  std::vector<GgufTensorToWrite> tensors = {
      {"q", Literal::FromVector<int8_t>({2, 64}, q), GgmlType::kQ8_0, scales}};
  ASSERT_TRUE(WriteGguf(dir / "q.gguf", {}, tensors).ok());
  const auto bytes = ReadBytes(dir / "q.gguf");
  auto parsed = ParseGguf(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const GgufTensorInfo* t = parsed->FindTensor("q");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, GgmlType::kQ8_0);
  EXPECT_EQ(t->byte_size, 4u * 34);
  EXPECT_EQ(t->dims(), (std::vector<int64_t>{2, 64}));
  // The second block starts with its scale's bytes, then its values.
  const std::byte* block1 = bytes.data() + parsed->data_offset + t->offset + 34;
  EXPECT_EQ(std::memcmp(block1, &bits[1], 2), 0);
  EXPECT_EQ(std::memcmp(block1 + 2, q.data() + 32, 32), 0);
  auto back = ReadGgufTensor(bytes, *parsed, *t);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->element_type(), ElementType::kF32);
  const float d[4] = {1.0f, 0.5f, 5.9604645e-08f, 4.0f};
  for (int64_t i = 0; i < 128; ++i)
    EXPECT_EQ(back->span<float>()[i], static_cast<float>(q[i]) * d[i / 32]) << i;

  std::vector<GgufTensorToWrite> no_scales = {
      {"q", Literal::FromVector<int8_t>({2, 64}, q), GgmlType::kQ8_0}};
  EXPECT_ERROR_CONTAINS(WriteGguf(dir / "bad.gguf", {}, no_scales), "Q8_0 tensor \"q\"");
  std::vector<GgufTensorToWrite> ragged = {
      {"r", Literal::FromVector<int8_t>({4, 16}, std::vector<int8_t>(64)), GgmlType::kQ8_0,
       Literal(TensorType(ElementType::kF16, {4, 0}))}};
  EXPECT_ERROR_CONTAINS(WriteGguf(dir / "bad.gguf", {}, ragged), "multiple of 32");
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.gguf"));
}

}  // namespace
}  // namespace tlaloc::io
