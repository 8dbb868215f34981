// Continuous batching over the engine's slots and KV blocks: requests wait in a bounded queue
// and the batch loop (generate/batch_loop.h, the same loop `tlaloc generate` runs) admits them at
// a decode-step boundary once a slot is free and the block pool can hold their whole budget
// (prompt plus max_tokens, within the context); they leave the step they finish (end token, stop
// string, budget, or the client going away), returning their blocks. One thread owns the engine;
// every loop it runs at most one prefill chunk of one request and then one decode step over
// every request whose prompt is in, so a prompt holds running requests up for one chunk at most,
// and a long prompt is prefilled chunk by chunk between decode steps (each chunk continues the
// sequence over its blocks). A request of n choices takes n slots; its prompt is prefilled once
// and its KV blocks shared (BatchLoop). Sampling settings and seeds are per-row inputs of the
// step programs: no request compiles anything its shape bucket has not already compiled.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tlaloc/generate/batch_loop.h"
#include "tlaloc/generate/text_generation.h"
#include "tlaloc/support/status.h"

namespace tlaloc::serve {

struct SchedulerOptions {
  int64_t max_batch = 4;        // KV slots: requests decoded together
  int64_t max_context = 0;      // positions per slot (0: min(model's, 4096))
  int64_t max_queue = 64;       // requests waiting for a slot before new ones are refused
  int64_t prefill_chunk = 256;  // prompt tokens prefilled in one step
  // KV blocks of generate::kKvBlockSize positions shared by every request (0: enough for
  // max_batch requests of max_context).
  int64_t kv_blocks = 0;
  // An idle server, given a request, waits until none has arrived for this long (at most four
  // times it in all, or until max_batch are waiting) before prefilling, so that a burst of
  // requests prefills together rather than its first alone; 0 starts at once.
  int64_t burst_wait_us = 2000;
};

// One alternative at a token position: id, its text and its log-probability.
struct TokenLogprob {
  int32_t id = 0;
  std::string token;
  double logprob = 0;
};

// What one step added to one choice of a request.
struct StreamEvent {
  int64_t choice = 0;              // which of the request's n choices
  std::string content, reasoning;  // text that became final (either may be empty)
  int32_t token = -1;
  std::optional<TokenLogprob> chosen;  // with `top`, when logprobs were asked for
  std::vector<TokenLogprob> top;
};

// A request as the scheduler takes it: already rendered and checked (TextGenerator::Prepare).
struct ScheduledRequest {
  generate::PreparedRequest prepared;
  std::vector<std::string> stop;
  bool split_reasoning = true;  // route <think>...</think> to reasoning (chat requests)
  int top_logprobs = -1;        // -1: no logprobs; 0..20: the chosen token and this many others
  // Choices (OpenAI's `n`): each samples with seed prepared.seed + its index, so choice 0 is
  // what a request of one choice with that seed gives.
  int64_t n = 1;
};

// The scheduler's side of one request, shared with the thread that answers the client.
class RequestStream {
 public:
  // Waits up to `timeout_ms` for events; moves them to `out`. False once finished and drained.
  bool Wait(std::vector<StreamEvent>& out, int timeout_ms);
  // Asks the scheduler to drop the request (its slots are freed at the next step boundary).
  void Cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  int64_t choices() const { return static_cast<int64_t>(choices_.size()); }

  // Valid once Wait returned false. finish_reason and error: kError when a choice failed (the
  // first error), else the choice's reason; content and reasoning per choice.
  generate::FinishReason finish_reason(int64_t choice = 0) const;
  const Status& error() const { return error_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }          // once, however many choices
  int64_t completion_tokens() const { return completion_tokens_; }  // all choices
  const std::string& content(int64_t choice = 0) const { return choices_.at(choice).content; }
  const std::string& reasoning(int64_t choice = 0) const { return choices_.at(choice).reasoning; }
  double seconds_to_first_token() const { return first_token_s_; }

 private:
  friend class Scheduler;
  struct Choice {
    generate::FinishReason finish_reason = generate::FinishReason::kNone;
    std::string content, reasoning;
  };
  void Push(StreamEvent event);
  // Records a choice's end; the stream finishes with its last choice.
  void FinishChoice(int64_t choice, generate::FinishReason reason, Status error,
                    int64_t completion_tokens, std::string content, std::string reasoning);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  bool finished_ = false;
  std::atomic<bool> cancelled_{false};
  std::vector<Choice> choices_ = std::vector<Choice>(1);
  int64_t choices_done_ = 0;
  Status error_;
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  double first_token_s_ = 0;
};

// Counters for /metrics (a consistent snapshot).
struct SchedulerStats {
  int64_t max_batch = 0, max_context = 0;
  int64_t running = 0, waiting = 0;
  int64_t kv_slots_in_use = 0, kv_tokens_in_use = 0;
  // Blocks of kv_block_size positions: held by sequences, promised to running requests' budgets,
  // and in the pool; the bytes one block takes over every layer's keys and values.
  int64_t kv_blocks_in_use = 0, kv_blocks_reserved = 0, kv_blocks_total = 0;
  // High-water marks of running, kv_blocks_in_use and kv_blocks_reserved since Start: what a
  // reader polling the figures above between steps may miss.
  int64_t peak_running = 0, peak_kv_blocks_in_use = 0, peak_kv_blocks_reserved = 0;
  int64_t kv_block_size = 0, kv_block_bytes = 0;
  int64_t requests_finished = 0, requests_stop = 0, requests_length = 0;
  int64_t requests_cancelled = 0, requests_error = 0, requests_rejected = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  int64_t decode_steps = 0, decode_rows = 0, prefill_chunks = 0;
  // Latency histograms: upper bounds in seconds, cumulative counts, sums.
  std::vector<double> latency_bounds;
  std::vector<int64_t> ttft_counts, duration_counts;
  double ttft_sum = 0, duration_sum = 0;
  int64_t ttft_total = 0, duration_total = 0;
};

class Scheduler {
 public:
  // Sizes the engine's KV cache (max_batch slots of up to max_context positions sharing
  // kv_blocks blocks) and starts the loop thread.
  static StatusOr<std::unique_ptr<Scheduler>> Start(generate::TextGenerator& text,
                                                    SchedulerOptions options);
  ~Scheduler();  // drains (as Drain) and joins the loop
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const SchedulerOptions& options() const { return options_; }
  // Queues a request. ResourceExhausted when the queue is full, Unavailable while draining,
  // InvalidArgument when the prompt does not fit a slot or the whole block pool, or its n choices
  // need more slots than there are. max_tokens is capped by what the context and the pool hold.
  StatusOr<std::shared_ptr<RequestStream>> Submit(ScheduledRequest request);
  // Refuses new requests from now on and returns once every queued and running one finished.
  void Drain();
  bool draining() const { return draining_.load(); }
  SchedulerStats Stats() const;

 private:
  struct Request;
  class Active;
  Scheduler(generate::TextGenerator& text, SchedulerOptions options);
  void Loop();
  // One iteration: admit, one prefill step, admit again (requests that arrived during it), one
  // decode step (unless BatchLoop::DeferDecode). False when there is nothing to do.
  bool Step();
  // With nothing running and a request queued: waits, `lock` (on mu_) released meanwhile, while
  // more requests keep arriving (SchedulerOptions::burst_wait_us).
  void AwaitBurst(std::unique_lock<std::mutex>& lock);
  // Drops cancelled queued requests and admits queued ones while slots and blocks allow (mu_
  // held; between steps).
  void Admit();
  // A choice ended (called by its Active, its blocks already back): the request's stream and the
  // stats hear of it; the request ends with its last choice.
  void ChoiceFinished(Active& a, generate::FinishReason reason, Status error);
  // A queued request that never ran (cancelled while waiting).
  void FinishQueued(Request& r, generate::FinishReason reason);
  void CountFinished(Request& r, generate::FinishReason reason);  // mu_ held
  // The loop's step counters into stats_ (mu_ held), before a client can hear of the step.
  void CopyCounters();
  // The KV blocks in use and promised into stats_, with the high-water marks (mu_ held).
  void CopyKvUse();

  generate::TextGenerator& text_;
  generate::Engine& engine_;
  SchedulerOptions options_;
  std::unique_ptr<generate::BatchLoop> loop_;  // loop thread only (after Start)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<generate::SequenceGroup> queue_;  // guarded by mu_: one group per request
  std::atomic<bool> draining_{false}, stop_{false};
  SchedulerStats stats_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tlaloc::serve
