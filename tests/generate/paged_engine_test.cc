// The engine's paged KV cache on tiny random models: a prompt prefilled in chunks (aligned to
// blocks or not) gives what one whole-prompt prefill gives, blocks are taken as sequences grow
// and returned when they end, a step the pool cannot hold is refused without changing anything,
// and the pool is the only cache memory.
#include <gtest/gtest.h>

#include <cmath>

#include "models/qwen3_reference.h"
#include "tlaloc/generate/engine.h"

namespace tlaloc {
namespace {

using generate::DecodeRow;
using generate::Engine;
using generate::kKvBlockSize;
using generate::PrefillRow;
using testing::RandomModel;
using testing::RefModel;
using testing::TinyConfig;

std::unique_ptr<Engine> MakeEngine(const RefModel& m, int64_t slots, int64_t max_len,
                                   int64_t blocks = 0) {
  auto e = Engine::Create(m.config, m.literals, ElementType::kF32);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (!e.ok()) return nullptr;
  Status s = (*e)->Reserve(slots, max_len, blocks);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::move(*e);
}

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 37 + 11) % 90);  // within the tiny vocabulary of 96
  return p;
}

// Prefills `prompt` in slot 1 in chunks of the given sizes, then decodes `n` greedy tokens;
// returns the last chunk's logits and the tokens.
std::pair<std::vector<float>, std::vector<int32_t>> RunChunks(Engine& e,
                                                              const std::vector<int32_t>& prompt,
                                                              const std::vector<int>& chunks,
                                                              int n) {
  std::pair<std::vector<float>, std::vector<int32_t>> out;
  int64_t fed = 0;
  for (int c : chunks) {
    PrefillRow row{1, {prompt.begin() + fed, prompt.begin() + fed + c}, {}, fed};
    auto step = e.Prefill(std::vector<PrefillRow>{row});
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (!step.ok()) return out;
    fed += c;
    EXPECT_EQ(e.slot_length(1), fed);
    if (fed == static_cast<int64_t>(prompt.size())) {
      auto l = step->logits.span<float>();
      out.first.assign(l.begin(), l.end());
      out.second.push_back(step->tokens[0]);
    }
  }
  for (int i = 1; i < n; ++i) {
    DecodeRow row{1, out.second.back(), static_cast<int32_t>(fed + i - 1), {}, 0};
    auto step = e.Decode(std::vector<DecodeRow>{row});
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (!step.ok()) return out;
    out.second.push_back(step->tokens[0]);
  }
  return out;
}

TEST(PagedEngine, ChunkedPrefillEqualsOneWholePrompt) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 61);
  const std::vector<int32_t> prompt = Prompt(50);
  auto whole_engine = MakeEngine(m, 2, 128);
  ASSERT_TRUE(whole_engine);
  const auto whole = RunChunks(*whole_engine, prompt, {50}, 6);
  ASSERT_FALSE(whole.first.empty());
  // Chunks on block boundaries, and chunks that start and end inside blocks.
  for (const std::vector<int>& chunks :
       {std::vector<int>{16, 16, 16, 2}, std::vector<int>{7, 20, 23}, std::vector<int>{1, 49}}) {
    auto engine = MakeEngine(m, 2, 128);
    ASSERT_TRUE(engine);
    const auto chunked = RunChunks(*engine, prompt, chunks, 6);
    ASSERT_EQ(chunked.first.size(), whole.first.size());
    float worst = 0;
    for (size_t i = 0; i < whole.first.size(); ++i)
      worst = std::max(worst, std::fabs(chunked.first[i] - whole.first[i]));
    EXPECT_LT(worst, 1e-4) << "chunks of " << chunks[0] << ", " << chunks[1];
    EXPECT_EQ(chunked.second, whole.second) << "chunks of " << chunks[0] << ", " << chunks[1];
  }
}

TEST(PagedEngine, BlocksFollowLiveTokens) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 62);
  // 4 slots of 64 positions would take 16 blocks; this pool has 6.
  auto engine = MakeEngine(m, 4, 64, 6);
  ASSERT_TRUE(engine);
  Engine& e = *engine;
  EXPECT_EQ(e.num_blocks(), 6);
  EXPECT_EQ(e.blocks_in_use(), 0);
  // The pool is the whole cache: 6 blocks per layer's keys and values.
  ASSERT_EQ(e.caches().size(), 2u * m.config.num_hidden_layers);
  const TensorType pool_type(ElementType::kF32,
                             {6, m.config.num_key_value_heads, kKvBlockSize, m.config.head_dim});
  for (const auto& c : e.caches()) EXPECT_EQ(c->type(), pool_type);
  EXPECT_EQ(e.block_bytes() * 6, 2 * m.config.num_hidden_layers * pool_type.byte_size());

  ASSERT_TRUE(e.Prefill(std::vector<PrefillRow>{{0, Prompt(20), {}}}).ok());
  EXPECT_EQ(e.blocks_in_use(), 2);
  ASSERT_TRUE(e.Prefill(std::vector<PrefillRow>{{1, Prompt(16), {}}}).ok());
  EXPECT_EQ(e.blocks_in_use(), 3);
  // Slot 1's 17th position opens its second block.
  ASSERT_TRUE(e.Decode(std::vector<DecodeRow>{{1, 5, 16, {}, 1}}).ok());
  EXPECT_EQ(e.blocks_in_use(), 4);
  // 40 more positions need 3 blocks; 2 are free: refused, and nothing changed.
  auto full = e.Prefill(std::vector<PrefillRow>{{2, Prompt(40), {}}});
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("2 of 6 are free"), std::string::npos)
      << full.status().ToString();
  EXPECT_EQ(e.blocks_in_use(), 4);
  EXPECT_EQ(e.slot_length(2), 0);
  EXPECT_EQ(e.slot_length(0), 20);
  // Ending slot 0's sequence returns its blocks; the long prompt fits now.
  e.Release(0);
  EXPECT_EQ(e.slot_length(0), 0);
  EXPECT_EQ(e.blocks_in_use(), 2);
  ASSERT_TRUE(e.Prefill(std::vector<PrefillRow>{{2, Prompt(40), {}}}).ok());
  EXPECT_EQ(e.blocks_in_use(), 5);
  // Restarting a slot at position 0 drops its old sequence first.
  ASSERT_TRUE(e.Prefill(std::vector<PrefillRow>{{2, Prompt(3), {}}}).ok());
  EXPECT_EQ(e.blocks_in_use(), 3);
  EXPECT_EQ(e.slot_length(2), 3);
}

TEST(PagedEngine, RefusesAChunkThatSkipsPositions) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 63);
  auto engine = MakeEngine(m, 1, 64);
  ASSERT_TRUE(engine);
  ASSERT_TRUE(engine->Prefill(std::vector<PrefillRow>{{0, Prompt(5), {}}}).ok());
  auto gap = engine->Prefill(std::vector<PrefillRow>{{0, Prompt(5), {}, 7}});
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("holds 5 positions"), std::string::npos)
      << gap.status().ToString();
  auto past = engine->Prefill(std::vector<PrefillRow>{{0, Prompt(60), {}, 5}});
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("past the context of 64"), std::string::npos)
      << past.status().ToString();
  EXPECT_EQ(engine->slot_length(0), 5);
}

}  // namespace
}  // namespace tlaloc
