// The batch loop: admission against the KV block budget, prefill and decode steps, retirement.
#include "tlaloc/generate/batch_loop.h"

#include <algorithm>
#include <cstdlib>
#include <set>

namespace tlaloc::generate {

namespace {

// TLALOC_TEST_FAIL_DECODE_STEP=N: a loop's N-th decode step fails, as a device error would, so
// that tests reach the path of a sequence that fails after admission. 0 (unset): never.
int64_t FailingDecodeStep() {
  static const int64_t step = [] {
    const char* env = std::getenv("TLALOC_TEST_FAIL_DECODE_STEP");
    return env ? std::atoll(env) : 0;
  }();
  return step;
}

}  // namespace

StatusOr<std::unique_ptr<BatchLoop>> BatchLoop::Create(Engine& engine, BatchLoopOptions options) {
  if (options.max_batch < 1)
    return InvalidArgument("batch loop of " + std::to_string(options.max_batch) +
                           " slots: expected at least one");
  if (options.kv_blocks == 0)
    options.kv_blocks = options.max_batch * Engine::BlocksFor(options.max_context);
  TL_RETURN_IF_ERROR(engine.Reserve(options.max_batch, options.max_context, options.kv_blocks));
  std::unique_ptr<BatchLoop> loop(new BatchLoop(engine, options));
  loop->slots_.resize(options.max_batch);
  return loop;
}

BatchLoop::~BatchLoop() {
  for (auto& s : slots_)
    if (s) engine_.Release(s->slot_);
}

int64_t BatchLoop::SharedPositions(int64_t prompt_len, int64_t choices) {
  if (choices < 2 || prompt_len < 1) return 0;
  return (prompt_len - 1) / kKvBlockSize * kKvBlockSize;
}

int64_t BatchLoop::BudgetBlocks(const SequenceSpec& spec) const {
  const int64_t prompt = static_cast<int64_t>(spec.prompt.size());
  const int64_t context = std::min(spec.context, options_.max_context);
  const int64_t reply = std::max<int64_t>(1, std::min(spec.max_new_tokens, context - prompt));
  return Engine::BlocksFor(prompt + reply - 1);
}

int64_t BatchLoop::GroupBlocks(const SequenceGroup& group) const {
  if (group.empty()) return 0;
  const int64_t n = static_cast<int64_t>(group.size());
  const int64_t shared = SharedPositions(group[0]->prompt_len(), n) / kKvBlockSize;
  int64_t blocks = shared;
  for (const auto& s : group) blocks += BudgetBlocks(s->spec()) - shared;
  return blocks;
}

bool BatchLoop::TryAdmit(SequenceGroup& group) {
  if (group.empty()) return true;
  const int64_t n = static_cast<int64_t>(group.size());
  std::vector<int64_t> free;
  for (size_t s = 0; s < slots_.size() && static_cast<int64_t>(free.size()) < n; ++s)
    if (!slots_[s]) free.push_back(static_cast<int64_t>(s));
  const int64_t blocks = GroupBlocks(group);
  if (static_cast<int64_t>(free.size()) < n || reserved_blocks_ + blocks > options_.kv_blocks)
    return false;
  reserved_blocks_ += blocks;
  const int64_t shared_positions = SharedPositions(group[0]->prompt_len(), n);
  std::shared_ptr<SharedPrefix> prefix;
  if (shared_positions > 0) {
    prefix = std::make_shared<SharedPrefix>();
    prefix->positions = shared_positions;
    prefix->blocks = shared_positions / kKvBlockSize;
    prefix->live = n;
  }
  Sequence* const first = group[0].get();
  for (int64_t i = 0; i < n; ++i) {
    Sequence& s = *group[i];
    s.slot_ = free[i];
    s.order_ = admitted_++;
    s.choice_ = i;
    s.budget_blocks_ = BudgetBlocks(s.spec()) - (prefix ? prefix->blocks : 0);
    s.prefix_ = prefix;
    // The other choices wait for the first one's prompt, then share its blocks.
    s.parent_ = prefix && i > 0 ? first : nullptr;
    slots_[free[i]] = std::move(group[i]);
    ++running_;
  }
  group.clear();
  return true;
}

void BatchLoop::RetireCancelled() {
  for (auto& s : slots_)
    if (s && s->Cancelled()) Retire(*s, FinishReason::kCancelled);
}

bool BatchLoop::has_prefill() const {
  for (const auto& s : slots_)
    if (s && !s->prompt_in() && !s->parent_) return true;
  return false;
}

bool BatchLoop::has_decode() const {
  for (const auto& s : slots_)
    if (s && s->prompt_in() && !s->generated_.empty()) return true;
  return false;
}

int64_t BatchLoop::prefill_left() const {
  int64_t left = 0;
  for (const auto& s : slots_)
    if (s && !s->prompt_in() && !s->parent_) left = std::max(left, s->prompt_len() - s->fed_);
  return left;
}

bool BatchLoop::DeferDecode() {
  const int64_t left = prefill_left();
  const int64_t chunk = options_.prefill_chunk > 0 ? options_.prefill_chunk : left;
  decode_deferred_ = !decode_deferred_ && left > 0 && left <= chunk && has_decode();
  return decode_deferred_;
}

int64_t BatchLoop::tokens_in_use() const {
  int64_t tokens = 0;
  for (const auto& s : slots_)
    if (s) tokens += s->fed_ + static_cast<int64_t>(s->generated_.size());
  return tokens;
}

Status BatchLoop::PrefillStep() {
  // Prompts not all in (a choice waiting for its first choice's prompt is not one yet), first
  // admitted first; a prompt's forked choices go in the same step.
  std::vector<Sequence*> waiting;
  for (auto& s : slots_)
    if (s && !s->prompt_in() && !s->parent_) waiting.push_back(s.get());
  if (waiting.empty()) return OkStatus();
  std::sort(waiting.begin(), waiting.end(),
            [](const Sequence* a, const Sequence* b) { return a->order_ < b->order_; });
  std::vector<Sequence*> chosen;
  std::set<const void*> prompts;
  int64_t longest = 0;  // the chosen rows' longest chunk
  for (Sequence* s : waiting) {
    const void* key = s->prefix_ ? static_cast<const void*>(s->prefix_.get()) : s;
    const int64_t chunk =
        std::min(s->prompt_len() - s->fed_,
                 options_.prefill_chunk > 0 ? options_.prefill_chunk : s->prompt_len());
    if (!prompts.count(key)) {
      if (options_.prefill_prompts > 0 &&
          static_cast<int64_t>(prompts.size()) >= options_.prefill_prompts)
        continue;
      // The rows this step would compute with this prompt in, its choices counted as they come.
      const int64_t rows =
          static_cast<int64_t>(chosen.size() + 1) * engine_.PromptBucket(std::max(longest, chunk));
      if (options_.prefill_rows > 0 && !chosen.empty() && rows > options_.prefill_rows) continue;
      prompts.insert(key);
    }
    longest = std::max(longest, chunk);
    chosen.push_back(s);
  }
  std::vector<PrefillRow> rows;
  for (Sequence* s : chosen) rows.push_back(s->NextChunk(options_.prefill_chunk));
  TL_ASSIGN_OR_RETURN(EngineStep step, engine_.Prefill(rows));
  ++counters_.prefill_steps;
  for (size_t i = 0; i < chosen.size(); ++i) {
    Sequence& s = *chosen[i];
    s.fed_ += static_cast<int64_t>(rows[i].prompt.size());
    if (!s.prompt_in() || !s.prefix_) continue;
    // The first choice's prompt is in: the others take its whole blocks before the last prompt
    // token's and prefill the rest themselves, before it can finish and release them.
    for (auto& other : slots_) {
      if (!other || other->parent_ != &s) continue;
      TL_RETURN_IF_ERROR(engine_.Share(s.slot_, other->slot_, s.prefix_->positions));
      other->fed_ = s.prefix_->positions;
      other->parent_ = nullptr;
    }
  }
  const int64_t vocab = step.logits.dims()[1];
  const float* logits = step.logits.span<float>().data();
  // Only a prompt's last chunk draws the reply's first token.
  for (size_t i = 0; i < chosen.size(); ++i)
    if (chosen[i]->prompt_in()) Accept(*chosen[i], step.tokens[i], logits + i * vocab, vocab);
  return OkStatus();
}

Status BatchLoop::DecodeStep() {
  std::vector<DecodeRow> rows;
  std::vector<Sequence*> owners;
  for (auto& s : slots_) {
    if (!s || !s->prompt_in() || s->generated_.empty()) continue;
    rows.push_back(s->NextDecode());
    owners.push_back(s.get());
  }
  if (rows.empty()) return OkStatus();
  if (FailingDecodeStep() > 0 && ++decode_steps_seen_ == FailingDecodeStep())
    return Internal("decode step " + std::to_string(decode_steps_seen_) +
                    " failed (injected by TLALOC_TEST_FAIL_DECODE_STEP)");
  TL_ASSIGN_OR_RETURN(EngineStep step, engine_.Decode(rows));
  ++counters_.decode_steps;
  counters_.decode_rows += static_cast<int64_t>(rows.size());
  const int64_t vocab = step.logits.dims()[1];
  const float* logits = step.logits.span<float>().data();
  for (size_t i = 0; i < owners.size(); ++i)
    Accept(*owners[i], step.tokens[i], logits + i * vocab, vocab);
  return OkStatus();
}

void BatchLoop::Accept(Sequence& seq, int32_t token, const float* logits, int64_t vocab) {
  seq.generated_.push_back(token);
  const FinishReason verdict = seq.OnToken(token, logits, vocab);
  const FinishReason reason = seq.Accept(token, verdict);
  if (reason == FinishReason::kNone) {
    seq.OnContinue();
    return;
  }
  Retire(seq, reason);
}

void BatchLoop::Retire(Sequence& seq, FinishReason reason, const Status& error) {
  seq.finish_ = reason;
  // The blocks go back before the owner hears of the end, so the ledger it reads then agrees.
  engine_.Release(seq.slot_);
  reserved_blocks_ -= seq.budget_blocks_;
  std::vector<Sequence*> orphans;
  if (seq.prefix_ && --seq.prefix_->live == 0) reserved_blocks_ -= seq.prefix_->blocks;
  // Choices still waiting for this one's prompt cannot have it any more: they end with it.
  for (auto& other : slots_)
    if (other && other->parent_ == &seq) orphans.push_back(other.get());
  --running_;
  const int64_t slot = seq.slot_;
  std::unique_ptr<Sequence> owned = std::move(slots_[slot]);
  seq.OnFinish(error);
  owned.reset();
  for (Sequence* o : orphans) Retire(*o, reason, error);
}

void BatchLoop::FailAll(const Status& error) {
  for (auto& s : slots_)
    if (s && !s->parent_) Retire(*s, FinishReason::kError, error);
  for (auto& s : slots_)
    if (s) Retire(*s, FinishReason::kError, error);
  // A failed step drops the engine's cache; later sequences get a fresh one.
  Status s = engine_.Reserve(options_.max_batch, options_.max_context, options_.kv_blocks);
  (void)s;
}

}  // namespace tlaloc::generate
