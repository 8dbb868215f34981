// The batch loop on a tiny random model: the finish-reason names, a prompt's n choices sharing
// its whole KV blocks (counted once in the pool and in the ledger, returned when the last choice
// ends), greedy choices equal to the prompt run alone, seeded choices that differ from each other
// and repeat, and Engine::Share's refusals.
#include "tlaloc/generate/batch_loop.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "models/qwen3_reference.h"

namespace tlaloc {
namespace {

using generate::BatchLoop;
using generate::BatchLoopOptions;
using generate::Engine;
using generate::FinishReason;
using generate::kKvBlockSize;
using generate::Sequence;
using generate::SequenceGroup;
using generate::SequenceSpec;
using testing::RandomModel;
using testing::RefModel;
using testing::TinyConfig;

// Keeps its tokens and finish reason where the test can read them after the loop drops it.
struct Outcome {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
};

class Recorded : public Sequence {
 public:
  Recorded(SequenceSpec spec, Outcome& out) : Sequence(std::move(spec)), out_(out) {}

 protected:
  void OnFinish(const Status&) override {
    out_.tokens = generated();
    out_.reason = finish_reason();
  }

 private:
  Outcome& out_;
};

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 37 + 11) % 90);  // within the tiny vocabulary
  return p;
}

SequenceSpec Spec(int prompt_len, int64_t max_new, double temperature, uint64_t seed) {
  SequenceSpec spec;
  spec.prompt = Prompt(prompt_len);
  spec.sampling.params.temperature = temperature;
  spec.sampling.seed = seed;
  spec.max_new_tokens = max_new;
  spec.context = 128;
  return spec;
}

std::unique_ptr<Engine> MakeEngine(const RefModel& m) {
  auto e = Engine::Create(m.config, m.literals, ElementType::kF32);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

std::unique_ptr<BatchLoop> MakeLoop(Engine& engine) {
  BatchLoopOptions o;
  o.max_batch = 4;
  o.max_context = 128;
  o.prefill_chunk = 16;  // a 40-token prompt in three chunks: the serving path
  auto loop = BatchLoop::Create(engine, o);
  EXPECT_TRUE(loop.ok()) << loop.status().ToString();
  return loop.ok() ? std::move(*loop) : nullptr;
}

// Runs `specs` as the choices of one prompt to completion, one step at a time as the server does.
std::vector<Outcome> RunGroup(BatchLoop& loop, std::vector<SequenceSpec> specs) {
  std::vector<Outcome> out(specs.size());
  SequenceGroup group;
  for (size_t i = 0; i < specs.size(); ++i)
    group.push_back(std::make_unique<Recorded>(std::move(specs[i]), out[i]));
  EXPECT_TRUE(loop.TryAdmit(group));
  while (loop.running() > 0) {
    if (loop.has_prefill()) {
      EXPECT_TRUE(loop.PrefillStep().ok());
    }
    if (loop.has_decode()) {
      EXPECT_TRUE(loop.DecodeStep().ok());
    }
  }
  return out;
}

TEST(BatchLoop, FinishReasonsHaveTheOpenAiNames) {
  EXPECT_EQ(generate::FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_EQ(generate::FinishReasonName(FinishReason::kLength), "length");
  EXPECT_EQ(generate::FinishReasonName(FinishReason::kCancelled), "cancelled");
  EXPECT_EQ(generate::FinishReasonName(FinishReason::kError), "error");
  EXPECT_EQ(generate::FinishReasonName(FinishReason::kNone), "");
}

// Separate prompts prefill together while their padded rows fit prefill_rows: four prompts of 3
// to 5 tokens pad to 6 (Engine::PromptBucket), so a budget of 16 rows takes two per step, and
// each request's greedy tokens are the ones it gets alone.
TEST(BatchLoop, PromptsPrefillTogetherWithinTheRowBudget) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 9);
  auto engine = MakeEngine(m);
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->PromptBucket(3), 4);
  EXPECT_EQ(engine->PromptBucket(5), 6);
  std::vector<std::vector<int32_t>> alone;
  for (int len : {3, 5, 4, 5}) {
    auto loop = MakeLoop(*engine);
    ASSERT_TRUE(loop);
    alone.push_back(RunGroup(*loop, {Spec(len, 6, 0.0, 1)})[0].tokens);
    ASSERT_EQ(alone.back().size(), 6u);
  }
  BatchLoopOptions o;
  o.max_batch = 4;
  o.max_context = 128;
  o.prefill_prompts = 0;
  o.prefill_rows = 16;
  auto loop = BatchLoop::Create(*engine, o);
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  std::vector<Outcome> out(4);
  const int lens[] = {3, 5, 4, 5};
  for (int i = 0; i < 4; ++i) {
    SequenceGroup group;
    group.push_back(std::make_unique<Recorded>(Spec(lens[i], 6, 0.0, 1), out[i]));
    ASSERT_TRUE((*loop)->TryAdmit(group));
  }
  ASSERT_TRUE((*loop)->PrefillStep().ok());
  ASSERT_TRUE((*loop)->has_prefill());  // two of four in: a third would make 3 x 6 rows
  ASSERT_TRUE((*loop)->PrefillStep().ok());
  EXPECT_FALSE((*loop)->has_prefill());
  EXPECT_EQ((*loop)->counters().prefill_steps, 2);
  while ((*loop)->running() > 0) ASSERT_TRUE((*loop)->DecodeStep().ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i].tokens, alone[i]) << "request " << i;
}

// Prompt chunks pad to powers of two and 1.5 times them: past 4 tokens, to less than 1.5 times
// their length (powers of two alone pad up to twice).
TEST(BatchLoop, PromptBucketsPadToLessThanOneAndAHalfTimes) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 9);
  auto engine = MakeEngine(m);
  ASSERT_TRUE(engine);
  auto loop = MakeLoop(*engine);  // reserves 128 positions per slot
  ASSERT_TRUE(loop);
  int64_t last = 0;
  for (int64_t len = 1; len <= 128; ++len) {
    const int64_t t = engine->PromptBucket(len);
    EXPECT_GE(t, std::max<int64_t>(len, 4)) << len;
    if (len > 4) {
      EXPECT_LT(2 * t, 3 * len) << len;
    }
    EXPECT_GE(t, last) << len;
    last = t;
  }
  EXPECT_EQ(engine->PromptBucket(5), 6);
  EXPECT_EQ(engine->PromptBucket(7), 8);
  EXPECT_EQ(engine->PromptBucket(9), 12);
  EXPECT_EQ(engine->PromptBucket(100), 128);
}

// A burst of prompts that outgrows one prefill step: the decode step of a running sequence waits
// for the next prefill step when the prompts left are one chunk from done, at most once in a row,
// and never for a long prompt's earlier chunks; every request still gets its tokens alone.
TEST(BatchLoop, DecodeWaitsForOneMorePrefillStepOfABurst) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 9);
  auto engine = MakeEngine(m);
  ASSERT_TRUE(engine);
  const int lens[] = {3, 4, 3, 4, 3, 4, 3, 40};
  std::vector<std::vector<int32_t>> alone;
  for (int len : lens) {
    auto single = MakeLoop(*engine);
    ASSERT_TRUE(single);
    alone.push_back(RunGroup(*single, {Spec(len, 5, 0.0, 1)})[0].tokens);
  }
  BatchLoopOptions o;
  o.max_batch = 8;
  o.max_context = 128;
  o.prefill_chunk = 16;
  o.prefill_prompts = 0;
  o.prefill_rows = 8;  // two 4-token prompts a step
  auto loop = BatchLoop::Create(*engine, o);
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  BatchLoop& l = **loop;
  std::vector<Outcome> out(8);
  auto admit = [&](int i) {
    SequenceGroup group;
    group.push_back(std::make_unique<Recorded>(Spec(lens[i], 5, 0.0, 1), out[i]));
    ASSERT_TRUE(l.TryAdmit(group));
  };
  admit(0);
  ASSERT_TRUE(l.PrefillStep().ok());
  EXPECT_FALSE(l.DeferDecode());  // nothing waits
  ASSERT_TRUE(l.DecodeStep().ok());
  for (int i = 1; i <= 6; ++i) admit(i);  // six prompts: three prefill steps of two
  EXPECT_EQ(l.prefill_left(), 4);
  ASSERT_TRUE(l.PrefillStep().ok());
  EXPECT_TRUE(l.DeferDecode());  // four wait, each one chunk from done
  ASSERT_TRUE(l.PrefillStep().ok());
  EXPECT_FALSE(l.DeferDecode());  // two still wait, but decode waited once already
  ASSERT_TRUE(l.DecodeStep().ok());
  ASSERT_TRUE(l.PrefillStep().ok());
  EXPECT_FALSE(l.DeferDecode());  // all in
  ASSERT_TRUE(l.DecodeStep().ok());
  admit(7);  // 40 tokens in chunks of 16: its first two chunks do not hold decoding up
  EXPECT_EQ(l.prefill_left(), 40);
  ASSERT_TRUE(l.PrefillStep().ok());
  EXPECT_FALSE(l.DeferDecode());
  ASSERT_TRUE(l.DecodeStep().ok());
  ASSERT_TRUE(l.PrefillStep().ok());
  EXPECT_TRUE(l.DeferDecode());  // its last chunk is next
  ASSERT_TRUE(l.PrefillStep().ok());
  EXPECT_EQ(l.prefill_left(), 0);
  while (l.running() > 0) ASSERT_TRUE(l.DecodeStep().ok());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i].tokens, alone[i]) << "request " << i;
}

TEST(BatchLoop, ChoicesShareThePromptsWholeBlocksOnce) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 5);
  auto engine = MakeEngine(m);
  ASSERT_TRUE(engine);
  auto loop = MakeLoop(*engine);
  ASSERT_TRUE(loop);
  // 40 prompt tokens: blocks 0 and 1 are whole and shared; the one holding tokens 32..39 is
  // each choice's own. Each choice's budget is 40 + 10 - 1 positions: 4 blocks, 2 past the prefix.
  EXPECT_EQ(BatchLoop::SharedPositions(40, 3), 32);
  EXPECT_EQ(BatchLoop::SharedPositions(32, 3), 16);  // the last token's block is never shared
  EXPECT_EQ(BatchLoop::SharedPositions(40, 1), 0);
  std::vector<Outcome> out(3);
  SequenceGroup group;
  for (int i = 0; i < 3; ++i)
    group.push_back(std::make_unique<Recorded>(Spec(40, 10, 0.0, 7 + i), out[i]));
  EXPECT_EQ(loop->GroupBlocks(group), 2 + 3 * 2);  // not 3 x 4
  ASSERT_TRUE(loop->TryAdmit(group));
  EXPECT_EQ(loop->reserved_blocks(), 8);
  EXPECT_EQ(loop->running(), 3);
  // The first choice's prompt goes in three chunks (16, 16, 8); the others wait for it.
  for (int chunk = 0; chunk < 3; ++chunk) ASSERT_TRUE(loop->PrefillStep().ok());
  EXPECT_EQ(engine->blocks_in_use(), 3);
  // Then the other two take the shared blocks and prefill their last 8 tokens, in one step.
  ASSERT_TRUE(loop->has_prefill());
  ASSERT_TRUE(loop->PrefillStep().ok());
  EXPECT_FALSE(loop->has_prefill());
  EXPECT_EQ(loop->counters().prefill_steps, 4);
  EXPECT_EQ(engine->blocks_in_use(), 2 + 3 * 1);  // unshared: 3 x 3
  while (loop->running() > 0) ASSERT_TRUE(loop->DecodeStep().ok());
  EXPECT_EQ(loop->reserved_blocks(), 0);
  EXPECT_EQ(engine->blocks_in_use(), 0);
  // Greedy: every choice is what the prompt gives alone.
  auto alone = RunGroup(*loop, {Spec(40, 10, 0.0, 7)});
  ASSERT_EQ(alone[0].tokens.size(), 10u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].tokens, alone[0].tokens) << "choice " << i;
    EXPECT_EQ(out[i].reason, FinishReason::kLength);
  }
}

TEST(BatchLoop, SeededChoicesDifferAndRepeat) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 5);
  auto engine = MakeEngine(m);
  ASSERT_TRUE(engine);
  auto loop = MakeLoop(*engine);
  ASSERT_TRUE(loop);
  auto specs = [] {
    std::vector<SequenceSpec> s;
    for (int i = 0; i < 3; ++i) s.push_back(Spec(21, 12, 1.0, 100 + i));
    return s;
  };
  auto first = RunGroup(*loop, specs());
  auto again = RunGroup(*loop, specs());
  auto alone = RunGroup(*loop, {Spec(21, 12, 1.0, 101)});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(first[i].tokens, again[i].tokens) << "choice " << i;
  EXPECT_NE(first[0].tokens, first[1].tokens);
  EXPECT_NE(first[1].tokens, first[2].tokens);
  // A choice samples from its own seed only: choice 1 (seed 101) is that seed's lone run.
  EXPECT_EQ(first[1].tokens, alone[0].tokens);
}

TEST(BatchLoop, GroupWaitsForSlotsAndBlocks) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 5);
  auto engine = MakeEngine(m);
  ASSERT_TRUE(engine);
  auto loop = MakeLoop(*engine);
  ASSERT_TRUE(loop);
  std::vector<Outcome> out(5);
  SequenceGroup five;
  for (int i = 0; i < 5; ++i) five.push_back(std::make_unique<Recorded>(Spec(8, 4, 0, i), out[i]));
  EXPECT_FALSE(loop->TryAdmit(five));  // 4 slots
  EXPECT_EQ(five.size(), 5u);
  EXPECT_EQ(loop->running(), 0);
  EXPECT_EQ(loop->reserved_blocks(), 0);
}

TEST(BatchLoop, EngineShareRefusesPartialBlocks) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 5);
  auto engine = MakeEngine(m);
  ASSERT_TRUE(engine);
  ASSERT_TRUE(engine->Reserve(2, 64).ok());
  generate::PrefillRow row{0, Prompt(20), {}, 0};
  ASSERT_TRUE(engine->Prefill(std::vector<generate::PrefillRow>{row}).ok());
  EXPECT_FALSE(engine->Share(0, 1, 8).ok());             // not a whole block
  EXPECT_FALSE(engine->Share(0, 1, 32).ok());            // past what slot 0 holds
  EXPECT_FALSE(engine->Share(0, 0, kKvBlockSize).ok());  // the same slot
  ASSERT_TRUE(engine->Share(0, 1, kKvBlockSize).ok());
  EXPECT_EQ(engine->blocks_in_use(), 2);  // slot 0's two blocks; slot 1 holds the first too
  EXPECT_EQ(engine->slot_length(1), kKvBlockSize);
  engine->Release(0);
  EXPECT_EQ(engine->blocks_in_use(), 1);  // the shared block stays with slot 1
  engine->Release(1);
  EXPECT_EQ(engine->blocks_in_use(), 0);
}

}  // namespace
}  // namespace tlaloc
