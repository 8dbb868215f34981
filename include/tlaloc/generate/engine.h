// The engine under every generation front end: a model's weights uploaded once to a Backend,
// a paged KV cache kept on the device, and step programs over the sequences. The cache is a pool
// of fixed-size blocks (kKvBlockSize positions); each sequence lives in a slot whose block table
// names its blocks, so cache memory in use grows with live tokens, not slots x context. A prefill
// starts (or continues, chunk by chunk) sequences in the slots it names without touching the
// others, and a decode step advances any set of slots, each row with its own position, sampling
// settings and seed. Block tables, sampling settings and seeds are program inputs: programs are
// compiled per bucket of rows, chunk length and blocks attended (powers of two), so a step costs
// what its live tokens need, and a row's tokens do not depend on what else runs in the batch.
//
// Tensor parallel (a mesh of one `model` axis, the `tp` plan of shard/plan.h): every device holds
// its part of the weights (its attention and KV heads, its MLP columns) and a KV pool of its KV
// heads, and runs the same step program, built for its part with one all_reduce after each
// row-parallel product; every device then holds the same logits and draws the same tokens.
// A MoE layer's experts are split over the devices (E / N each; every device routes over all
// E and sums its slice's share in the same all_reduce), and an int8 checkpoint's block scales
// go with their rows or column blocks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/sharding.h"
#include "tlaloc/models/family.h"
#include "tlaloc/runtime/backend.h"

namespace tlaloc::generate {

struct TensorParallelLayout;

// One sequence's sampling settings and the seed of its key.
struct RowSampling {
  nn::SamplingParams params;
  uint64_t seed = 0;
};

// Positions per KV-cache block.
inline constexpr int64_t kKvBlockSize = 16;

struct PrefillRow {
  int64_t slot = 0;
  std::vector<int32_t> prompt;  // the chunk of prompt tokens, written from `start`
  RowSampling sampling;         // the first token is drawn with step 0
  // 0: starts a new sequence in the slot (its old one, if any, is dropped); otherwise the slot's
  // length: the chunk continues its sequence (the token drawn matters after the last chunk).
  int64_t start = 0;
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
  // the in-process interpreter). `tensor_parallel`: a mesh of one `model` axis whose devices
  // (the backend's first ones) split the weights and the KV cache; refused by name when the
  // heads, KV heads or intermediate size do not divide by it, or the backend lacks the devices.
  static StatusOr<std::unique_ptr<Engine>> Create(io::ModelConfig config,
                                                  std::vector<Literal> weights, ElementType dtype,
                                                  std::shared_ptr<Backend> backend = nullptr,
                                                  std::optional<Mesh> tensor_parallel = {});

  const io::ModelConfig& config() const { return config_; }
  // The config each device's programs are built for: config() with the heads, KV heads and
  // intermediate size divided by the mesh (config() itself on one device).
  const io::ModelConfig& device_config() const { return device_config_; }
  const std::optional<Mesh>& mesh() const { return mesh_; }
  // Devices the engine runs on (the mesh's, or 1), and the first of them this process holds
  // (where results are read).
  int num_devices() const { return static_cast<int>(weights_.size()); }
  int home_device() const { return home_device_; }
  // Bytes of weights and of KV pools resident on `device` (0 for a device another process holds).
  int64_t weight_bytes(int device) const;
  int64_t cache_bytes(int device) const;
  const models::ModelFamily& family() const { return *family_; }
  ElementType dtype() const { return dtype_; }
  Backend& backend() const { return *backend_; }
  // The KV cache's type: dtype() unless set. An f32 engine may keep a bf16 cache (half the bytes
  // held and read per decode step; keys, values and queries rounded to bf16 in attention, as
  // llama.cpp's default f16 cache rounds them). A change drops the cache and its sequences and
  // the compiled programs; another type is refused (InvalidArgument naming both).
  ElementType kv_dtype() const { return kv_dtype_.value_or(dtype_); }
  Status SetKvDtype(ElementType type);

  // Sizes the KV cache for `num_slots` sequences of up to `max_len` positions sharing a pool of
  // `num_blocks` blocks (0: enough for every slot at max_len). An unchanged size keeps the cache
  // and its sequences; another drops them and allocates a zeroed pool. The memory budget is
  // checked for the pool.
  Status Reserve(int64_t num_slots, int64_t max_len, int64_t num_blocks = 0);
  int64_t num_slots() const { return num_slots_; }
  int64_t max_len() const { return max_len_; }
  // Positions the slot's sequence holds (0 when unused).
  int64_t slot_length(int64_t slot) const { return lengths_.at(slot); }
  // Ends the slot's sequence and returns its blocks to the pool (a block shared with another
  // slot's sequence stays with that one).
  void Release(int64_t slot);
  // Starts `dst`'s sequence (its old one dropped) as the first `positions` positions of `src`'s,
  // sharing their blocks rather than copying them: `positions` is a whole number of blocks, so
  // both go on writing only blocks of their own. A shared block counts once in the pool and goes
  // back when the last sequence holding it is released.
  Status Share(int64_t src, int64_t dst, int64_t positions);

  // The block pool: blocks for `positions` positions, the pool's size, blocks held by sequences,
  // and the bytes one block takes across every layer's keys and values (on each device: its KV
  // heads').
  static int64_t BlocksFor(int64_t positions) {
    return (positions + kKvBlockSize - 1) / kKvBlockSize;
  }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t blocks_in_use() const { return num_blocks_ - static_cast<int64_t>(free_.size()); }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t block_bytes() const;

  // Starts or continues one sequence per row (distinct slots); other slots keep theirs. Blocks are
  // taken from the pool as sequences grow; ResourceExhausted (nothing changed) when it is short.
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

  // The KV block pools on the home device (or `device`), in the programs' order (k_cache.0,
  // v_cache.0, ...).
  const std::vector<std::unique_ptr<DeviceBuffer>>& caches() const { return caches_[home_device_]; }
  const std::vector<std::unique_ptr<DeviceBuffer>>& device_caches(int device) const {
    return caches_.at(device);
  }
  // The weights `device` holds (its parts under a mesh), in WeightSpecs order.
  const std::vector<std::unique_ptr<DeviceBuffer>>& device_weights(int device) const {
    return weights_.at(device);
  }
  size_t num_compiled_programs() const { return programs_.size(); }
  double compile_seconds() const { return compile_seconds_; }

  // Prefill chunk for a prompt length (powers of two from 4, capped by the cache length).
  int64_t PromptBucket(int64_t len) const;
  // Blocks a step attends over for sequences of up to `positions` (powers of two, capped by the
  // blocks of max_len), and the rows of a decode step of `rows` (powers of two up to the slots).
  int64_t TableBucket(int64_t positions) const;
  int64_t RowBucket(int64_t rows) const;

 private:
  Engine() = default;
  struct Program {
    std::unique_ptr<CompiledProgram> compiled;
    models::ProgramSignature signature;
  };
  StatusOr<Program*> GetProgram(const models::StepShape& shape);
  // Binds the per-step inputs by port, runs with the weights kept and the caches donated (on
  // every device), and downloads the tokens and logits of `rows` (indices into the program's
  // batch) from the home device, checking that every device this process holds drew the same.
  StatusOr<EngineStep> Run(Program& program, std::map<models::Port, Literal> step_inputs,
                           const std::vector<int64_t>& rows);
  Status CheckSlot(int64_t slot, std::vector<bool>& seen) const;
  // The step program shape for the current cache and sampling limits.
  models::StepShape StepShapeFor(models::StepKind kind, int64_t batch, int64_t prompt_len,
                                 int64_t table_blocks, bool penalties = false) const;
  // Takes blocks from the pool so that each (slot, positions) pair's sequence can hold that many
  // positions; takes none and fails when the pool is short.
  Status Grow(const std::vector<std::pair<int64_t, int64_t>>& needs);
  // The block-table and write-block inputs of one row: its blocks padded to `table` entries, and
  // the `write` blocks from the one holding `start`.
  void FillTables(int64_t slot, int64_t start, int64_t table, int64_t write,
                  std::vector<int32_t>& table_out, std::vector<int32_t>& write_out) const;
  void DropCache();
  bool HasCache() const { return !caches_[home_device_].empty(); }
  // Splits the weights over the mesh and uploads each device's part.
  Status UploadTensorParallel(std::vector<Literal> weights);
  // Tells the backend which uploaded weights are int8 matrices with their scales
  // (Backend::PrepareInt8Weight), so that it lays them out at load, not in the first request.
  void PrepareInt8Weights(const std::vector<models::WeightSpec>& specs);

  // Declared first so that it outlives every buffer and program below.
  std::shared_ptr<Backend> backend_;
  io::ModelConfig config_, device_config_;
  std::optional<Mesh> mesh_;
  // With mesh_: the plan, each device's config and weight shapes (generate/tensor_parallel.h).
  std::shared_ptr<const TensorParallelLayout> layout_;
  int home_device_ = 0;
  const models::ModelFamily* family_ = nullptr;
  ElementType dtype_ = ElementType::kF32;
  std::optional<ElementType> kv_dtype_;  // unset: dtype_
  // [device][weight] and [device][cache]; empty for devices another process holds.
  std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> weights_;
  std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> caches_;
  int64_t num_slots_ = 0, max_len_ = 0, num_blocks_ = 0;
  std::vector<int64_t> lengths_;
  std::vector<std::vector<int32_t>> tables_;  // each slot's blocks, in sequence order
  std::vector<int32_t> free_;                 // blocks no sequence holds
  std::vector<int32_t> refs_;                 // sequences holding each block (Share)
  // Each slot's token history (prompt, then generated), position-indexed, and where its prompt
  // ends: the penalties of its rows are computed from it.
  std::vector<std::vector<int32_t>> history_;
  std::vector<int64_t> prompt_ends_;
  // Fills the penalty inputs of a step whose rows `slots` (one per program row, -1: padding) have
  // `params`, when any row is penalised (returns whether it did); a row's token constraint is
  // caught up with its slot's generated tokens and its refused ids biased down.
  StatusOr<bool> AddPenalties(const std::vector<int64_t>& slots,
                              const std::vector<const nn::SamplingParams*>& params,
                              std::map<models::Port, Literal>& in) const;
  using ProgramKey = std::tuple<models::StepKind, int64_t, int64_t, int64_t, int64_t, bool>;
  std::map<ProgramKey, Program> programs_;
  double compile_seconds_ = 0;
  ProgramTransform program_transform_;
  int64_t sample_vocab_ = 0;
  int64_t max_candidates_ = nn::kDefaultMaxCandidates;
};

}  // namespace tlaloc::generate
