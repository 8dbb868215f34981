// Continuous batching over the engine's slots and KV blocks: requests wait in a bounded queue,
// take a free slot at a decode-step boundary once the block pool can hold their whole budget
// (prompt plus max_tokens, within the context), and leave the step they finish (end token, stop
// string, budget, or the client going away), returning their blocks. One thread owns the engine;
// every loop it runs at most one prefill chunk of one request and then one decode step over
// every request whose prompt is in, so a prompt holds running requests up for one chunk at most,
// and a long prompt is prefilled chunk by chunk between decode steps (each chunk continues the
// sequence over its blocks). Sampling settings and seeds are per-row inputs of the step programs:
// no request compiles anything its shape bucket has not already compiled.
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
};

// One alternative at a token position: id, its text and its log-probability.
struct TokenLogprob {
  int32_t id = 0;
  std::string token;
  double logprob = 0;
};

// What one decode step added to a request.
struct StreamEvent {
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
};

// The scheduler's side of one request, shared with the thread that answers the client.
class RequestStream {
 public:
  // Waits up to `timeout_ms` for events; moves them to `out`. False once finished and drained.
  bool Wait(std::vector<StreamEvent>& out, int timeout_ms);
  // Asks the scheduler to drop the request (its slot is freed at the next step boundary).
  void Cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  // Valid once Wait returned false.
  const std::string& finish_reason() const { return finish_reason_; }  // stop, length, error
  const Status& error() const { return error_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t completion_tokens() const { return completion_tokens_; }
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  double seconds_to_first_token() const { return first_token_s_; }

 private:
  friend class Scheduler;
  void Push(StreamEvent event);
  void Finish(std::string reason, Status error);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  bool finished_ = false;
  std::atomic<bool> cancelled_{false};
  std::string finish_reason_, content_, reasoning_;
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
  // InvalidArgument when the prompt does not fit a slot or the whole block pool. max_tokens is
  // capped by what the context and the pool hold.
  StatusOr<std::shared_ptr<RequestStream>> Submit(ScheduledRequest request);
  // Refuses new requests from now on and returns once every queued and running one finished.
  void Drain();
  bool draining() const { return draining_.load(); }
  SchedulerStats Stats() const;

 private:
  struct Active;
  Scheduler(generate::TextGenerator& text, SchedulerOptions options);
  void Loop();
  // One iteration: admit, one prefill chunk, one decode step. False when there is nothing to do.
  bool Step();
  Status PrefillChunk(Active& a);
  Status DecodeStep();
  // Feeds a sampled token to its request (text, stop strings, budget); true when it finished.
  bool Accept(Active& a, int32_t token, const float* logits, int64_t vocab);
  void Retire(Active& a, const std::string& reason, Status error = OkStatus());
  void FailAll(const Status& error);

  generate::TextGenerator& text_;
  generate::Engine& engine_;
  SchedulerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Active>> queue_;   // guarded by mu_
  std::vector<std::unique_ptr<Active>> slots_;  // loop thread only; null: free
  int64_t reserved_blocks_ = 0;                 // loop thread only: running requests' budgets
  int64_t test_decode_steps_ = 0;               // loop thread only: TLALOC_TEST_FAIL_DECODE_STEP
  std::atomic<bool> draining_{false}, stop_{false};
  SchedulerStats stats_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tlaloc::serve
