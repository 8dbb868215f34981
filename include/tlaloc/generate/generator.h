// The decode loop for a batch of prompts decoded together, each row finishing independently at
// an end token, the token budget or the context: the batch loop (batch_loop.h) run to completion
// over the Engine (engine.h): weights uploaded once, the KV cache on the device and donated to
// every step, programs cached by shape.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tlaloc/generate/engine.h"
#include "tlaloc/generate/sequence.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/runtime/backend.h"

namespace tlaloc::generate {

// The most replies one request may ask for (OpenAI's n).
inline constexpr int64_t kMaxChoices = 128;

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  nn::SamplingParams sampling;
  uint64_t seed = 0;
  // Per-row overrides of `sampling` and `seed` (empty: every row uses those). A row draws from
  // its own seed's key only, so rows with one seed and one prompt sample alike, and a row gives
  // the same tokens alone as in any batch.
  std::vector<nn::SamplingParams> row_sampling;
  std::vector<uint64_t> row_seeds;
  // Generation stops for a row when it produces one of these.
  std::vector<int64_t> eos_token_ids;
  // Asked after each new token of a row (after on_token): true finishes the row with kStop
  // (a stop string matched, the client went away, the user pressed Ctrl-C).
  std::function<bool(size_t row)> stop_requested;
  // Positions a row may use, prompt included (0: the model's max_position_embeddings; larger
  // values are honoured, past the length the model was trained for).
  int64_t max_context = 0;
  // Replies per prompt (OpenAI's n): prompt p's choices are rows p * choices + i, i < choices,
  // and share the prompt's KV blocks; row_sampling and row_seeds then have one entry per row.
  int64_t choices = 1;
};

struct GenerateResult {
  std::vector<int32_t> generated_ids;                // includes the end token when one stopped it
  FinishReason finish_reason = FinishReason::kNone;  // kStop (end token) or kLength
};

struct GenerateTimings {
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double compile_seconds = 0;
  int64_t prefill_tokens = 0;  // real prompt tokens
  int64_t decode_tokens = 0;   // tokens produced by decode steps (all rows)
};

// Called for each new token of each row as it is produced.
using TokenCallback = std::function<void(size_t row, int32_t token)>;

class Generator {
 public:
  // `weights` in models::WeightSpecs(config) order, each of `dtype`, uploaded to `backend`
  // (null: the in-process interpreter); `tensor_parallel` splits them over a `model` mesh
  // (Engine::Create).
  static StatusOr<std::unique_ptr<Generator>> Create(io::ModelConfig config,
                                                     std::vector<Literal> weights,
                                                     ElementType dtype,
                                                     std::shared_ptr<Backend> backend = nullptr,
                                                     std::optional<Mesh> tensor_parallel = {});
  // Reads config.json and the safetensors weights of a Hugging Face folder.
  static StatusOr<std::unique_ptr<Generator>> Load(const std::filesystem::path& dir,
                                                   std::optional<ElementType> dtype = {},
                                                   std::shared_ptr<Backend> backend = nullptr,
                                                   std::optional<Mesh> tensor_parallel = {});

  const io::ModelConfig& config() const { return engine_->config(); }
  ElementType dtype() const { return engine_->dtype(); }
  Backend& backend() const { return engine_->backend(); }
  Engine& engine() { return *engine_; }

  // Ids at or past `n` are never produced (0: no limit): the LM-head rows past the tokenizer's
  // vocabulary. Dropped programs are rebuilt with the mask.
  void set_sample_vocab(int64_t n) { engine_->set_sample_vocab(n); }
  int64_t sample_vocab() const { return engine_->sample_vocab(); }
  // The context a request may fill: options.max_context, else max_position_embeddings.
  int64_t ContextLimit(const GenerateOptions& options) const;

  // Rewrites each program right after it is built and before it is compiled, given the op
  // ranges of its layers (e.g. kernels::Kernelizer::Apply). Set before the first step.
  using ProgramTransform = Engine::ProgramTransform;
  void set_program_transform(ProgramTransform transform) {
    engine_->set_program_transform(std::move(transform));
  }

  StatusOr<std::vector<GenerateResult>> Generate(const std::vector<std::vector<int32_t>>& prompts,
                                                 const GenerateOptions& options,
                                                 const TokenCallback& on_token = {},
                                                 GenerateTimings* timings = nullptr);

  // Program-level access (tests, benchmarks).
  struct StepOutput {
    std::vector<int32_t> tokens;  // [B]
    Literal logits;               // f32 [B, V]
  };
  // Runs prefill on right-padded prompts in a cache of one slot per prompt and `max_len`
  // positions.
  StatusOr<StepOutput> Prefill(const std::vector<std::vector<int32_t>>& prompts, int64_t max_len,
                               const nn::SamplingParams& sampling, uint64_t seed);
  // One decode step of every row at `positions` (per row) with the cache left by the last call.
  StatusOr<StepOutput> DecodeStep(const std::vector<int32_t>& tokens,
                                  const std::vector<int32_t>& positions,
                                  const nn::SamplingParams& sampling, uint64_t seed, uint32_t step);

  // The KV caches the last Prefill / DecodeStep left on the device (2 per layer: k, v).
  const std::vector<std::unique_ptr<DeviceBuffer>>& caches() const { return engine_->caches(); }
  // Programs compiled so far (one per shape bucket; sampling settings are inputs).
  size_t num_compiled_programs() const { return engine_->num_compiled_programs(); }

  // Prefill bucket for a prompt length (powers of two from 16) and cache length for a
  // total length (multiples of 64), both capped by max_position_embeddings.
  int64_t PromptBucket(int64_t len) const;
  int64_t CacheBucket(int64_t len) const;

 private:
  Generator() = default;
  std::unique_ptr<Engine> engine_;
};

}  // namespace tlaloc::generate
