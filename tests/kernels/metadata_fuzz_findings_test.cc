// metadata.json and kernels.lock inputs of kernel_metadata_fuzz (docs/RELIABILITY.md): each must
// be refused with a message naming the file, never crash.
#include <gtest/gtest.h>

#include <string>

#include "tlaloc/kernels/lockfile.h"
#include "tlaloc/kernels/repository.h"

namespace tlaloc::kernels {
namespace {

std::string Metadata(const std::string& layer_fields, const std::string& extra = "") {
  return R"({"name":"k","version":1,"backend":{"type":"universal"},)" + extra +
         R"("layers":{"L":{"results":["y"])" + layer_fields + "}}}";
}

void ExpectRefused(const std::string& text, const std::string& needle) {
  auto meta = ParseMetadata(text, "tlaloc-universal", "v/metadata.json");
  ASSERT_FALSE(meta.ok()) << text;
  EXPECT_NE(meta.status().message().find("v/metadata.json"), std::string::npos)
      << meta.status().ToString();
  EXPECT_NE(meta.status().message().find(needle), std::string::npos) << meta.status().ToString();
}

// json::value() threw nlohmann's type_error (an abort) when a field had the wrong JSON type.
TEST(MetadataFuzzFindings, LayerFieldsOfTheWrongTypeAreRefused) {
  ExpectRefused(Metadata(R"(,"has-backward":1)"), "\"has-backward\" must be true or false");
  ExpectRefused(Metadata(R"(,"symbol":["f"])"), "\"symbol\" must be a string");
  ExpectRefused(Metadata(R"(,"function":null)"), "\"function\" must be a string");
  ExpectRefused(Metadata(R"(,"payload":{})"), "\"payload\" must be a string");
}

TEST(MetadataFuzzFindings, DigestOfTheWrongTypeIsRefused) {
  ExpectRefused(Metadata("", R"("digest":[1],)"), "\"digest\" must be an object");
  ExpectRefused(Metadata("", R"("digest":{"algorithm":256},)"), "must be a string");
}

TEST(MetadataFuzzFindings, WellTypedFieldsStillParse) {
  auto meta = ParseMetadata(
      Metadata(R"(,"has-backward":true,"function":"f")", R"("digest":{"algorithm":"sha256"},)"),
      "tlaloc-universal");
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_TRUE(meta->layers.at("L").has_backward);
  EXPECT_EQ(meta->layers.at("L").function, "f");
  EXPECT_EQ(meta->digest_algorithm, "sha256");
  EXPECT_EQ(meta->variant, "tlaloc-universal");
}

TEST(MetadataFuzzFindings, LockfileTextRoundTrips) {
  const std::string text = R"([{"repo":"r","commit":"0123456789abcdef0123456789abcdef01234567",
      "variants":{"tlaloc-universal":{"hash":"sha256-ab"}}}])";
  auto lock = ParseLockfile(text, "p/kernels.lock");
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  auto again = ParseLockfile(LockfileToJson(*lock));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ(again->entries.size(), 1u);
  EXPECT_EQ(again->entries[0].variant_hashes.at("tlaloc-universal"), "sha256-ab");
  auto bad = ParseLockfile(R"([{"repo":"r","commit":"short"}])", "p/kernels.lock");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("p/kernels.lock"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc::kernels
