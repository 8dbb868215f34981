// The one batch loop over the Engine: it owns the KV slots and the block budget, admits sequences
// (sequence.h) when a slot is free and the pool's unpromised blocks cover their whole budget
// (prompt plus max_new_tokens, within the context), runs prefill steps (a chunk of one prompt, or
// of every waiting prompt) and decode steps (every sequence whose prompt is in), and retires each
// sequence the step it finishes, returning its blocks. `tlaloc generate` (Generator::Generate)
// runs it synchronously to completion; the server's Scheduler runs it on its thread between
// admissions from its queue.
//
// Choices of one prompt (a SequenceGroup of n > 1, OpenAI's `n`) share the prompt's KV blocks:
// the first choice prefills the prompt; the moment its last chunk is in, every other choice takes
// the prompt's whole blocks before the one holding the last prompt token (Engine::Share, counted
// once in the pool and in the ledger) and prefills only the rest itself (1 to kKvBlockSize
// tokens, in one step for all of them), drawing its first token with its own seed.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tlaloc/generate/engine.h"
#include "tlaloc/generate/sequence.h"

namespace tlaloc::generate {

struct BatchLoopOptions {
  int64_t max_batch = 4;      // KV slots: sequences decoded together
  int64_t max_context = 0;    // positions per slot
  int64_t kv_blocks = 0;      // the pool (0: max_batch x the blocks of max_context)
  int64_t prefill_chunk = 0;  // prompt tokens a row feeds per prefill step (0: the whole prompt)
  // Prompts per prefill step: 1 holds running sequences up for one chunk at most (serving);
  // 0: every prompt waiting, in one step (a batch run to completion).
  int64_t prefill_prompts = 1;
  // Rows per prefill step, prompts x the step's padded chunk length (Engine::PromptBucket): a
  // step takes waiting prompts, first admitted first, while they fit (the first always goes).
  // 0: no limit.
  int64_t prefill_rows = 0;
};

// Steps run so far.
struct BatchLoopCounters {
  int64_t prefill_steps = 0, decode_steps = 0, decode_rows = 0;
};

class BatchLoop {
 public:
  // Sizes the engine's KV cache for the options (Engine::Reserve).
  static StatusOr<std::unique_ptr<BatchLoop>> Create(Engine& engine, BatchLoopOptions options);
  // Sequences still running are dropped (their blocks released, no hooks called).
  ~BatchLoop();
  BatchLoop(const BatchLoop&) = delete;
  BatchLoop& operator=(const BatchLoop&) = delete;

  const BatchLoopOptions& options() const { return options_; }
  Engine& engine() const { return engine_; }

  // Positions the choices of a prompt of `prompt_len` tokens share when there are `choices` of
  // them: the whole blocks before the one holding its last token (0 for one choice).
  static int64_t SharedPositions(int64_t prompt_len, int64_t choices);
  // The blocks a sequence may take for its whole budget (prompt and reply, the last drawn token
  // never written), and a group's: its shared prefix once plus each choice's blocks past it.
  int64_t BudgetBlocks(const SequenceSpec& spec) const;
  int64_t GroupBlocks(const SequenceGroup& group) const;
  // Admits the group (its choices take the lowest free slots, in order) when there are slots for
  // all of them and the pool's unpromised blocks cover GroupBlocks; else leaves it and returns
  // false. A group that could never fit (more choices than slots, more blocks than the pool)
  // never will: check before queueing it.
  bool TryAdmit(SequenceGroup& group);

  // Drops the sequences whose owner cancelled them (kCancelled), before any compute.
  void RetireCancelled();
  // Whether a prompt has tokens not yet in the cache, and whether a sequence is decoding.
  bool has_prefill() const;
  bool has_decode() const;
  // The most prompt tokens a prompt not all in has still to feed (0: none waits).
  int64_t prefill_left() const;
  // Whether the decode step due after the prefill step just run waits for the next prefill step
  // (a serving loop asks once per prefill step): yes when prompts are still waiting, each one
  // chunk from done, sequences are decoding, and the last prefill step did not already defer
  // one. A burst that outgrows one prefill step then gets its first tokens without a decode step
  // in between, and running sequences wait at most one prefill step more for a token.
  bool DeferDecode();
  // One prefill step: the next chunk of the prompt admitted first among those not all in (or of
  // every such prompt, prefill_prompts 0); a prompt's last chunk draws its first token.
  Status PrefillStep();
  // One decode step over every sequence whose prompt is in. TLALOC_TEST_FAIL_DECODE_STEP=N makes
  // this loop's N-th decode step fail, as a device error would (tests of the error path).
  Status DecodeStep();
  // Finishes every running sequence with kError and `error`, and reserves a fresh cache (a
  // failed step drops the engine's).
  void FailAll(const Status& error);

  int64_t running() const { return running_; }
  // Blocks promised to running sequences' budgets (held or not yet taken).
  int64_t reserved_blocks() const { return reserved_blocks_; }
  // Positions running sequences hold (prompt tokens in plus tokens drawn).
  int64_t tokens_in_use() const;
  const BatchLoopCounters& counters() const { return counters_; }

 private:
  BatchLoop(Engine& engine, BatchLoopOptions options) : engine_(engine), options_(options) {}
  // Feeds a drawn token to its sequence; retires it when it finished.
  void Accept(Sequence& seq, int32_t token, const float* logits, int64_t vocab);
  void Retire(Sequence& seq, FinishReason reason, const Status& error = OkStatus());

  Engine& engine_;
  BatchLoopOptions options_;
  std::vector<std::unique_ptr<Sequence>> slots_;  // null: free
  int64_t running_ = 0, reserved_blocks_ = 0, admitted_ = 0, decode_steps_seen_ = 0;
  bool decode_deferred_ = false;  // the last DeferDecode said yes
  BatchLoopCounters counters_;
};

}  // namespace tlaloc::generate
