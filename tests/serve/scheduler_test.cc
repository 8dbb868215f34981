// The scheduler on a tiny random model over the byte-level tokenizer: concurrent greedy
// requests of different lengths each give what they give alone and what TextGenerator::Run
// (`tlaloc generate`) gives, a prompt longer than the prefill chunk is continued through decode
// steps, a cancelled request frees its slot, a full queue is refused, stop strings and budgets
// finish requests with the right reason and token counts, and a request's n choices share its
// prompt, each sampling with its own seed.
#include "tlaloc/serve/scheduler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "models/qwen3_reference.h"
#include "tlaloc/train/finetune.h"

namespace tlaloc {
namespace {

using serve::RequestStream;
using serve::ScheduledRequest;
using serve::Scheduler;
using serve::SchedulerOptions;
using serve::StreamEvent;

std::unique_ptr<generate::TextGenerator> MakeText(uint32_t seed = 3) {
  io::ModelConfig config = train::DemoModelConfig();
  config.max_position_embeddings = 512;
  testing::RefModel m = testing::RandomModel(config, seed);
  auto gen = generate::Generator::Create(config, m.literals, ElementType::kF32);
  EXPECT_TRUE(gen.ok()) << gen.status().ToString();
  auto tok = Tokenizer::FromJson(train::ByteTokenizerJson());
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  io::GenerationConfig gc;
  return std::make_unique<generate::TextGenerator>(std::move(*gen), std::move(*tok), gc);
}

generate::TextRequest Greedy(const std::string& prompt, int64_t n) {
  generate::TextRequest r;
  r.prompt = prompt;
  r.max_new_tokens = n;
  r.temperature = 0.0;
  r.seed = 1;
  r.max_context = 256;
  return r;
}

struct Done {
  std::vector<int32_t> tokens;
  std::string content, finish_reason, error;
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

// Waits (bounded) for a request to finish and collects its tokens.
Done Collect(RequestStream& s) {
  Done d;
  std::vector<StreamEvent> events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (s.Wait(events, 50)) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "request did not finish in 120 s";
      s.Cancel();
      break;
    }
  }
  for (const auto& e : events)
    if (e.token >= 0) d.tokens.push_back(e.token);
  d.content = s.content();
  d.finish_reason = std::string(generate::FinishReasonName(s.finish_reason()));
  d.error = s.error().ToString();
  d.prompt_tokens = s.prompt_tokens();
  d.completion_tokens = s.completion_tokens();
  return d;
}

std::shared_ptr<RequestStream> Submit(generate::TextGenerator& text, Scheduler& sched,
                                      const generate::TextRequest& r, int logprobs = -1) {
  auto prep = text.Prepare(r);
  EXPECT_TRUE(prep.ok()) << prep.status().ToString();
  ScheduledRequest sr;
  sr.prepared = std::move(*prep);
  sr.stop = r.stop;
  sr.split_reasoning = false;
  sr.top_logprobs = logprobs;
  auto s = sched.Submit(std::move(sr));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : nullptr;
}

SchedulerOptions Options(int64_t batch, int64_t chunk = 256, int64_t queue = 64) {
  SchedulerOptions o;
  o.max_batch = batch;
  o.max_context = 256;
  o.prefill_chunk = chunk;
  o.max_queue = queue;
  return o;
}

const std::vector<std::string> kPrompts = {
    "a",          "hello there", "the quick brown fox",
    "0123456789", "xyz",         "a longer prompt that is longer than the others by far",
    "mid length", "ok"};

TEST(Scheduler, ConcurrentGreedyRequestsGiveWhatTheyGiveAlone) {
  auto text = MakeText();
  // What `tlaloc generate` returns for each prompt: TextGenerator::Run, one request at a time.
  std::vector<std::vector<int32_t>> expected;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    auto r = text->Run(Greedy(kPrompts[i], 6 + static_cast<int64_t>(i)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    expected.push_back(r->generated_ids);
  }
  auto sched = Scheduler::Start(*text, Options(8));
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < kPrompts.size(); ++i)
    streams.push_back(Submit(*text, **sched, Greedy(kPrompts[i], 6 + static_cast<int64_t>(i))));
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    ASSERT_TRUE(streams[i]);
    Done d = Collect(*streams[i]);
    EXPECT_EQ(d.tokens, expected[i]) << "request " << i << " (\"" << kPrompts[i] << "\")";
    EXPECT_EQ(d.completion_tokens, static_cast<int64_t>(d.tokens.size()));
    EXPECT_EQ(d.prompt_tokens, static_cast<int64_t>(kPrompts[i].size()));  // one id per byte
    EXPECT_TRUE(d.finish_reason == "stop" || d.finish_reason == "length")
        << d.finish_reason << " " << d.error;
  }
  // Alone in the same scheduler, one after another: the same tokens.
  for (size_t i : {size_t{1}, size_t{5}}) {
    auto s = Submit(*text, **sched, Greedy(kPrompts[i], 6 + static_cast<int64_t>(i)));
    ASSERT_TRUE(s);
    EXPECT_EQ(Collect(*s).tokens, expected[i]) << "request " << i << " alone";
  }
  const auto st = (*sched)->Stats();
  EXPECT_EQ(st.requests_finished, static_cast<int64_t>(kPrompts.size()) + 2);
  EXPECT_GT(st.decode_rows, st.decode_steps);  // requests really shared decode steps
  EXPECT_EQ(st.running, 0);
}

TEST(Scheduler, SampledRequestsMatchGenerateWithTheSameSeed) {
  auto text = MakeText();
  generate::TextRequest r = Greedy("sampling", 12);
  r.temperature = 1.0;
  r.top_k = 20;
  r.seed = 77;
  auto alone = text->Run(r);
  ASSERT_TRUE(alone.ok());
  auto sched = Scheduler::Start(*text, Options(4));
  ASSERT_TRUE(sched.ok());
  auto other = Submit(*text, **sched, Greedy("another request beside it", 12));
  auto s = Submit(*text, **sched, r);
  ASSERT_TRUE(s && other);
  EXPECT_EQ(Collect(*s).tokens, alone->generated_ids);
  Collect(*other);
}

TEST(Scheduler, LongPromptIsPrefilledInChunks) {
  auto text = MakeText();
  const std::string prompt = "a prompt of more than sixteen bytes, fed in chunks";  // 50 bytes
  auto alone = text->Run(Greedy(prompt, 8));
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  auto sched = Scheduler::Start(*text, Options(2, 16));
  ASSERT_TRUE(sched.ok());
  auto s = Submit(*text, **sched, Greedy(prompt, 8), 3);
  ASSERT_TRUE(s);
  std::vector<StreamEvent> events;
  while (s->Wait(events, 50)) {
  }
  auto st = (*sched)->Stats();
  // Four prefill chunks (16 + 16 + 16 + 2), each continuing the sequence, then the 7 decode
  // steps of the reply (its first token comes from the last chunk).
  EXPECT_EQ(st.prefill_chunks, 4);
  EXPECT_EQ(st.decode_steps, s->completion_tokens() - 1);
  std::vector<int32_t> tokens;
  for (const auto& e : events)
    if (e.token >= 0) tokens.push_back(e.token);
  EXPECT_EQ(tokens, alone->generated_ids);
  sched->reset();
  // The chunked path computes the same distribution as one whole-prompt prefill: the first
  // token's log-probability agrees with the unchunked run's.
  auto whole = Scheduler::Start(*text, Options(2, 256));
  ASSERT_TRUE(whole.ok());
  auto w = Submit(*text, **whole, Greedy(prompt, 8), 3);
  std::vector<StreamEvent> whole_events;
  while (w->Wait(whole_events, 50)) {
  }
  EXPECT_EQ((*whole)->Stats().prefill_chunks, 1);
  ASSERT_FALSE(events.empty());
  ASSERT_FALSE(whole_events.empty());
  ASSERT_TRUE(events[0].chosen && whole_events[0].chosen);
  EXPECT_EQ(events[0].token, whole_events[0].token);
  EXPECT_NEAR(events[0].chosen->logprob, whole_events[0].chosen->logprob, 1e-4);
  ASSERT_EQ(events[0].top.size(), 3u);
  EXPECT_GE(events[0].chosen->logprob, events[0].top[2].logprob);  // greedy picks a top id
  for (size_t i = 1; i < events[0].top.size(); ++i)
    EXPECT_GE(events[0].top[i - 1].logprob, events[0].top[i].logprob);
}

TEST(Scheduler, CancelledRequestFreesItsSlot) {
  auto text = MakeText();
  auto sched = Scheduler::Start(*text, Options(1));
  ASSERT_TRUE(sched.ok());
  generate::TextRequest long_request = Greedy("go on", 200);
  auto first = Submit(*text, **sched, long_request);
  auto second = Submit(*text, **sched, Greedy("next", 4));
  ASSERT_TRUE(first && second);
  std::vector<StreamEvent> events;
  first->Wait(events, 2000);  // it is running
  first->Cancel();
  Done d = Collect(*second);
  EXPECT_TRUE(d.finish_reason == "stop" || d.finish_reason == "length");
  Done f = Collect(*first);
  EXPECT_EQ(f.finish_reason, "cancelled");
  EXPECT_LT(f.completion_tokens, 200);
  EXPECT_EQ((*sched)->Stats().requests_cancelled, 1);
}

TEST(Scheduler, RequestsWaitForKvBlocks) {
  auto text = MakeText();
  auto alone = text->Run(Greedy("hello there", 30));
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  // Four slots but four blocks (64 positions): each request's 11 + 30 positions take three, so
  // one runs at a time and the others wait in the queue.
  SchedulerOptions o = Options(4);
  o.kv_blocks = 4;
  auto sched = Scheduler::Start(*text, o);
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  EXPECT_EQ((*sched)->Stats().kv_blocks_total, 4);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(Submit(*text, **sched, Greedy("hello there", 30)));
  std::vector<std::vector<StreamEvent>> events(streams.size());
  for (bool any = true; any;) {
    any = false;
    for (size_t i = 0; i < streams.size(); ++i) any |= streams[i]->Wait(events[i], 5);
  }
  // The scheduler's own high-water marks: polling the current figures between waits missed
  // every step of a run when this thread was descheduled (a loaded 2-core CI machine).
  const serve::SchedulerStats peaks = (*sched)->Stats();
  EXPECT_EQ(peaks.peak_running, 1);
  EXPECT_EQ(peaks.peak_kv_blocks_reserved, 3);
  EXPECT_GE(peaks.peak_kv_blocks_in_use, 1);
  EXPECT_LE(peaks.peak_kv_blocks_in_use, 3);
  for (size_t i = 0; i < streams.size(); ++i) {
    std::vector<int32_t> tokens;
    for (const auto& e : events[i])
      if (e.token >= 0) tokens.push_back(e.token);
    EXPECT_EQ(tokens, alone->generated_ids) << "request " << i;
  }
  auto st = (*sched)->Stats();
  EXPECT_EQ(st.kv_blocks_in_use, 0);
  EXPECT_EQ(st.kv_blocks_reserved, 0);
  // A prompt the whole pool cannot hold is refused at once, naming the pool.
  auto prep = text->Prepare(Greedy(std::string(70, 'x'), 4));
  ASSERT_TRUE(prep.ok());
  ScheduledRequest big;
  big.prepared = std::move(*prep);
  auto refused = (*sched)->Submit(std::move(big));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("KV cache holds 64 positions"), std::string::npos)
      << refused.status().ToString();
}

TEST(Scheduler, BurstAtAnIdleServerPrefillsTogether) {
  auto text = MakeText();
  SchedulerOptions o = Options(4);
  o.burst_wait_us = 200'000;  // long enough that the gaps below never close the wait
  auto sched = Scheduler::Start(*text, o);
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  // Three short prompts (one prefill step's rows hold them all) 20 ms apart, each gap far longer
  // than the tiny model's prefill: without the wait the first would prefill alone at once.
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const char* prompt : {"a", "xyz", "ok"}) {
    if (!streams.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    streams.push_back(Submit(*text, **sched, Greedy(prompt, 4)));
    ASSERT_TRUE(streams.back());
  }
  for (auto& s : streams) {
    const Done d = Collect(*s);
    EXPECT_TRUE(d.finish_reason == "stop" || d.finish_reason == "length") << d.error;
  }
  EXPECT_EQ((*sched)->Stats().prefill_chunks, 1);

  o.burst_wait_us = -1;
  auto refused = Scheduler::Start(*text, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("burst wait -1"), std::string::npos)
      << refused.status().message();
}

TEST(Scheduler, FullQueueIsRefused) {
  auto text = MakeText();
  auto sched = Scheduler::Start(*text, Options(1, 256, 1));
  ASSERT_TRUE(sched.ok());
  std::vector<std::shared_ptr<RequestStream>> accepted;
  int refused = 0;
  for (int i = 0; i < 4; ++i) {
    auto prep = text->Prepare(Greedy("busy", 100));
    ASSERT_TRUE(prep.ok());
    ScheduledRequest sr;
    sr.prepared = std::move(*prep);
    auto s = (*sched)->Submit(std::move(sr));
    if (s.ok()) {
      accepted.push_back(*s);
    } else {
      EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted) << s.status().ToString();
      ++refused;
    }
  }
  EXPECT_GE(refused, 1);
  EXPECT_LE(accepted.size(), 3u);
  for (auto& s : accepted) s->Cancel();
  for (auto& s : accepted) Collect(*s);
  EXPECT_GE((*sched)->Stats().requests_rejected, 1);
}

TEST(Scheduler, StopStringAndBudgetFinishRequests) {
  auto text = MakeText();
  auto free_run = text->Run(Greedy("stop test", 24));
  ASSERT_TRUE(free_run.ok());
  auto sched = Scheduler::Start(*text, Options(2));
  ASSERT_TRUE(sched.ok());
  auto budget = Submit(*text, **sched, Greedy("stop test", 5));
  Done b = Collect(*budget);
  if (b.finish_reason == "length") {
    EXPECT_EQ(b.completion_tokens, 5);
  }
  // A stop string taken from the free run's reply, so it is known to occur.
  const std::string& reply = free_run->content;
  if (reply.size() >= 6) {
    generate::TextRequest r = Greedy("stop test", 24);
    r.stop = {reply.substr(reply.size() / 2, 2)};
    auto s = Submit(*text, **sched, r);
    Done d = Collect(*s);
    EXPECT_EQ(d.finish_reason, "stop");
    EXPECT_EQ(d.content.find(r.stop[0]), std::string::npos);
    EXPECT_EQ(reply.rfind(d.content, 0), 0u) << "the stopped reply is a prefix of the free one";
  }
}

TEST(Scheduler, DrainRefusesNewRequests) {
  auto text = MakeText();
  auto sched = Scheduler::Start(*text, Options(2));
  ASSERT_TRUE(sched.ok());
  auto running = Submit(*text, **sched, Greedy("drain", 10));
  std::thread drain([&] { (*sched)->Drain(); });
  Done d = Collect(*running);
  drain.join();
  EXPECT_TRUE(d.finish_reason == "stop" || d.finish_reason == "length");
  auto prep = text->Prepare(Greedy("late", 4));
  ASSERT_TRUE(prep.ok());
  ScheduledRequest sr;
  sr.prepared = std::move(*prep);
  auto late = (*sched)->Submit(std::move(sr));
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
}

// Each choice's tokens, by the index its events carry.
std::vector<std::vector<int32_t>> CollectChoices(RequestStream& s) {
  std::vector<StreamEvent> events;
  while (s.Wait(events, 50)) {
  }
  std::vector<std::vector<int32_t>> tokens(s.choices());
  for (const auto& e : events)
    if (e.token >= 0) tokens.at(e.choice).push_back(e.token);
  return tokens;
}

std::shared_ptr<RequestStream> SubmitChoices(generate::TextGenerator& text, Scheduler& sched,
                                             const generate::TextRequest& r, int64_t n) {
  auto prep = text.Prepare(r);
  EXPECT_TRUE(prep.ok()) << prep.status().ToString();
  ScheduledRequest sr;
  sr.prepared = std::move(*prep);
  sr.split_reasoning = false;
  sr.n = n;
  auto s = sched.Submit(std::move(sr));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : nullptr;
}

TEST(Scheduler, ChoicesShareThePromptAndSampleWithTheirOwnSeeds) {
  auto text = MakeText();
  auto sched = Scheduler::Start(*text, Options(4));
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  const std::string prompt = "a prompt of more than sixteen bytes";  // 35 bytes: 2 shared blocks
  // Greedy: three choices, each what one choice gives.
  auto one = SubmitChoices(*text, **sched, Greedy(prompt, 8), 1);
  ASSERT_TRUE(one);
  const auto alone = CollectChoices(*one);
  ASSERT_EQ(alone.size(), 1u);
  auto three = SubmitChoices(*text, **sched, Greedy(prompt, 8), 3);
  ASSERT_TRUE(three);
  const auto greedy = CollectChoices(*three);
  ASSERT_EQ(greedy.size(), 3u);
  int64_t total = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(greedy[i], alone[0]) << "choice " << i;
    EXPECT_NE(three->finish_reason(i), generate::FinishReason::kError);
    total += static_cast<int64_t>(greedy[i].size());
  }
  // Usage: the prompt once, the completions of every choice.
  EXPECT_EQ(three->prompt_tokens(), static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(three->completion_tokens(), total);
  // Sampled with a seed: the choices differ, the same request repeats them, and choice 0 is the
  // one-choice request with that seed (choice i samples with seed + i).
  generate::TextRequest r = Greedy(prompt, 12);
  r.temperature = 1.0;
  r.seed = 42;
  const auto first = CollectChoices(*SubmitChoices(*text, **sched, r, 3));
  const auto again = CollectChoices(*SubmitChoices(*text, **sched, r, 3));
  const auto seed42 = CollectChoices(*SubmitChoices(*text, **sched, r, 1));
  r.seed = 43;
  const auto seed43 = CollectChoices(*SubmitChoices(*text, **sched, r, 1));
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first, again);
  EXPECT_NE(first[0], first[1]);
  EXPECT_NE(first[1], first[2]);
  EXPECT_EQ(first[0], seed42[0]);
  EXPECT_EQ(first[1], seed43[0]);
  const auto st = (*sched)->Stats();
  EXPECT_EQ(st.requests_finished, 6);
  EXPECT_EQ(st.kv_blocks_in_use, 0);
  EXPECT_EQ(st.kv_blocks_reserved, 0);
  // More choices than slots can never run: refused at once.
  auto prep = text->Prepare(Greedy(prompt, 4));
  ASSERT_TRUE(prep.ok());
  ScheduledRequest wide;
  wide.prepared = std::move(*prep);
  wide.n = 5;
  auto refused = (*sched)->Submit(std::move(wide));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tlaloc
