// The serving side of the batch loop: the queue, the thread, the streams and the stats; admission,
// the steps and the KV block ledger are generate::BatchLoop's.
#include "tlaloc/serve/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <queue>

namespace tlaloc::serve {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const std::vector<double>& LatencyBounds() {
  static const std::vector<double> bounds{0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                          1,    2.5,   5,    10,  30,   120};
  return bounds;
}

void Observe(std::vector<int64_t>& counts, double& sum, int64_t& total, double seconds) {
  ++total;
  const auto& bounds = LatencyBounds();
  for (size_t i = 0; i < bounds.size(); ++i)
    if (seconds <= bounds[i]) ++counts[i];
  sum += seconds;
}

// The chosen token's log-probability and the `top` most likely ids' among the first `vocab`.
void Logprobs(const Tokenizer& tok, const float* logits, int64_t vocab, int32_t chosen, int top,
              StreamEvent& event) {
  float max = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double log_z = max + std::log(sum);
  auto entry = [&](int32_t id) {
    TokenLogprob t;
    t.id = id;
    auto bytes = tok.IdToBytes(id);
    t.token = bytes.ok() ? *bytes : "";
    t.logprob = id < vocab ? static_cast<double>(logits[id]) - log_z : -INFINITY;
    return t;
  };
  event.chosen = entry(chosen);
  // A min-heap of the best `top` ids: no sort of the whole vocabulary.
  using Item = std::pair<float, int32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  for (int64_t i = 0; i < vocab && top > 0; ++i) {
    if (static_cast<int>(heap.size()) < top) {
      heap.push({logits[i], static_cast<int32_t>(i)});
    } else if (logits[i] > heap.top().first) {
      heap.pop();
      heap.push({logits[i], static_cast<int32_t>(i)});
    }
  }
  std::vector<Item> items;
  for (; !heap.empty(); heap.pop()) items.push_back(heap.top());
  for (auto it = items.rbegin(); it != items.rend(); ++it) event.top.push_back(entry(it->second));
}

}  // namespace

bool RequestStream::Wait(std::vector<StreamEvent>& out, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
               [&] { return finished_ || !events_.empty(); });
  const bool got = !events_.empty();
  while (!events_.empty()) {
    out.push_back(std::move(events_.front()));
    events_.pop_front();
  }
  return got || !finished_;
}

void RequestStream::Push(StreamEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

generate::FinishReason RequestStream::finish_reason(int64_t choice) const {
  return error_.ok() ? choices_.at(choice).finish_reason : generate::FinishReason::kError;
}

void RequestStream::FinishChoice(int64_t choice, generate::FinishReason reason, Status error,
                                 int64_t completion_tokens, std::string content,
                                 std::string reasoning) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Choice& c = choices_.at(choice);
    c.finish_reason = reason;
    c.content = std::move(content);
    c.reasoning = std::move(reasoning);
    completion_tokens_ += completion_tokens;
    if (reason == generate::FinishReason::kError && error_.ok())
      error_ = error.ok() ? Internal("generation failed") : std::move(error);
    finished_ = ++choices_done_ == static_cast<int64_t>(choices_.size());
  }
  cv_.notify_all();
}

// A request's state shared by its choices.
struct Scheduler::Request {
  ScheduledRequest req;
  std::shared_ptr<RequestStream> stream;
  double submitted_at = 0;
  bool first_token = true;                                       // no choice drew yet
  int64_t left = 1;                                              // choices not finished
  generate::FinishReason worst = generate::FinishReason::kNone;  // what /metrics counts
};

// One choice of a request: the batch loop's sequence, its text splitter and its stream.
class Scheduler::Active : public generate::Sequence {
 public:
  Active(Scheduler& sched, std::shared_ptr<Request> request, int64_t choice,
         generate::SequenceSpec spec)
      : Sequence(std::move(spec)), sched_(sched), request_(std::move(request)), index_(choice) {
    on_text_ = [this](generate::TextPart part, std::string_view text) {
      (part == generate::TextPart::kReasoning ? pending_.reasoning : pending_.content) += text;
    };
    splitter_ = std::make_unique<generate::ReplySplitter>(
        sched_.text_.tokenizer(), sched_.text_.think_open(), sched_.text_.think_close(),
        request_->req.stop, on_text_, result_, request_->req.split_reasoning);
  }
  Request& request() { return *request_; }
  int64_t index() const { return index_; }
  generate::TextResult& result() { return result_; }
  StreamEvent& pending() { return pending_; }
  generate::ReplySplitter& splitter() { return *splitter_; }
  bool decode_failed() const { return decode_failed_; }

 protected:
  generate::FinishReason OnToken(int32_t token, const float* logits, int64_t vocab) override {
    Request& r = *request_;
    {
      std::lock_guard<std::mutex> lock(sched_.mu_);
      if (r.first_token) {
        r.first_token = false;
        r.stream->first_token_s_ = Now() - r.submitted_at;
        Observe(sched_.stats_.ttft_counts, sched_.stats_.ttft_sum, sched_.stats_.ttft_total,
                r.stream->first_token_s_);
      }
      ++sched_.stats_.generated_tokens;
    }
    pending_ = StreamEvent();
    pending_.choice = index_;
    pending_.token = token;
    if (r.req.top_logprobs >= 0) {
      const int64_t sample_vocab = sched_.engine_.sample_vocab();
      Logprobs(sched_.text_.tokenizer(), logits,
               sample_vocab > 0 ? std::min(sample_vocab, vocab) : vocab, token, r.req.top_logprobs,
               pending_);
    }
    if (!decode_failed_ && !splitter_->Push(token)) decode_failed_ = true;
    if (decode_failed_) return generate::FinishReason::kError;
    return splitter_->stopped() ? generate::FinishReason::kStop : generate::FinishReason::kNone;
  }
  void OnContinue() override {
    request_->stream->Push(std::move(pending_));
    pending_ = StreamEvent();
  }
  void OnFinish(const Status& error) override {
    sched_.ChoiceFinished(*this, finish_reason(),
                          decode_failed_ && error.ok() ? result_.error : error);
  }
  bool Cancelled() const override { return request_->stream->cancelled(); }

 private:
  Scheduler& sched_;
  std::shared_ptr<Request> request_;
  int64_t index_;
  generate::TextResult result_;  // the splitter's content and reasoning
  generate::TextCallback on_text_;
  std::unique_ptr<generate::ReplySplitter> splitter_;
  StreamEvent pending_;  // text the current token made final
  bool decode_failed_ = false;
};

Scheduler::Scheduler(generate::TextGenerator& text, SchedulerOptions options)
    : text_(text), engine_(text.generator().engine()), options_(options) {}

StatusOr<std::unique_ptr<Scheduler>> Scheduler::Start(generate::TextGenerator& text,
                                                      SchedulerOptions options) {
  const int64_t model_context = text.generator().config().max_position_embeddings;
  if (options.max_context == 0) options.max_context = std::min<int64_t>(model_context, 4096);
  if (options.max_batch < 1 || options.max_batch > 256)
    return InvalidArgument("max batch " + std::to_string(options.max_batch) +
                           ": expected 1..256 requests");
  if (options.max_context < 2 || options.max_context > model_context)
    return InvalidArgument("max context " + std::to_string(options.max_context) + ": expected 2.." +
                           std::to_string(model_context) +
                           " (the model's max_position_embeddings)");
  if (options.max_queue < 0)
    return InvalidArgument("max queue " + std::to_string(options.max_queue) + ": expected >= 0");
  if (options.burst_wait_us < 0 || options.burst_wait_us > 1'000'000)
    return InvalidArgument("burst wait " + std::to_string(options.burst_wait_us) +
                           " us: expected 0 to 1,000,000");
  if (options.prefill_chunk < 1)
    return InvalidArgument("prefill chunk " + std::to_string(options.prefill_chunk) +
                           ": expected >= 1 token");
  if (options.kv_blocks < 0)
    return InvalidArgument("KV blocks " + std::to_string(options.kv_blocks) +
                           ": expected a positive number (0: max batch x max context)");
  if (options.kv_blocks == 0)
    options.kv_blocks = options.max_batch * generate::Engine::BlocksFor(options.max_context);
  std::unique_ptr<Scheduler> s(new Scheduler(text, options));
  generate::BatchLoopOptions loop;
  loop.max_batch = options.max_batch;
  loop.max_context = options.max_context;
  loop.kv_blocks = options.kv_blocks;
  loop.prefill_chunk = options.prefill_chunk;
  // Waiting prompts prefill together (a burst of requests gets its first tokens after one or two
  // steps, not one step each), up to 64 padded rows a step: no longer than a 64-token chunk holds
  // the running sequences up, and within the rows whose bf16 products run on the small-M kernel
  // (cpu/matmul_small_m.h), which a prompt prefilled alone also takes, so a prompt's logits do
  // not depend on the others in its step. A longer chunk still goes alone.
  loop.prefill_prompts = 0;
  loop.prefill_rows = 64;
  TL_ASSIGN_OR_RETURN(s->loop_, generate::BatchLoop::Create(s->engine_, loop));
  s->stats_.max_batch = options.max_batch;
  s->stats_.max_context = options.max_context;
  s->stats_.kv_blocks_total = options.kv_blocks;
  s->stats_.kv_block_size = generate::kKvBlockSize;
  s->stats_.kv_block_bytes = s->engine_.block_bytes();
  s->stats_.latency_bounds = LatencyBounds();
  s->stats_.ttft_counts.assign(LatencyBounds().size(), 0);
  s->stats_.duration_counts.assign(LatencyBounds().size(), 0);
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

Scheduler::~Scheduler() {
  Drain();
  stop_.store(true);
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

StatusOr<std::shared_ptr<RequestStream>> Scheduler::Submit(ScheduledRequest request) {
  const int64_t prompt_len = static_cast<int64_t>(request.prepared.prompt_ids.size());
  if (prompt_len < 1 || prompt_len >= options_.max_context)
    return InvalidArgument("the prompt has " + std::to_string(prompt_len) +
                           " tokens and a slot holds " + std::to_string(options_.max_context) +
                           ": no room for a reply");
  if (request.prepared.max_new_tokens < 1) return InvalidArgument("max_tokens must be at least 1");
  const int64_t n = request.n;
  if (n < 1 || n > options_.max_batch)
    return InvalidArgument("n is " + std::to_string(n) + ": expected 1.." +
                           std::to_string(options_.max_batch) +
                           " (each choice takes one of the server's --max-batch slots)");
  // The positions one choice can hold when the pool is split between the n choices (sharing the
  // prompt's whole blocks); a request that cannot fit the pool alone never could.
  const int64_t shared =
      generate::BatchLoop::SharedPositions(prompt_len, n) / generate::kKvBlockSize;
  const int64_t pool = (shared + (options_.kv_blocks - shared) / n) * generate::kKvBlockSize;
  if (prompt_len >= pool)
    return InvalidArgument("the prompt has " + std::to_string(prompt_len) +
                           " tokens and the KV cache holds " + std::to_string(pool) + " positions" +
                           (n > 1 ? " per choice for " + std::to_string(n) : "") + " (" +
                           std::to_string(options_.kv_blocks) + " blocks of " +
                           std::to_string(generate::kKvBlockSize) + "): no room for a reply");
  auto r = std::make_shared<Request>();
  r->req = std::move(request);
  r->req.prepared.max_new_tokens = std::min(
      {r->req.prepared.max_new_tokens, options_.max_context - prompt_len, pool - prompt_len});
  r->stream = std::make_shared<RequestStream>();
  r->stream->prompt_tokens_ = prompt_len;
  r->stream->choices_.resize(n);
  r->submitted_at = Now();
  r->left = n;
  generate::SequenceGroup group;
  for (int64_t i = 0; i < n; ++i) {
    const generate::PreparedRequest& p = r->req.prepared;
    generate::SequenceSpec spec;
    spec.prompt = p.prompt_ids;
    spec.sampling = {p.sampling, p.seed + static_cast<uint64_t>(i)};
    if (i > 0 && spec.sampling.params.constraint)  // each choice follows its own reply
      spec.sampling.params.constraint = spec.sampling.params.constraint->Restarted();
    spec.max_new_tokens = p.max_new_tokens;
    spec.context = options_.max_context;
    spec.eos_token_ids = p.eos_token_ids;
    group.push_back(std::make_unique<Active>(*this, r, i, std::move(spec)));
  }
  std::shared_ptr<RequestStream> stream = r->stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_.load()) {
      ++stats_.requests_rejected;
      return Status(StatusCode::kUnavailable,
                    "the server is shutting down and takes no new requests");
    }
    if (static_cast<int64_t>(queue_.size()) >= options_.max_queue) {
      ++stats_.requests_rejected;
      return ResourceExhausted("too many requests: " + std::to_string(queue_.size()) +
                               " are waiting for one of " + std::to_string(options_.max_batch) +
                               " slots (the queue holds " + std::to_string(options_.max_queue) +
                               ")");
    }
    queue_.push_back(std::move(group));
    stats_.waiting = static_cast<int64_t>(queue_.size());
  }
  cv_.notify_all();
  return stream;
}

void Scheduler::Drain() {
  draining_.store(true);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty() && stats_.running == 0) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

SchedulerStats Scheduler::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Scheduler::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_.load() || !queue_.empty() || stats_.running > 0; });
      if (stop_.load() && queue_.empty() && stats_.running == 0) return;
      if (stats_.running == 0) AwaitBurst(lock);
    }
    Step();
  }
}

void Scheduler::AwaitBurst(std::unique_lock<std::mutex>& lock) {
  // Clients of a burst (a batch job's workers, a benchmark's) send within a millisecond or two of
  // each other; prefilling the first on its own would hold the rest up for a whole step (about
  // 35 ms for Qwen3-0.6B on two cores) and leave one chunk more. 16 requests at once
  // (bench/serve_bench.py, qwen3-0.6b bf16, 2 threads, Zen 5, three alternated rounds): 3
  // prefill chunks -> 2, time to first token p50 260-357 -> 153-224 ms, p90 429-529 -> 271-356
  // ms, 171-192 -> 175-196 tokens/s; one request at a time: p50 38-40 -> 38-42 ms.
  const auto quiet = std::chrono::microseconds(options_.burst_wait_us);
  if (quiet.count() <= 0) return;
  const auto deadline = std::chrono::steady_clock::now() + 4 * quiet;
  size_t seen = queue_.size();
  while (!stop_.load() && seen < static_cast<size_t>(options_.max_batch) &&
         std::chrono::steady_clock::now() < deadline) {
    cv_.wait_for(lock, quiet);
    if (queue_.size() <= seen) return;  // quiet for a whole wait (or the queue was taken)
    seen = queue_.size();
  }
}

void Scheduler::Admit() {
  for (auto it = queue_.begin(); it != queue_.end();) {
    Active& first = static_cast<Active&>(*it->front());
    if (first.request().stream->cancelled()) {
      FinishQueued(first.request(), generate::FinishReason::kCancelled);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  // Queued requests take free slots in arrival order, each once the pool's unpromised blocks
  // cover its budget (the first in line waits for blocks rather than being overtaken, so no
  // request starves).
  while (!queue_.empty() && loop_->TryAdmit(queue_.front())) {
    queue_.pop_front();
    ++stats_.running;
  }
  stats_.waiting = static_cast<int64_t>(queue_.size());
  // An admitted request's blocks are promised now: the stats say so with its running count.
  stats_.peak_running = std::max(stats_.peak_running, stats_.running);
  CopyKvUse();
}

bool Scheduler::Step() {
  // Requests whose client went away leave now, before any compute is spent on them.
  loop_->RetireCancelled();
  {
    std::lock_guard<std::mutex> lock(mu_);
    Admit();
  }
  // One prefill step: the waiting prompts' next chunks, first arrived first (BatchLoop).
  const bool prefill = loop_->has_prefill();
  if (prefill) {
    Status s = loop_->PrefillStep();
    if (!s.ok()) {
      loop_->FailAll(s);
      return true;
    }
  }
  if (prefill) {
    // Requests that arrived during the prefill step (the rest of a burst whose first request
    // started it) are admitted now, so that they count as waiting prompts below.
    std::lock_guard<std::mutex> lock(mu_);
    Admit();
  }
  // A burst of requests that outgrows one prefill step gets its first tokens before the running
  // sequences' next decode step (BatchLoop::DeferDecode).
  const bool defer = prefill && loop_->DeferDecode();
  const bool decode = !defer && loop_->has_decode();
  if (decode) {
    Status s = loop_->DecodeStep();
    if (!s.ok()) loop_->FailAll(s);
  }
  std::lock_guard<std::mutex> lock(mu_);
  CopyCounters();
  stats_.kv_slots_in_use = loop_->running();
  stats_.kv_tokens_in_use = loop_->tokens_in_use();
  CopyKvUse();
  return prefill || decode;
}

void Scheduler::CopyCounters() {
  const generate::BatchLoopCounters& c = loop_->counters();
  stats_.prefill_chunks = c.prefill_steps;
  stats_.decode_steps = c.decode_steps;
  stats_.decode_rows = c.decode_rows;
}

void Scheduler::CopyKvUse() {
  stats_.kv_blocks_in_use = engine_.blocks_in_use();
  stats_.kv_blocks_reserved = loop_->reserved_blocks();
  stats_.peak_kv_blocks_in_use = std::max(stats_.peak_kv_blocks_in_use, stats_.kv_blocks_in_use);
  stats_.peak_kv_blocks_reserved =
      std::max(stats_.peak_kv_blocks_reserved, stats_.kv_blocks_reserved);
}

void Scheduler::CountFinished(Request& r, generate::FinishReason reason) {
  ++stats_.requests_finished;
  if (reason == generate::FinishReason::kStop) ++stats_.requests_stop;
  if (reason == generate::FinishReason::kLength) ++stats_.requests_length;
  if (reason == generate::FinishReason::kCancelled) ++stats_.requests_cancelled;
  if (reason == generate::FinishReason::kError) ++stats_.requests_error;
  (void)r;
}

void Scheduler::FinishQueued(Request& r, generate::FinishReason reason) {
  CountFinished(r, reason);
  for (int64_t i = 0; i < r.stream->choices(); ++i)
    r.stream->FinishChoice(i, reason, OkStatus(), 0, "", "");
}

void Scheduler::ChoiceFinished(Active& a, generate::FinishReason reason, Status error) {
  using generate::FinishReason;
  Request& r = a.request();
  // The rest of the text (held back for a stop string, an unfinished character) goes out with
  // the last token's event.
  if (reason != FinishReason::kCancelled) a.splitter().Finish();
  StreamEvent& pending = a.pending();
  if (pending.token >= 0 || !pending.content.empty() || !pending.reasoning.empty()) {
    pending.choice = a.index();
    r.stream->Push(std::move(pending));
  }
  // What /metrics counts for a request of several choices: an error or a cancellation if any
  // choice had one, else the first choice's reason.
  if (r.worst == FinishReason::kNone || reason == FinishReason::kError ||
      (reason == FinishReason::kCancelled && r.worst != FinishReason::kError))
    r.worst = reason;
  const bool last = --r.left == 0;
  {
    // The blocks are already back (BatchLoop), so the stats the client reads next agree.
    std::lock_guard<std::mutex> lock(mu_);
    CopyKvUse();
    CopyCounters();
    if (last) {
      CountFinished(r, r.worst);
      stats_.prompt_tokens += static_cast<int64_t>(r.req.prepared.prompt_ids.size());
      Observe(stats_.duration_counts, stats_.duration_sum, stats_.duration_total,
              Now() - r.submitted_at);
      --stats_.running;
    }
  }
  r.stream->FinishChoice(a.index(), reason, std::move(error),
                         static_cast<int64_t>(a.generated().size()), a.result().content,
                         a.result().reasoning);
}

}  // namespace tlaloc::serve
