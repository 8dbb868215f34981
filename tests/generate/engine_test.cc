// The engine on tiny random models: requests with different sampling settings and lengths
// batched in one step give the tokens they give alone, sampling settings compile nothing new,
// a sequence started in another slot leaves running ones untouched, bad slots are refused, and an
// f32 model's bf16 KV cache rounds attention's operands as the reference does.
#include "tlaloc/generate/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <span>

#include "generate/engine_fixture.h"
#include "models/qwen3_reference.h"

namespace tlaloc {
namespace {

using generate::DecodeRow;
using generate::Engine;
using generate::PrefillRow;
using generate::RowSampling;
using testing::RandomModel;
using testing::RefModel;
using testing::TinyConfig;

constexpr int64_t kMaxLen = 64;

std::unique_ptr<Engine> MakeEngine(const RefModel& m, int64_t slots) {
  return testing::MakeTestEngine(m, slots, kMaxLen);
}

using Request = testing::EngineRequest;

// Runs `requests` in slots 0.. of one engine, all prefilled in one step and decoded together
// for `n` tokens each.
std::vector<std::vector<int32_t>> RunTogether(Engine& engine, const std::vector<Request>& requests,
                                              int n) {
  std::vector<PrefillRow> prefill;
  for (size_t r = 0; r < requests.size(); ++r)
    prefill.push_back({static_cast<int64_t>(r), requests[r].prompt, requests[r].sampling});
  auto first = engine.Prefill(prefill);
  EXPECT_TRUE(first.ok()) << first.status().ToString();
  if (!first.ok()) return {};
  std::vector<std::vector<int32_t>> out(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) out[r].push_back(first->tokens[r]);
  for (int i = 1; i < n; ++i) {
    std::vector<DecodeRow> rows;
    for (size_t r = 0; r < requests.size(); ++r)
      rows.push_back({static_cast<int64_t>(r), out[r].back(),
                      static_cast<int32_t>(requests[r].prompt.size() + out[r].size() - 1),
                      requests[r].sampling, static_cast<uint32_t>(i)});
    auto step = engine.Decode(rows);
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (!step.ok()) return {};
    for (size_t r = 0; r < requests.size(); ++r) out[r].push_back(step->tokens[r]);
  }
  return out;
}

TEST(Engine, BatchedRequestsGiveWhatTheyGiveAlone) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 51);
  const std::vector<Request> requests{
      {{3, 14, 15, 92, 65, 35}, {{0.9, 20, 0.95}, 7}},  // sampled
      {{27, 18}, {{}, 0}},                              // greedy, shorter
      {{8, 8, 4, 1, 9}, {{1.4, 0, 1.0}, 12345}},        // hotter, another seed
  };
  auto together = MakeEngine(m, 3);
  ASSERT_TRUE(together);
  auto batched = RunTogether(*together, requests, 8);
  ASSERT_EQ(batched.size(), requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    auto alone_engine = MakeEngine(m, 1);
    ASSERT_TRUE(alone_engine);
    auto alone = RunTogether(*alone_engine, {requests[r]}, 8);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_EQ(batched[r], alone[0]) << "request " << r;
  }
  // The sampled rows really sampled: the same request with another seed draws differently.
  Request reseeded = requests[2];
  reseeded.sampling.seed = 99;
  auto other = MakeEngine(m, 1);
  ASSERT_TRUE(other);
  EXPECT_NE(RunTogether(*other, {reseeded}, 8)[0], batched[2]);
}

TEST(Engine, SamplingSettingsCompileNothingNew) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 52);
  auto engine = MakeEngine(m, 2);
  ASSERT_TRUE(engine);
  std::vector<Request> requests{{{5, 6, 7}, {{}, 0}}, {{9, 10}, {{0.7, 5, 0.9}, 3}}};
  RunTogether(*engine, requests, 4);
  const size_t compiled = engine->num_compiled_programs();
  EXPECT_EQ(compiled, 2u);  // one prefill, one decode
  for (const nn::SamplingParams& p :
       {nn::SamplingParams{1.3, 0, 1.0}, nn::SamplingParams{0.2, 40, 0.5}, nn::SamplingParams{}}) {
    requests[0].sampling.params = p;
    requests[1].sampling = {p, 77};
    RunTogether(*engine, requests, 4);
    EXPECT_EQ(engine->num_compiled_programs(), compiled)
        << "temperature " << p.temperature << " compiled a program";
  }
}

TEST(Engine, StartingASequenceLeavesRunningSlotsAlone) {
  RefModel m = RandomModel(TinyConfig(true, 4, 2, 8), 53);
  const Request a{{11, 12, 13, 14}, {{0.8, 10, 1.0}, 5}};
  const Request b{{40, 41, 42}, {{}, 0}};
  auto alone = MakeEngine(m, 1);
  ASSERT_TRUE(alone);
  const auto a_alone = RunTogether(*alone, {a}, 8)[0];

  // a runs in slot 0; after three tokens b starts in slot 1, and both continue together.
  auto engine = MakeEngine(m, 2);
  ASSERT_TRUE(engine);
  auto first = engine->Prefill(std::vector<PrefillRow>{{0, a.prompt, a.sampling}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::vector<int32_t> a_tokens{first->tokens[0]}, b_tokens;
  auto a_row = [&](uint32_t step) {
    return DecodeRow{0, a_tokens.back(),
                     static_cast<int32_t>(a.prompt.size() + a_tokens.size() - 1), a.sampling, step};
  };
  for (uint32_t step = 1; step < 3; ++step) {
    auto out = engine->Decode(std::vector<DecodeRow>{a_row(step)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    a_tokens.push_back(out->tokens[0]);
  }
  auto b_first = engine->Prefill(std::vector<PrefillRow>{{1, b.prompt, b.sampling}});
  ASSERT_TRUE(b_first.ok()) << b_first.status().ToString();
  b_tokens.push_back(b_first->tokens[0]);
  EXPECT_EQ(engine->slot_length(0), static_cast<int64_t>(a.prompt.size() + 2));
  EXPECT_EQ(engine->slot_length(1), static_cast<int64_t>(b.prompt.size()));
  for (uint32_t step = 3; step < 8; ++step) {
    const uint32_t b_step = step - 2;
    DecodeRow b_row{1, b_tokens.back(), static_cast<int32_t>(b.prompt.size() + b_tokens.size() - 1),
                    b.sampling, b_step};
    // Rows in any order: the outputs follow the rows.
    auto out = engine->Decode(std::vector<DecodeRow>{b_row, a_row(step)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    b_tokens.push_back(out->tokens[0]);
    a_tokens.push_back(out->tokens[1]);
  }
  EXPECT_EQ(a_tokens, a_alone);
  auto b_engine = MakeEngine(m, 1);
  ASSERT_TRUE(b_engine);
  EXPECT_EQ(b_tokens, RunTogether(*b_engine, {b}, 6)[0]);
}

TEST(Engine, RefusesBadSlotsAndMissingCache) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 54);
  auto created = Engine::Create(m.config, m.literals, ElementType::kF32);
  ASSERT_TRUE(created.ok());
  Engine& e = **created;
  auto no_cache = e.Prefill(std::vector<PrefillRow>{{0, {1, 2}, {}}});
  ASSERT_FALSE(no_cache.ok());
  EXPECT_NE(no_cache.status().message().find("Reserve"), std::string::npos);
  ASSERT_TRUE(e.Reserve(2, kMaxLen).ok());
  auto outside = e.Prefill(std::vector<PrefillRow>{{2, {1, 2}, {}}});
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("slot 2"), std::string::npos);
  auto twice = e.Prefill(std::vector<PrefillRow>{{1, {1, 2}, {}}, {1, {3}, {}}});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos);
  // Past the trained length is allowed (a -c larger than max_position_embeddings); none is not.
  EXPECT_TRUE(e.Reserve(1, m.config.max_position_embeddings + 1).ok());
  EXPECT_FALSE(e.Reserve(1, 0).ok());
}

// Largest |engine - reference| over one row of logits.
double MaxDiff(std::span<const float> engine, const std::vector<double>& ref) {
  double m = 0;
  for (size_t i = 0; i < ref.size(); ++i) m = std::max(m, std::abs(engine[i] - ref[i]));
  return m;
}

TEST(Engine, F32ModelWithBf16CacheRoundsAttentionToBf16) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 55);
  auto f32_cache = MakeEngine(m, 1);
  auto created = Engine::Create(m.config, m.literals, ElementType::kF32);
  ASSERT_TRUE(f32_cache && created.ok());
  Engine& e = **created;
  ASSERT_TRUE(e.SetKvDtype(ElementType::kBF16).ok());
  EXPECT_EQ(e.kv_dtype(), ElementType::kBF16);
  ASSERT_TRUE(e.Reserve(1, kMaxLen).ok());
  ASSERT_FALSE(e.caches().empty());
  EXPECT_EQ(e.caches()[0]->type().element_type, ElementType::kBF16);
  EXPECT_EQ(2 * e.cache_bytes(0), f32_cache->cache_bytes(0));
  // Prefill and three decode steps: each step's logits are the reference's with attention
  // rounded to bf16, and farther from the unrounded reference (the rounding happened).
  std::vector<int32_t> seq{3, 14, 15, 92, 65, 35};
  auto step = e.Prefill(std::vector<PrefillRow>{{0, seq, {}}});
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    auto logits = step->logits.span<float>();
    const double rounded = MaxDiff(logits, testing::RefForward(m, seq, true).back());
    const double exact = MaxDiff(logits, testing::RefForward(m, seq).back());
    EXPECT_LT(rounded, 1e-4) << "step " << i;
    EXPECT_GT(exact, 10 * rounded) << "step " << i;
    seq.push_back(step->tokens[0]);
    if (i < 3)
      step = e.Decode(std::vector<DecodeRow>{
          {0, seq.back(), static_cast<int32_t>(seq.size() - 1), {}, static_cast<uint32_t>(i)}});
  }
  // Only an f32 model narrows its cache; the change back drops the cache.
  ASSERT_TRUE(e.SetKvDtype(ElementType::kF32).ok());
  EXPECT_TRUE(e.caches().empty());
  std::vector<Literal> bf16;
  for (const auto& w : m.literals) bf16.push_back(ConvertElementType(w, ElementType::kBF16));
  auto bf16_engine = Engine::Create(m.config, bf16, ElementType::kBF16);
  ASSERT_TRUE(bf16_engine.ok());
  Status refused = (*bf16_engine)->SetKvDtype(ElementType::kF32);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("bf16 for f32"), std::string::npos) << refused.message();
}

}  // namespace
}  // namespace tlaloc
