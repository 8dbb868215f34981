// The engine under every generation front end: a model's weights uploaded once to a Backend,
// a slot-indexed KV cache kept on the device, and step programs over the slots. Requests own
// slots; a prefill starts sequences in the slots it names without touching the others, and a
// decode step advances any set of active slots, each row with its own position, sampling
// settings and seed. Sampling settings are program inputs, so one compiled program serves any
// mix of requests, and a row's tokens do not depend on what else runs in the batch.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <vector>

#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/models/family.h"
#include "tlaloc/runtime/backend.h"

namespace tlaloc::generate {

// One sequence's sampling settings and the seed of its key.
struct RowSampling {
  nn::SamplingParams params;
  uint64_t seed = 0;
};

struct PrefillRow {
  int64_t slot = 0;
  std::vector<int32_t> prompt;  // starts the slot's sequence at position 0
  RowSampling sampling;         // the first token is drawn with step 0
};

struct DecodeRow {
  int64_t slot = 0;
  int32_t token = 0;     // the sequence's latest token
  int32_t position = 0;  // where it goes (the sequence's length so far)
  RowSampling sampling;
  uint32_t step = 0;  // the sequence's draw counter: 1 for its first decode step, then 2, ...
};

// The next token and the logits it was drawn from, one row per request row, in order.
struct EngineStep {
  std::vector<int32_t> tokens;
  Literal logits;  // f32 [rows, V]
};

class Engine {
 public:
  // `weights` in the family's WeightSpecs order, each of `dtype`, uploaded to `backend` (null:
  // the in-process interpreter).
  static StatusOr<std::unique_ptr<Engine>> Create(io::ModelConfig config,
                                                  std::vector<Literal> weights, ElementType dtype,
                                                  std::shared_ptr<Backend> backend = nullptr);

  const io::ModelConfig& config() const { return config_; }
  const models::ModelFamily& family() const { return *family_; }
  ElementType dtype() const { return dtype_; }
  Backend& backend() const { return *backend_; }

  // Sizes the KV cache for `num_slots` sequences of up to `max_len` positions. An unchanged size
  // keeps the cache and its sequences; another drops them and allocates a zeroed cache.
  Status Reserve(int64_t num_slots, int64_t max_len);
  int64_t num_slots() const { return num_slots_; }
  int64_t max_len() const { return max_len_; }
  // Positions the slot's sequence holds (0 when unused).
  int64_t slot_length(int64_t slot) const { return lengths_.at(slot); }

  // Starts one sequence per row (distinct slots); other slots keep theirs.
  StatusOr<EngineStep> Prefill(std::span<const PrefillRow> rows);
  // One decode step for the given slots (distinct); the others stay as they are.
  StatusOr<EngineStep> Decode(std::span<const DecodeRow> rows);

  // Ids at or past `n` are never produced (0: no limit). Changing it drops compiled programs.
  void set_sample_vocab(int64_t n);
  int64_t sample_vocab() const { return sample_vocab_; }
  // A sampled row draws among at most this many of its most likely ids.
  void set_max_candidates(int64_t n);

  // Rewrites each program after it is built and before it is compiled, given its layers' op
  // ranges (e.g. kernels::Kernelizer::Apply). Set before the first step.
  using ProgramTransform =
      std::function<Status(std::shared_ptr<Module> module, const nn::LayerTrace& trace)>;
  void set_program_transform(ProgramTransform transform) {
    program_transform_ = std::move(transform);
  }

  // The KV caches on the device, in the programs' order (k_cache.0, v_cache.0, ...).
  const std::vector<std::unique_ptr<DeviceBuffer>>& caches() const { return caches_; }
  size_t num_compiled_programs() const { return programs_.size(); }
  double compile_seconds() const { return compile_seconds_; }

  // Prefill chunk for a prompt length (powers of two from 16, capped by the cache length).
  int64_t PromptBucket(int64_t len) const;

 private:
  Engine() = default;
  struct Program {
    std::unique_ptr<CompiledProgram> compiled;
    models::ProgramSignature signature;
  };
  StatusOr<Program*> GetProgram(const models::StepShape& shape);
  // Binds the per-step inputs by port, runs with the weights kept and the caches donated, and
  // downloads the tokens and logits of `rows` (indices into the program's batch).
  StatusOr<EngineStep> Run(Program& program, std::map<models::Port, Literal> step_inputs,
                           const std::vector<int64_t>& rows);
  Status CheckSlot(int64_t slot, std::vector<bool>& seen) const;
  // The step program shape for the current cache and sampling limits.
  models::StepShape StepShapeFor(models::StepKind kind, int64_t batch, int64_t prompt_len) const;

  // Declared first so that it outlives every buffer and program below.
  std::shared_ptr<Backend> backend_;
  io::ModelConfig config_;
  const models::ModelFamily* family_ = nullptr;
  ElementType dtype_ = ElementType::kF32;
  std::vector<std::unique_ptr<DeviceBuffer>> weights_;
  std::vector<std::unique_ptr<DeviceBuffer>> caches_;
  int64_t num_slots_ = 0, max_len_ = 0;
  std::vector<int64_t> lengths_;
  using ProgramKey = std::tuple<models::StepKind, int64_t, int64_t, int64_t, int64_t>;
  std::map<ProgramKey, Program> programs_;
  double compile_seconds_ = 0;
  ProgramTransform program_transform_;
  int64_t sample_vocab_ = 0;
  int64_t max_candidates_ = nn::kDefaultMaxCandidates;
};

}  // namespace tlaloc::generate
