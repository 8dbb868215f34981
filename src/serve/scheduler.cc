// The continuous-batching loop: admission at step boundaries, one prefill chunk per loop, one
// decode step over every running request, retirement the step a request finishes.
#include "tlaloc/serve/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
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

// TLALOC_TEST_FAIL_DECODE_STEP=N: the process's N-th decode step fails, as a device error would,
// so that tests reach the path of a request that fails after admission. 0 (unset): never.
int64_t FailingDecodeStep() {
  static const int64_t step = [] {
    const char* env = std::getenv("TLALOC_TEST_FAIL_DECODE_STEP");
    return env ? std::atoll(env) : 0;
  }();
  return step;
}

void Observe(std::vector<int64_t>& counts, double& sum, int64_t& total, double seconds) {
  ++total;
  const auto& bounds = LatencyBounds();
  for (size_t i = 0; i < bounds.size(); ++i)
    if (seconds <= bounds[i]) ++counts[i];
  sum += seconds;
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

void RequestStream::Finish(std::string reason, Status error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    finish_reason_ = std::move(reason);
    error_ = std::move(error);
    finished_ = true;
  }
  cv_.notify_all();
}

struct Scheduler::Active {
  ScheduledRequest req;
  std::shared_ptr<RequestStream> stream;
  generate::TextResult result;  // the splitter's content and reasoning
  generate::TextCallback on_text;
  std::unique_ptr<generate::ReplySplitter> splitter;
  StreamEvent pending;  // text the current token made final
  int64_t slot = -1;
  int64_t fed = 0;     // prompt tokens in the cache
  int64_t blocks = 0;  // KV blocks its prompt and budget can take

  std::vector<int32_t> generated;
  double submitted_at = 0;
  bool decode_failed = false;

  int64_t prompt_len() const { return static_cast<int64_t>(req.prepared.prompt_ids.size()); }
  generate::RowSampling sampling() const { return {req.prepared.sampling, req.prepared.seed}; }
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
  if (options.prefill_chunk < 1)
    return InvalidArgument("prefill chunk " + std::to_string(options.prefill_chunk) +
                           ": expected >= 1 token");
  if (options.kv_blocks < 0)
    return InvalidArgument("KV blocks " + std::to_string(options.kv_blocks) +
                           ": expected a positive number (0: max batch x max context)");
  if (options.kv_blocks == 0)
    options.kv_blocks = options.max_batch * generate::Engine::BlocksFor(options.max_context);
  std::unique_ptr<Scheduler> s(new Scheduler(text, options));
  TL_RETURN_IF_ERROR(s->engine_.Reserve(options.max_batch, options.max_context, options.kv_blocks));
  s->slots_.resize(options.max_batch);
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
  // The whole pool holds this many positions; a request that cannot fit it alone never could.
  const int64_t pool = options_.kv_blocks * generate::kKvBlockSize;
  if (prompt_len >= pool)
    return InvalidArgument("the prompt has " + std::to_string(prompt_len) +
                           " tokens and the KV cache holds " + std::to_string(pool) +
                           " positions (" + std::to_string(options_.kv_blocks) + " blocks of " +
                           std::to_string(generate::kKvBlockSize) + "): no room for a reply");
  auto a = std::make_unique<Active>();
  a->req = std::move(request);
  a->req.prepared.max_new_tokens = std::min(
      {a->req.prepared.max_new_tokens, options_.max_context - prompt_len, pool - prompt_len});
  // The last token drawn is never written to the cache.
  a->blocks = generate::Engine::BlocksFor(prompt_len + a->req.prepared.max_new_tokens - 1);
  a->stream = std::make_shared<RequestStream>();
  a->stream->prompt_tokens_ = prompt_len;
  a->submitted_at = Now();
  std::shared_ptr<RequestStream> stream = a->stream;
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
    queue_.push_back(std::move(a));
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
    }
    Step();
  }
}

bool Scheduler::Step() {
  // Requests whose client went away leave now, before any compute is spent on them.
  for (auto& a : slots_)
    if (a && a->stream->cancelled()) Retire(*a, "cancelled");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->stream->cancelled()) {
        (*it)->stream->Finish("cancelled", OkStatus());
        ++stats_.requests_cancelled;
        ++stats_.requests_finished;
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    // Admission at the step boundary: queued requests take free slots in arrival order, each
    // once the pool's unpromised blocks cover its budget (the first in line waits for blocks
    // rather than being overtaken, so no request starves).
    for (size_t s = 0; s < slots_.size() && !queue_.empty(); ++s) {
      if (slots_[s]) continue;
      if (reserved_blocks_ + queue_.front()->blocks > options_.kv_blocks) break;
      reserved_blocks_ += queue_.front()->blocks;
      slots_[s] = std::move(queue_.front());
      queue_.pop_front();
      slots_[s]->slot = static_cast<int64_t>(s);
      ++stats_.running;
    }
    stats_.waiting = static_cast<int64_t>(queue_.size());
  }
  // One prefill chunk: the request that arrived first among those whose prompt is not all in.
  Active* next = nullptr;
  for (auto& a : slots_)
    if (a && a->fed < a->prompt_len() && (!next || a->submitted_at < next->submitted_at))
      next = a.get();
  if (next) {
    Status s = PrefillChunk(*next);
    if (!s.ok()) {
      FailAll(s);
      return true;
    }
  }
  bool any_decoding = false;
  for (auto& a : slots_) any_decoding |= a && a->fed == a->prompt_len();
  if (any_decoding) {
    Status s = DecodeStep();
    if (!s.ok()) FailAll(s);
  }
  std::lock_guard<std::mutex> lock(mu_);
  int64_t tokens = 0;
  for (auto& a : slots_)
    if (a) tokens += a->fed + static_cast<int64_t>(a->generated.size());
  stats_.kv_slots_in_use = stats_.running;
  stats_.kv_tokens_in_use = tokens;
  stats_.kv_blocks_in_use = engine_.blocks_in_use();
  stats_.kv_blocks_reserved = reserved_blocks_;
  return next || any_decoding;
}

Status Scheduler::PrefillChunk(Active& a) {
  if (a.fed == 0) {
    a.on_text = [&a](generate::TextPart part, std::string_view text) {
      (part == generate::TextPart::kReasoning ? a.pending.reasoning : a.pending.content) += text;
    };
    a.splitter = std::make_unique<generate::ReplySplitter>(
        text_.tokenizer(), text_.think_open(), text_.think_close(), a.req.stop, a.on_text, a.result,
        a.req.split_reasoning);
  }
  // The next chunk continues the sequence where the last one ended.
  const auto& prompt = a.req.prepared.prompt_ids;
  const int64_t chunk = std::min(a.prompt_len() - a.fed, options_.prefill_chunk);
  generate::PrefillRow row;
  row.slot = a.slot;
  row.start = a.fed;
  row.prompt.assign(prompt.begin() + a.fed, prompt.begin() + a.fed + chunk);
  row.sampling = a.sampling();
  TL_ASSIGN_OR_RETURN(generate::EngineStep step,
                      engine_.Prefill(std::span<const generate::PrefillRow>(&row, 1)));
  a.fed += chunk;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.prefill_chunks;
  }
  // Only the last chunk's draw is the reply's first token.
  if (a.fed == a.prompt_len())
    Accept(a, step.tokens[0], step.logits.span<float>().data(), step.logits.dims()[1]);
  return OkStatus();
}

Status Scheduler::DecodeStep() {
  std::vector<generate::DecodeRow> rows;
  std::vector<Active*> owners;
  for (auto& p : slots_) {
    if (!p || p->fed < p->prompt_len() || p->generated.empty()) continue;
    Active& a = *p;
    generate::DecodeRow row;
    row.slot = a.slot;
    row.token = a.generated.back();
    row.position = static_cast<int32_t>(a.prompt_len() + a.generated.size() - 1);
    row.sampling = a.sampling();
    row.step = static_cast<uint32_t>(a.generated.size());
    rows.push_back(row);
    owners.push_back(&a);
  }
  if (rows.empty()) return OkStatus();
  if (FailingDecodeStep() > 0 && ++test_decode_steps_ == FailingDecodeStep())
    return Internal("decode step " + std::to_string(test_decode_steps_) +
                    " failed (injected by TLALOC_TEST_FAIL_DECODE_STEP)");
  TL_ASSIGN_OR_RETURN(generate::EngineStep step, engine_.Decode(rows));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.decode_steps;
    stats_.decode_rows += static_cast<int64_t>(rows.size());
  }
  const int64_t vocab = step.logits.dims()[1];
  const float* logits = step.logits.span<float>().data();
  for (size_t i = 0; i < owners.size(); ++i)
    Accept(*owners[i], step.tokens[i], logits + i * vocab, vocab);
  return OkStatus();
}

namespace {

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

bool Scheduler::Accept(Active& a, int32_t token, const float* logits, int64_t vocab) {
  const double now = Now();
  if (a.generated.empty()) {
    a.stream->first_token_s_ = now - a.submitted_at;
    std::lock_guard<std::mutex> lock(mu_);
    Observe(stats_.ttft_counts, stats_.ttft_sum, stats_.ttft_total, a.stream->first_token_s_);
  }
  a.generated.push_back(token);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.generated_tokens;
  }
  a.pending = StreamEvent();
  a.pending.token = token;
  if (a.req.top_logprobs >= 0) {
    const int64_t sample_vocab = engine_.sample_vocab();
    Logprobs(text_.tokenizer(), logits, sample_vocab > 0 ? std::min(sample_vocab, vocab) : vocab,
             token, a.req.top_logprobs, a.pending);
  }
  if (!a.decode_failed && !a.splitter->Push(token)) a.decode_failed = true;
  const auto& eos = a.req.prepared.eos_token_ids;
  std::string reason;
  if (a.decode_failed)
    reason = "error";
  else if (std::find(eos.begin(), eos.end(), token) != eos.end() || a.splitter->stopped())
    reason = "stop";
  else if (static_cast<int64_t>(a.generated.size()) >= a.req.prepared.max_new_tokens ||
           a.prompt_len() + static_cast<int64_t>(a.generated.size()) >= options_.max_context)
    reason = "length";
  if (reason.empty()) {
    a.stream->Push(std::move(a.pending));
    a.pending = StreamEvent();
    return false;
  }
  Retire(a, reason, a.decode_failed ? a.result.error : OkStatus());
  return true;
}

void Scheduler::Retire(Active& a, const std::string& reason, Status error) {
  // The rest of the text (held back for a stop string, an unfinished character) goes out with
  // the last token's event.
  if (a.splitter && reason != "cancelled") a.splitter->Finish();
  if (a.pending.token >= 0 || !a.pending.content.empty() || !a.pending.reasoning.empty())
    a.stream->Push(std::move(a.pending));
  RequestStream& s = *a.stream;
  s.completion_tokens_ = static_cast<int64_t>(a.generated.size());
  s.content_ = a.result.content;
  s.reasoning_ = a.result.reasoning;
  const double duration = Now() - a.submitted_at;
  // The blocks go back before the client hears of the end, so the stats it reads then agree.
  engine_.Release(a.slot);
  reserved_blocks_ -= a.blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.kv_blocks_in_use = engine_.blocks_in_use();
    stats_.kv_blocks_reserved = reserved_blocks_;
    ++stats_.requests_finished;
    if (reason == "stop") ++stats_.requests_stop;
    if (reason == "length") ++stats_.requests_length;
    if (reason == "cancelled") ++stats_.requests_cancelled;
    if (reason == "error") ++stats_.requests_error;
    stats_.prompt_tokens += a.prompt_len();
    Observe(stats_.duration_counts, stats_.duration_sum, stats_.duration_total, duration);
    --stats_.running;
  }
  s.Finish(reason, std::move(error));
  slots_[a.slot].reset();  // destroys `a`
}

void Scheduler::FailAll(const Status& error) {
  for (auto& a : slots_)
    if (a) Retire(*a, "error", error);
  // A failed step drops the engine's cache; later requests get a fresh one.
  Status s = engine_.Reserve(options_.max_batch, options_.max_context, options_.kv_blocks);
  (void)s;
}

}  // namespace tlaloc::serve
