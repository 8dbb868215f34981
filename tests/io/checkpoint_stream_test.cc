// io::CheckpointStreamWriter: the same bytes as WriteCheckpoint for the same tensors, written in
// any order, single-file and sharded; a group never split across shards (so a run of experts
// still loads as one view); refusals, and an unfinished writer leaves no file behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>

#include "io/io_test_util.h"
#include "tlaloc/io/checkpoint.h"

namespace tlaloc::io {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string FileBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every file of a folder, name -> bytes.
std::map<std::string, std::string> FolderBytes(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    out[e.path().filename().string()] = FileBytes(e.path());
  return out;
}

// Mixed dtypes, so the layout's dtype sort moves tensors away from the order given.
std::vector<NamedTensor> MixedTensors() {
  std::vector<NamedTensor> t;
  for (int i = 0; i < 6; ++i) {
    const std::string n = std::to_string(i);
    std::vector<float> f(static_cast<size_t>(8 + i));
    std::iota(f.begin(), f.end(), static_cast<float>(i));
    t.push_back({"f32." + n, Literal::FromVector<float>({static_cast<int64_t>(f.size())}, f)});
    std::vector<int8_t> q(static_cast<size_t>(40 + 3 * i), static_cast<int8_t>(i - 3));
    t.push_back({"s8." + n, Literal::FromVector<int8_t>({static_cast<int64_t>(q.size())}, q)});
    std::vector<uint16_t> h(static_cast<size_t>(5 + i), static_cast<uint16_t>(0x3c00 + i));
    Literal half = Literal::Uninitialized(TensorType(ElementType::kF16, {5 + i}));
    std::copy(h.begin(), h.end(), half.span<uint16_t>().begin());
    t.push_back({"f16." + n, std::move(half)});
  }
  return t;
}

std::span<const std::byte> BytesOf(const Literal& v) {
  return {v.data(), static_cast<size_t>(v.byte_size())};
}

Status StreamInReverse(const fs::path& dir, const std::vector<NamedTensor>& tensors,
                       const std::vector<std::vector<PlannedTensor>>& groups,
                       const CheckpointWriteOptions& options) {
  TL_ASSIGN_OR_RETURN(auto writer, CheckpointStreamWriter::Create(dir, groups, options));
  for (auto it = tensors.rbegin(); it != tensors.rend(); ++it)
    TL_RETURN_IF_ERROR(writer->Write(it->name, BytesOf(it->value)));
  return writer->Finish();
}

std::vector<std::vector<PlannedTensor>> OneGroupEach(const std::vector<NamedTensor>& tensors) {
  std::vector<std::vector<PlannedTensor>> groups;
  for (const auto& t : tensors) groups.push_back({{t.name, t.value.type()}});
  return groups;
}

TEST(CheckpointStreamWriter, SameBytesAsWriteCheckpointInAnyWriteOrder) {
  TempDir tmp;
  const auto tensors = MixedTensors();
  for (uint64_t max_shard : {uint64_t{0}, uint64_t{100}}) {
    for (auto layout : {SafetensorsLayout::kReference, SafetensorsLayout::kGivenOrder}) {
      SCOPED_TRACE("max_shard_bytes " + std::to_string(max_shard));
      CheckpointWriteOptions options;
      options.max_shard_bytes = max_shard;
      options.layout = layout;
      options.metadata["note"] = "x";
      ASSERT_TRUE(WriteCheckpoint(tmp / "buffered", tensors, options).ok());
      Status s = StreamInReverse(tmp / "streamed", tensors, OneGroupEach(tensors), options);
      ASSERT_TRUE(s.ok()) << s.ToString();
      const auto want = FolderBytes(tmp / "buffered"), got = FolderBytes(tmp / "streamed");
      if (max_shard == 0) {
        EXPECT_EQ(want.size(), 1u);
      } else {
        EXPECT_GT(want.size(), 3u) << "expected several shards and an index";
      }
      EXPECT_EQ(got, want);
      fs::remove_all(tmp / "buffered");
      fs::remove_all(tmp / "streamed");
    }
  }
}

TEST(CheckpointStreamWriter, GroupsStayInOneShardAndLoadAsOneView) {
  TempDir tmp;
  // Three "experts" of 64 bytes each, grouped, after a 40-byte tensor: with 100-byte shards the
  // group gets a shard of its own (192 bytes, over the limit, as one tensor larger than the
  // limit would) instead of being split.
  std::vector<NamedTensor> tensors;
  tensors.push_back({"lead", Literal::FromVector<float>({10}, std::vector<float>(10, 1.0f))});
  std::vector<PlannedTensor> experts;
  std::vector<std::string> names;
  for (int e = 0; e < 3; ++e) {
    const std::string name = "experts." + std::to_string(e);
    tensors.push_back(
        {name, Literal::FromVector<float>({16}, std::vector<float>(16, static_cast<float>(e)))});
    experts.push_back({name, tensors.back().value.type()});
    names.push_back(name);
  }
  tensors.push_back({"tail", Literal::FromVector<float>({4}, std::vector<float>(4, 2.0f))});
  std::vector<std::vector<PlannedTensor>> groups = {
      {{"lead", tensors[0].value.type()}}, experts, {{"tail", tensors[4].value.type()}}};
  CheckpointWriteOptions options;
  options.max_shard_bytes = 100;
  options.layout = SafetensorsLayout::kGivenOrder;
  Status s = StreamInReverse(tmp / "out", tensors, groups, options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto ckpt = Checkpoint::Open(tmp / "out");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  EXPECT_TRUE(ckpt->sharded());
  EXPECT_EQ(ckpt->shards().size(), 3u);
  EXPECT_EQ(ckpt->ShardOf("experts.0"), ckpt->ShardOf("experts.2"));
  EXPECT_NE(ckpt->ShardOf("lead"), ckpt->ShardOf("experts.0"));
  auto view = ckpt->ViewOfRun(names, TensorType(ElementType::kF32, {3, 16}));
  ASSERT_TRUE(view.has_value()) << "the experts do not lie one after another in one shard";
  EXPECT_EQ(view->span<float>()[2 * 16], 2.0f);
  for (const auto& t : tensors)
    EXPECT_EQ(std::memcmp(ckpt->Get(t.name)->data(), t.value.data(), t.value.byte_size()), 0)
        << t.name;
}

TEST(CheckpointStreamWriter, RefusalsAndAnUnfinishedWriterLeavesNoFile) {
  TempDir tmp;
  const auto tensors = MixedTensors();
  CheckpointWriteOptions options;
  options.max_shard_bytes = 100;
  {
    auto writer = CheckpointStreamWriter::Create(tmp / "out", OneGroupEach(tensors), options);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    EXPECT_GT((*writer)->num_shards(), 1u);
    Status unknown = (*writer)->Write("nope", BytesOf(tensors[0].value));
    EXPECT_NE(unknown.message().find("\"nope\" was not planned"), std::string::npos)
        << unknown.ToString();
    Status size = (*writer)->Write(tensors[0].name, BytesOf(tensors[1].value));
    EXPECT_NE(size.message().find("planned as"), std::string::npos) << size.ToString();
    ASSERT_TRUE((*writer)->Write(tensors[0].name, BytesOf(tensors[0].value)).ok());
    Status twice = (*writer)->Write(tensors[0].name, BytesOf(tensors[0].value));
    EXPECT_NE(twice.message().find("written twice"), std::string::npos) << twice.ToString();
    Status missing = (*writer)->Finish();
    EXPECT_NE(missing.message().find("\"" + tensors[1].name + "\" was planned but never written"),
              std::string::npos)
        << missing.ToString();
    EXPECT_FALSE(fs::is_empty(tmp / "out"));  // the temporaries, until the writer goes
  }
  EXPECT_TRUE(fs::is_empty(tmp / "out")) << "an unfinished writer left files behind";
  std::vector<std::vector<PlannedTensor>> twice = {{{"a", TensorType(ElementType::kF32, {1})}},
                                                   {{"a", TensorType(ElementType::kF32, {1})}}};
  auto dup = CheckpointStreamWriter::Create(tmp / "dup", twice, options);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("\"a\" given twice"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc::io
