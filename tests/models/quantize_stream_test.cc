// `quantize` streams (models/quantize.h): a sharded input gives the same tensors as a single
// file; a sharded output (each projection's experts in one shard) loads, its stacks still views
// of the file, equal to the single-file output; a failure half-way (a non-finite weight met after
// other tensors were written) leaves neither the output nor its staging folder behind.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "io/io_test_util.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/load_weights.h"
#include "tlaloc/models/quantize.h"

namespace tlaloc::models {
namespace {

namespace fs = std::filesystem;
using io::testing::TempDir;

io::ModelConfig SmallMoe() {
  auto c = io::ParseModelConfig(R"({"model_type": "qwen3_moe", "vocab_size": 40,
      "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
      "num_experts": 4, "num_experts_per_tok": 2, "norm_topk_prob": true,
      "moe_intermediate_size": 64, "max_position_embeddings": 64, "eos_token_id": 3,
      "torch_dtype": "float32"})");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

std::string FileBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The model's float folder, its weights in one file or in shards of at most `max_shard` bytes.
void WriteFloatFolder(const io::ModelConfig& c, const fs::path& dir, uint64_t max_shard,
                      std::vector<io::NamedTensor> weights = {}) {
  if (weights.empty()) weights = CheckpointTensors(c, RandomWeights(c, 7, ElementType::kF32));
  ASSERT_TRUE(WriteModelFolder(c, dir, {}, {}, {}).ok());
  fs::remove(dir / "model.safetensors");
  io::CheckpointWriteOptions options = ExpertsInOrder();
  options.max_shard_bytes = max_shard;
  ASSERT_TRUE(io::WriteCheckpoint(dir, weights, options).ok());
}

TEST(Int8QuantizeStream, ShardedInAndOutRoundTrip) {
  TempDir tmp;
  const io::ModelConfig c = SmallMoe();
  WriteFloatFolder(c, tmp / "single", 0);
  WriteFloatFolder(c, tmp / "sharded", 20'000);
  ASSERT_TRUE(io::Checkpoint::Open(tmp / "sharded")->sharded());
  auto a = QuantizeCheckpoint(tmp / "single", tmp / "a");
  auto b = QuantizeCheckpoint(tmp / "sharded", tmp / "b");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  // A small sharded input fits one default (5 GB) shard: the same file as from one file.
  ASSERT_TRUE(fs::exists(tmp / "b/model.safetensors"));
  EXPECT_EQ(FileBytes(tmp / "a/model.safetensors"), FileBytes(tmp / "b/model.safetensors"));
  EXPECT_EQ(a->max_abs_error, b->max_abs_error);

  QuantizeOptions small;
  small.max_shard_bytes = 6'000;  // below one projection's experts (4 * 64 * 64 s8 bytes)
  auto s = QuantizeCheckpoint(tmp / "sharded", tmp / "s", small);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->bytes_out, a->bytes_out);
  auto single = io::Checkpoint::Open(tmp / "a");
  auto sharded = io::Checkpoint::Open(tmp / "s");
  ASSERT_TRUE(single.ok() && sharded.ok()) << sharded.status().ToString();
  ASSERT_TRUE(sharded->sharded());
  EXPECT_GT(sharded->shards().size(), 10u);
  EXPECT_EQ(sharded->names(), single->names());
  for (const auto& name : single->names()) {
    auto x = single->Get(name), y = sharded->Get(name);
    ASSERT_TRUE(x.ok() && y.ok()) << name;
    ASSERT_EQ(x->type(), y->type()) << name;
    EXPECT_EQ(std::memcmp(x->data(), y->data(), x->byte_size()), 0) << name;
  }
  // Loading views every stack in its shard, as from the single file.
  auto config = io::LoadModelConfig(tmp / "s");
  ASSERT_TRUE(config.ok());
  auto loaded = LoadWeights(*config, *sharded, ElementType::kF32);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const auto specs = WeightSpecs(*config);
  int stacks = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].stacked.empty()) continue;
    ++stacks;
    EXPECT_EQ((*loaded)[i].data(), sharded->Get(specs[i].stacked[0])->data())
        << specs[i].name << ": copied, not viewed (its experts span shards?)";
  }
  EXPECT_EQ(stacks, 2 * 3 * 2);  // 2 layers, 3 projections, s8 and scales
}

TEST(Int8QuantizeStream, FailureHalfWayLeavesNoOutput) {
  TempDir tmp;
  const io::ModelConfig c = SmallMoe();
  auto weights = CheckpointTensors(c, RandomWeights(c, 7, ElementType::kF32));
  // The last layer's last expert: met after most tensors have been written.
  const std::string bad = "model.layers.1.mlp.experts.3.down_proj.weight";
  bool found = false;
  for (auto& t : weights)
    if (t.name == bad) {
      t.value.span<float>()[5] = std::nanf("");
      found = true;
    }
  ASSERT_TRUE(found);
  WriteFloatFolder(c, tmp / "f32", 0, weights);
  for (uint64_t max_shard : {uint64_t{0}, uint64_t{6'000}}) {
    QuantizeOptions options;
    options.max_shard_bytes = max_shard;
    auto r = QuantizeCheckpoint(tmp / "f32", tmp / "int8", options);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("\"" + bad + "\" has a non-finite value"),
              std::string::npos)
        << r.status().ToString();
    EXPECT_FALSE(fs::exists(tmp / "int8"));
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(tmp.path()))
      if (e.path().filename() != "f32") left.push_back(e.path().filename().string());
    EXPECT_TRUE(left.empty()) << "left behind: " << left.front();
  }
}

}  // namespace
}  // namespace tlaloc::models
