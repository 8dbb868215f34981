// The decode loop: a Qwen3 checkpoint's weights uploaded once to a Backend (the interpreter or
// a PJRT plugin), prefill and decode-step programs compiled by that backend and cached by shape
// bucket, and a batch of prompts decoded together, each row with its own positions and mask,
// finishing independently at an end token or the token budget. The KV caches stay on the
// device and are donated to each step, so a step updates them in place instead of copying.
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

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/models/qwen3.h"
#include "tlaloc/runtime/backend.h"

namespace tlaloc::generate {

// Loads the weights a Qwen3 config needs from a checkpoint, checking each name and shape, and
// converting to `dtype` when stored otherwise (a tied head's stored copy is ignored). Returned
// in models::WeightSpecs order; tensors already of `dtype` are zero-copy views of the mapping.
StatusOr<std::vector<Literal>> LoadWeights(const io::ModelConfig& config,
                                           const io::Checkpoint& checkpoint, ElementType dtype);

// A host-side element type conversion (f32 <-> bf16 / f16 fast, others through double).
Literal ConvertLiteral(const Literal& x, ElementType to);

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  nn::SamplingParams sampling;
  uint64_t seed = 0;
  // Generation stops for a row when it produces one of these.
  std::vector<int64_t> eos_token_ids;
  // Fed to finished rows while others still decode.
  int32_t pad_token_id = 0;
  // Asked after each new token of a row (after on_token): true finishes the row with "stop"
  // (a stop string matched, the client went away, the user pressed Ctrl-C).
  std::function<bool(size_t row)> stop_requested;
  // Positions a row may use, prompt included (0: the model's max_position_embeddings; larger
  // values are capped to it).
  int64_t max_context = 0;
};

struct GenerateResult {
  std::vector<int32_t> generated_ids;  // includes the end token when one stopped it
  std::string finish_reason;           // "stop" (end token) or "length"
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
  // (null: the in-process interpreter).
  static StatusOr<std::unique_ptr<Generator>> Create(io::ModelConfig config,
                                                     std::vector<Literal> weights,
                                                     ElementType dtype,
                                                     std::shared_ptr<Backend> backend = nullptr);
  // Reads config.json and the safetensors weights of a Hugging Face folder.
  static StatusOr<std::unique_ptr<Generator>> Load(const std::filesystem::path& dir,
                                                   std::optional<ElementType> dtype = {},
                                                   std::shared_ptr<Backend> backend = nullptr);

  const io::ModelConfig& config() const { return config_; }
  ElementType dtype() const { return dtype_; }
  Backend& backend() const { return *backend_; }

  // Ids at or past `n` are never produced (0: no limit): the LM-head rows past the tokenizer's
  // vocabulary. Dropped programs are rebuilt with the mask.
  void set_sample_vocab(int64_t n);
  int64_t sample_vocab() const { return sample_vocab_; }
  // The context a request may fill: options.max_context capped by max_position_embeddings.
  int64_t ContextLimit(const GenerateOptions& options) const;

  // Rewrites each program right after it is built and before it is compiled, given the op
  // ranges of its layers (e.g. kernels::Kernelizer::Apply). Set before the first step.
  using ProgramTransform =
      std::function<Status(std::shared_ptr<Module> module, const nn::LayerTrace& trace)>;
  void set_program_transform(ProgramTransform transform) {
    program_transform_ = std::move(transform);
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
  // Runs prefill on right-padded prompts in a fresh cache of `max_len` slots.
  StatusOr<StepOutput> Prefill(const std::vector<std::vector<int32_t>>& prompts, int64_t max_len,
                               const nn::SamplingParams& sampling, uint64_t seed);
  // One decode step at `positions` (per row) with the cache left by the last call.
  StatusOr<StepOutput> DecodeStep(const std::vector<int32_t>& tokens,
                                  const std::vector<int32_t>& positions,
                                  const nn::SamplingParams& sampling, uint64_t seed, uint32_t step);

  // The KV caches the last Prefill / DecodeStep left on the device (2 per layer: k, v).
  const std::vector<std::unique_ptr<DeviceBuffer>>& caches() const { return caches_; }
  // Programs compiled so far (one per shape bucket and sampling setting).
  size_t num_compiled_programs() const { return programs_.size(); }

  // Prefill bucket for a prompt length (powers of two from 16) and cache length for a
  // total length (multiples of 64), both capped by max_position_embeddings.
  int64_t PromptBucket(int64_t len) const;
  int64_t CacheBucket(int64_t len) const;

 private:
  Generator() = default;
  StatusOr<CompiledProgram*> GetProgram(bool prefill, const models::ProgramShape& shape);
  // Uploads the per-step inputs, runs `program` with the weights kept and the caches donated,
  // and downloads the sampled tokens and logits; the updated caches stay on the device.
  StatusOr<StepOutput> RunStep(CompiledProgram& program, std::vector<Literal> step_inputs,
                               std::vector<std::unique_ptr<DeviceBuffer>> caches);

  // Declared first so that it outlives every buffer and program below.
  std::shared_ptr<Backend> backend_;
  io::ModelConfig config_;
  ElementType dtype_ = ElementType::kF32;
  std::vector<std::unique_ptr<DeviceBuffer>> weights_;
  // Current KV caches (2 per layer) and their batch / length.
  std::vector<std::unique_ptr<DeviceBuffer>> caches_;
  int64_t cache_batch_ = 0, cache_len_ = 0;
  using ProgramKey = std::tuple<bool, int64_t, int64_t, int64_t, nn::SamplingParams>;
  std::map<ProgramKey, std::unique_ptr<CompiledProgram>> programs_;
  double compile_seconds_ = 0;
  ProgramTransform program_transform_;
  int64_t sample_vocab_ = 0;
};

}  // namespace tlaloc::generate
