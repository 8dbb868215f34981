// ir/quant_format.h: the table's layouts, the round trip from a format's storage types back to
// the format, and the lookup's error.
#include "tlaloc/ir/quant_format.h"

#include <gtest/gtest.h>

namespace tlaloc {
namespace {

TEST(QuantFormat, StorageTypesPerFormat) {
  auto types = [](QuantFormat f, std::vector<int64_t> dims) {
    auto t = QuantStorageTypes(f, dims);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? t->first.ToString() + " " + t->second.ToString() : std::string();
  };
  EXPECT_EQ(types(QuantFormat::kQ8_0, {6, 64}), "tensor<6x64xi8> tensor<6x2xf16>");
  EXPECT_EQ(types(QuantFormat::kQ4_0, {6, 64}), "tensor<6x32xui8> tensor<6x2xf16>");
  EXPECT_EQ(types(QuantFormat::kQ4_K, {6, 512}), "tensor<6x256xui8> tensor<6x16x2xf32>");
  EXPECT_EQ(types(QuantFormat::kQ6_K, {3, 6, 512}), "tensor<3x6x2x192xui8> tensor<3x6x32xf32>");
}

TEST(QuantFormat, FormatOfItsOwnStorage) {
  for (const QuantFormatInfo& f : kQuantFormats) {
    for (std::vector<int64_t> dims : {std::vector<int64_t>{5, 512}, {2, 7, 256}, {1024}}) {
      auto t = QuantStorageTypes(f.format, dims);
      ASSERT_TRUE(t.ok()) << f.name;
      auto back = QuantFormatOf(t->first, t->second);
      ASSERT_TRUE(back.has_value()) << f.name << " " << t->first.ToString();
      EXPECT_TRUE(back->format == f.format) << f.name << " " << t->first.ToString();
      EXPECT_EQ(back->k, dims.back()) << f.name;
    }
  }
  // Quants that disagree with their scales are no format.
  EXPECT_FALSE(
      QuantFormatOf(TensorType(ElementType::kS8, {4, 64}), TensorType(ElementType::kF16, {4, 3})));
  EXPECT_FALSE(
      QuantFormatOf(TensorType(ElementType::kU8, {4, 32}), TensorType(ElementType::kF32, {4, 2})));
}

TEST(QuantFormat, RowsNotWholeBlocksAreRefused) {
  auto t = QuantStorageTypes(QuantFormat::kQ4_K, {4, 96});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("multiple of 256"), std::string::npos)
      << t.status().message();
}

TEST(QuantFormat, LookupByNameAndItsError) {
  EXPECT_TRUE(FindQuantFormat("q6_k") == QuantFormat::kQ6_K);
  EXPECT_FALSE(FindQuantFormat("Q6_K").has_value());
  EXPECT_EQ(QuantFormatName(QuantFormat::kQ4_0), "q4_0");
  auto bad = ParseQuantFormat("q5_k", "formats[\"w\"]");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"q5_k\""), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("q8_0, q4_0, q4_k, q6_k"), std::string::npos)
      << bad.status().message();
}

TEST(QuantFormat, BitsPerWeight) {
  EXPECT_DOUBLE_EQ(QuantTraits(QuantFormat::kQ8_0).bits_per_weight(), 8.5);
  EXPECT_DOUBLE_EQ(QuantTraits(QuantFormat::kQ4_0).bits_per_weight(), 4.5);
  EXPECT_DOUBLE_EQ(QuantTraits(QuantFormat::kQ4_K).bits_per_weight(), 6.0);
  EXPECT_DOUBLE_EQ(QuantTraits(QuantFormat::kQ6_K).bits_per_weight(), 8.0);
  EXPECT_DOUBLE_EQ(QuantTraits(QuantFormat::kQ4_K).ggml_bits_per_weight(), 4.5);
  EXPECT_DOUBLE_EQ(QuantTraits(QuantFormat::kQ6_K).ggml_bits_per_weight(), 6.5625);
}

TEST(QuantFormat, ScaleNames) {
  EXPECT_EQ(QuantScaleName("model.layers.0.mlp.up_proj.weight"),
            "model.layers.0.mlp.up_proj.weight_scale");
  EXPECT_EQ(QuantWeightOfScale("a.weight_scale").value_or(""), "a.weight");
  EXPECT_FALSE(QuantWeightOfScale("a.weight"));
  EXPECT_EQ(QuantLayoutText(QuantFormat::kQ6_K), "q6_k: u8 [..., K/256, 192] with f32 [..., K/16]");
  EXPECT_EQ(QuantLayoutText(QuantFormat::kQ8_0), "q8_0: s8 [..., K] with f16 [..., K/32]");
}

}  // namespace
}  // namespace tlaloc
