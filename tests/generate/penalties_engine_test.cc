// The engine's sampling controls on a tiny random model: each greedy token is the argmax of the
// step's own logits after the penalties computed on the host from the sequence so far (prompt
// for the repetition penalty, generated ids for presence/frequency), requests with different
// controls batched together give what they give alone, and a plain row in a penalised step is
// unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "generate/engine_fixture.h"
#include "models/qwen3_reference.h"
#include "tlaloc/generate/engine.h"

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

struct Trace {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<std::vector<float>>> logits;  // [request][token][vocab]
};

// Runs `requests` in slots 0.. of one engine, prefilled in one step and decoded together.
Trace RunTogether(Engine& engine, const std::vector<Request>& requests, int n) {
  Trace run;
  run.tokens.resize(requests.size());
  run.logits.resize(requests.size());
  auto keep = [&](size_t r, const generate::EngineStep& step, size_t i) {
    run.tokens[r].push_back(step.tokens[i]);
    const int64_t v = step.logits.dims()[1];
    auto all = step.logits.span<float>();
    run.logits[r].emplace_back(all.begin() + i * v, all.begin() + (i + 1) * v);
  };
  std::vector<PrefillRow> prefill;
  for (size_t r = 0; r < requests.size(); ++r)
    prefill.push_back({static_cast<int64_t>(r), requests[r].prompt, requests[r].sampling});
  auto first = engine.Prefill(prefill);
  EXPECT_TRUE(first.ok()) << first.status().ToString();
  if (!first.ok()) return {};
  for (size_t r = 0; r < requests.size(); ++r) keep(r, *first, r);
  for (int i = 1; i < n; ++i) {
    std::vector<DecodeRow> rows;
    for (size_t r = 0; r < requests.size(); ++r)
      rows.push_back({static_cast<int64_t>(r), run.tokens[r].back(),
                      static_cast<int32_t>(requests[r].prompt.size() + run.tokens[r].size() - 1),
                      requests[r].sampling, static_cast<uint32_t>(i)});
    auto step = engine.Decode(rows);
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (!step.ok()) return {};
    for (size_t r = 0; r < requests.size(); ++r) keep(r, *step, r);
  }
  return run;
}

nn::SamplingParams Penalised() {
  nn::SamplingParams p;
  p.repetition_penalty = 1.8;
  p.presence_penalty = 0.6;
  p.frequency_penalty = 0.4;
  p.logit_bias = {{9, 0.3f}, {12, -0.5f}};
  return p;
}

TEST(EnginePenalties, GreedyTokensAreTheArgmaxOfTheHostPenalisedLogits) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 77);
  auto engine = MakeEngine(m, 2);
  ASSERT_TRUE(engine);
  const std::vector<int32_t> prompt{3, 14, 15, 92, 65, 35, 3};
  const Request req{prompt, {Penalised(), 0}};
  Trace run = RunTogether(*engine, {req, {{8, 1}, {}}}, 12);
  ASSERT_EQ(run.tokens.size(), 2u);
  const int64_t v = m.config.vocab_size;
  int moved = 0;
  for (size_t i = 0; i < run.tokens[0].size(); ++i) {
    // Generated before this token: tokens[0..i).
    std::vector<int32_t> generated(run.tokens[0].begin(), run.tokens[0].begin() + i);
    std::vector<float> bias(v), scale(v), offset(v);
    nn::FillPenaltyRow(req.sampling.params, prompt, generated, bias, scale, offset);
    const std::vector<float>& raw = run.logits[0][i];
    std::vector<float> x(v);
    for (int64_t t = 0; t < v; ++t) {
      float y = raw[t] + bias[t];
      y = y > 0 ? y / scale[t] : y * scale[t];
      x[t] = y - offset[t];
    }
    const int32_t want = static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
    const int32_t plain =
        static_cast<int32_t>(std::max_element(raw.begin(), raw.end()) - raw.begin());
    EXPECT_EQ(run.tokens[0][i], want) << "token " << i;
    moved += want != plain;
  }
  EXPECT_GT(moved, 0);  // the penalties changed some choice, so they were checked
}

TEST(EnginePenalties, BatchedRequestsGiveWhatTheyGiveAlone) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 51);
  nn::SamplingParams sampled = Penalised();
  sampled.temperature = 0.9;
  sampled.min_p = 0.05;
  nn::SamplingParams presence;
  presence.presence_penalty = 1000;  // greedy: no generated token repeats
  const std::vector<Request> requests{
      {{3, 14, 15, 92, 65, 35}, {sampled, 7}},
      {{27, 18}, {{}, 0}},  // plain greedy in a penalised step
      {{8, 8, 4, 1, 9}, {presence, 0}},
      {{5, 6}, {{1.3, 0, 1.0}, 12345}},  // plain sampled
  };
  auto together = MakeEngine(m, 4);
  ASSERT_TRUE(together);
  Trace batched = RunTogether(*together, requests, 10);
  ASSERT_EQ(batched.tokens.size(), requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    auto alone_engine = MakeEngine(m, 1);
    ASSERT_TRUE(alone_engine);
    Trace alone = RunTogether(*alone_engine, {requests[r]}, 10);
    ASSERT_EQ(alone.tokens.size(), 1u);
    EXPECT_EQ(batched.tokens[r], alone.tokens[0]) << "request " << r;
  }
  const auto& distinct = batched.tokens[2];
  EXPECT_EQ(std::set<int32_t>(distinct.begin(), distinct.end()).size(), distinct.size());
  // The presence penalty counts generated ids only: the first token (nothing generated yet) is
  // the plain greedy one, even when it is in the prompt.
  auto plain_engine = MakeEngine(m, 1);
  ASSERT_TRUE(plain_engine);
  Trace plain = RunTogether(*plain_engine, {{requests[2].prompt, {{}, 0}}}, 1);
  EXPECT_EQ(batched.tokens[2][0], plain.tokens[0][0]);
}

TEST(EnginePenalties, LogitBiasForcesAToken) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 5);
  auto engine = MakeEngine(m, 1);
  ASSERT_TRUE(engine);
  nn::SamplingParams p;
  p.temperature = 1.0;
  p.logit_bias = {{21, 100.f}};
  Trace run = RunTogether(*engine, {{{1, 2, 3}, {p, 4}}}, 6);
  EXPECT_EQ(run.tokens[0], std::vector<int32_t>(6, 21));
  p.logit_bias = {{-1, 1.f}};
  std::vector<PrefillRow> bad{{0, {1, 2}, {p, 0}}};
  auto refused = engine->Prefill(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("logit_bias"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc
