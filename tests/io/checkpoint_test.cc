#include "tlaloc/io/checkpoint.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io_test_util.h"

namespace tlaloc::io {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::vector<NamedTensor> SomeTensors() {
  return {
      {"model.embed_tokens.weight", Literal::FromVector<float>({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8})},
      {"model.norm.weight", Literal::FromVector<float>({2}, {0.5f, 0.25f})},
      {"model.layers.0.mlp.up_proj.weight", Literal::FromVector<int32_t>({3}, {-1, 0, 1})},
      {"lm_head.weight", Literal::FromVector<uint8_t>({5}, {9, 8, 7, 6, 5})},
  };
}

void ExpectSameTensors(const Checkpoint& ckpt, const std::vector<NamedTensor>& tensors) {
  EXPECT_EQ(ckpt.size(), tensors.size());
  for (const auto& t : tensors) {
    auto got = ckpt.Get(t.name);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(got->BitwiseEquals(t.value)) << t.name;
  }
}

TEST(Checkpoint, SingleFileRoundTripAddsFormatMetadata) {
  TempDir dir;
  auto tensors = SomeTensors();
  ASSERT_TRUE(WriteCheckpoint(dir.path(), tensors).ok());
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_FALSE(ckpt->sharded());
  ExpectSameTensors(*ckpt, tensors);
  ASSERT_EQ(ckpt->shards().size(), 1u);
  EXPECT_EQ(ckpt->shards()[0]->metadata().at("format"), "pt");
  EXPECT_TRUE(std::is_sorted(ckpt->names().begin(), ckpt->names().end()));
  // A single file opens directly too.
  auto direct = Checkpoint::Open(dir / "model.safetensors");
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->names(), ckpt->names());
  EXPECT_ERROR_CONTAINS(ckpt->Get("nope"), "no tensor named \"nope\"");
}

TEST(Checkpoint, ShardedWriteAndReadPresentOneTable) {
  TempDir dir;
  auto tensors = SomeTensors();
  CheckpointWriteOptions options;
  options.max_shard_bytes = 20;  // 32 | 8 + 12 | 5 bytes: three shards
  ASSERT_TRUE(WriteCheckpoint(dir.path(), tensors, options).ok());
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  ASSERT_TRUE(fs::exists(dir / "model.safetensors.index.json"));
  for (const char* shard : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                            "model-00003-of-00003.safetensors"})
    EXPECT_TRUE(fs::exists(dir / shard)) << shard;

  auto index = nlohmann::json::parse(testing::ReadText(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), 57u);
  EXPECT_EQ(index["weight_map"]["model.embed_tokens.weight"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["lm_head.weight"], "model-00003-of-00003.safetensors");

  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_TRUE(ckpt->sharded());
  EXPECT_EQ(ckpt->shards().size(), 3u);
  ExpectSameTensors(*ckpt, tensors);
  EXPECT_EQ(ckpt->total_bytes(), 57u);
  EXPECT_EQ(ckpt->index_metadata().at("total_size"), "57");
  EXPECT_NE(ckpt->ShardOf("model.embed_tokens.weight"), ckpt->ShardOf("lm_head.weight"));
  // Views point into their shard's mapping.
  auto v = ckpt->Get("model.norm.weight");
  ASSERT_TRUE(v.ok());
  auto shard_bytes = ckpt->ShardOf("model.norm.weight")->bytes();
  EXPECT_GE(v->data(), shard_bytes.data());
  EXPECT_LT(v->data(), shard_bytes.data() + shard_bytes.size());

  // The index file itself opens the same table.
  auto via_index = Checkpoint::Open(dir / "model.safetensors.index.json");
  ASSERT_TRUE(via_index.ok());
  EXPECT_EQ(via_index->names(), ckpt->names());

  // Saving again unsharded removes the stale index and shards.
  ASSERT_TRUE(WriteCheckpoint(dir.path(), tensors).ok());
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir / "model-00001-of-00003.safetensors"));
  auto single = Checkpoint::Open(dir.path());
  ASSERT_TRUE(single.ok());
  EXPECT_FALSE(single->sharded());
}

class BadIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Two shards: a holds x, b holds y.
    ASSERT_TRUE(WriteSafetensors(dir_ / "a.safetensors",
                                 std::vector<NamedTensor>{{"x", Literal::Scalar<float>(1)}})
                    .ok());
    ASSERT_TRUE(WriteSafetensors(dir_ / "b.safetensors",
                                 std::vector<NamedTensor>{{"y", Literal::Scalar<float>(2)}})
                    .ok());
  }
  StatusOr<Checkpoint> OpenWithIndex(const std::string& index) {
    testing::WriteText(dir_ / "model.safetensors.index.json", index);
    return Checkpoint::Open(dir_.path());
  }
  TempDir dir_;
};

TEST_F(BadIndexTest, GoodIndexOpens) {
  auto ckpt = OpenWithIndex(R"({"weight_map":{"x":"a.safetensors","y":"b.safetensors"}})");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_EQ(ckpt->Get("y")->span<float>()[0], 2.0f);
}

TEST_F(BadIndexTest, EveryMismatchIsNamed) {
  EXPECT_ERROR_CONTAINS(OpenWithIndex("{"), "model.safetensors.index.json", "not valid JSON");
  EXPECT_ERROR_CONTAINS(OpenWithIndex(R"({"metadata":{}})"), "missing \"weight_map\"");
  EXPECT_ERROR_CONTAINS(OpenWithIndex(R"({"weight_map":{"x":1}})"), "\"x\" must name a shard");
  EXPECT_ERROR_CONTAINS(OpenWithIndex(R"({"weight_map":{"x":"../a.safetensors"}})"),
                        "\"../a.safetensors\"", "not a file name");
  EXPECT_ERROR_CONTAINS(
      OpenWithIndex(R"({"weight_map":{"x":"a.safetensors","y":"c.safetensors"}})"), "c.safetensors",
      "cannot open");
  // Shards the index does not name are not part of the checkpoint.
  auto partial = OpenWithIndex(R"({"weight_map":{"x":"a.safetensors"}})");
  ASSERT_TRUE(partial.ok()) << partial.status().message();
  EXPECT_FALSE(partial->Contains("y"));
  EXPECT_ERROR_CONTAINS(
      OpenWithIndex(
          R"({"weight_map":{"x":"a.safetensors","y":"b.safetensors","z":"b.safetensors"}})"),
      "weight_map lists tensor \"z\" in shard b.safetensors, which does not hold it");
  EXPECT_ERROR_CONTAINS(
      OpenWithIndex(R"({"weight_map":{"x":"a.safetensors","y":"a.safetensors"}})"),
      "weight_map lists tensor \"y\" in shard a.safetensors");
  EXPECT_ERROR_CONTAINS(
      OpenWithIndex(R"({"weight_map":{"x":"b.safetensors","y":"a.safetensors"}})"),
      "shard a.safetensors holds tensor \"x\", which the weight_map assigns to b.safetensors");
}

TEST(Checkpoint, ShardHoldingUnlistedTensorIsRefused) {
  TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir / "a.safetensors",
                               std::vector<NamedTensor>{{"x", Literal::Scalar<float>(1)},
                                                        {"extra", Literal::Scalar<float>(3)}})
                  .ok());
  testing::WriteText(dir / "model.safetensors.index.json",
                     R"({"weight_map":{"x":"a.safetensors"}})");
  EXPECT_ERROR_CONTAINS(Checkpoint::Open(dir.path()), "shard a.safetensors holds tensor \"extra\"",
                        "does not list");
}

TEST(Checkpoint, FolderProblemsAreExplained) {
  TempDir dir;
  EXPECT_ERROR_CONTAINS(Checkpoint::Open(dir / "absent"), "absent", "no such file or folder");
  EXPECT_ERROR_CONTAINS(Checkpoint::Open(dir.path()), "no model.safetensors");
  ASSERT_TRUE(WriteSafetensors(dir / "one.safetensors",
                               std::vector<NamedTensor>{{"x", Literal::Scalar<float>(1)}})
                  .ok());
  auto only = Checkpoint::Open(dir.path());  // a lone .safetensors file is the checkpoint
  ASSERT_TRUE(only.ok()) << only.status().message();
  EXPECT_TRUE(only->Contains("x"));
  ASSERT_TRUE(WriteSafetensors(dir / "two.safetensors",
                               std::vector<NamedTensor>{{"y", Literal::Scalar<float>(1)}})
                  .ok());
  EXPECT_ERROR_CONTAINS(Checkpoint::Open(dir.path()), "one.safetensors, two.safetensors",
                        "no model.safetensors.index.json");
}

}  // namespace
}  // namespace tlaloc::io
