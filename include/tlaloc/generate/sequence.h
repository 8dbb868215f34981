// One sequence's state machine, shared by every front end that drives the Engine (`tlaloc
// generate` through Generator, the server through its Scheduler): a prompt fed chunk by chunk
// into a KV slot, then one drawn token per step until an end token, the budget, the context, or
// its owner (a stop string, a client gone, text that failed to decode) finishes it. Why it ended
// is a FinishReason; FinishReasonName gives the OpenAI API's string for it.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "tlaloc/generate/engine.h"
#include "tlaloc/support/status.h"

namespace tlaloc::generate {

enum class FinishReason {
  kNone,       // still running
  kStop,       // an end token or a stop string
  kLength,     // the token budget or the context is used up
  kCancelled,  // its owner dropped it (a client went away, Ctrl-C)
  kError,      // a step failed, or its text could not be decoded
};

// "stop", "length", "cancelled", "error" (as the OpenAI API and /metrics spell them); "" for kNone.
std::string_view FinishReasonName(FinishReason reason);

struct SequenceSpec {
  std::vector<int32_t> prompt;
  RowSampling sampling;
  int64_t max_new_tokens = 0;
  int64_t context = 0;  // positions it may hold, prompt included
  std::vector<int64_t> eos_token_ids;
};

class BatchLoop;

// The prompt blocks the choices of one prompt share: the first `positions` positions (whole
// blocks), counted once in the ledger and held until the last choice ends.
struct SharedPrefix {
  int64_t positions = 0, blocks = 0;
  int64_t live = 0;  // choices not yet finished
};

// A sequence in a BatchLoop. Its owner subclasses it to hear of its tokens and its end; the loop
// calls the hooks on the thread that runs it.
class Sequence {
 public:
  explicit Sequence(SequenceSpec spec) : spec_(std::move(spec)) {}
  virtual ~Sequence() = default;
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  const SequenceSpec& spec() const { return spec_; }
  int64_t prompt_len() const { return static_cast<int64_t>(spec_.prompt.size()); }
  // Prompt tokens in the cache; the whole prompt is in once the last chunk ran.
  int64_t fed() const { return fed_; }
  bool prompt_in() const { return fed_ == prompt_len(); }
  const std::vector<int32_t>& generated() const { return generated_; }
  // The KV slot it runs in (-1 before admission).
  int64_t slot() const { return slot_; }
  // Which of its prompt's choices it is (0 unless the prompt was forked into several).
  int64_t choice() const { return choice_; }
  FinishReason finish_reason() const { return finish_; }
  bool finished() const { return finish_ != FinishReason::kNone; }
  // KV blocks promised to it past the prefix it shares (BatchLoop's ledger).
  int64_t budget_blocks() const { return budget_blocks_; }

 protected:
  // After each drawn token (with the logits it was drawn from, `vocab` wide): kNone lets the
  // sequence decide (end token, budget, context); another reason finishes it with that reason
  // (kError and kCancelled win over an end token; kStop is a stop like an end token).
  virtual FinishReason OnToken(int32_t /*token*/, const float* /*logits*/, int64_t /*vocab*/) {
    return FinishReason::kNone;
  }
  // After each token it goes on from.
  virtual void OnContinue() {}
  // Once, when it finished (its blocks are already back in the pool); `error` for kError.
  virtual void OnFinish(const Status& /*error*/) {}
  // Polled at each step boundary: true drops it (kCancelled) before any compute is spent on it.
  virtual bool Cancelled() const { return false; }

 private:
  friend class BatchLoop;
  // The row of its next prefill chunk (up to `chunk` tokens; 0: the rest) and of its next decode.
  PrefillRow NextChunk(int64_t chunk) const;
  DecodeRow NextDecode() const;
  // Appends a drawn token and decides whether it finished (kNone: it goes on).
  FinishReason Accept(int32_t token, FinishReason verdict);

  SequenceSpec spec_;
  std::vector<int32_t> generated_;
  FinishReason finish_ = FinishReason::kNone;
  int64_t slot_ = -1, fed_ = 0, order_ = 0, choice_ = 0, budget_blocks_ = 0;
  // A choice past the first shares the first one's prompt blocks: `parent_` until it forked.
  Sequence* parent_ = nullptr;
  std::shared_ptr<SharedPrefix> prefix_;  // null: a prompt of one choice
};

// The choices of one prompt: admitted together, the prompt prefilled once (BatchLoop::TryAdmit).
using SequenceGroup = std::vector<std::unique_ptr<Sequence>>;

}  // namespace tlaloc::generate
