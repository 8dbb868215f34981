// Training a Qwen3 model: one train-step program (causal forward, cross-entropy loss, backward
// and the AdamW update) compiled once per (batch, seq_len) and run through any Backend, with the
// f32 master weights and the AdamW moments donated and updated in place every step.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/element_type.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/runtime/backend.h"
#include "tlaloc/support/status.h"

namespace tlaloc::train {

// Labels equal to this take no loss (prompt tokens, padding), as in PyTorch's ignore_index.
inline constexpr int32_t kIgnoreLabel = -100;

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // decoupled: w -= lr * weight_decay * w
  double grad_clip_norm = 0;  // clip gradients to this global L2 norm; 0 = off
  int64_t warmup_steps = 0;   // linear warmup from lr/warmup_steps to lr
  int64_t total_steps = 0;    // cosine decay to min_lr_ratio * lr at total_steps; 0 = constant
  double min_lr_ratio = 0.0;
};

// The learning rate AdamW uses at 1-based step `step` (warmup, then cosine decay).
double LearningRateAt(const AdamWConfig& config, int64_t step);

struct TrainOptions {
  AdamWConfig adamw;
  // Type of the forward/backward arithmetic; master weights and moments stay f32.
  ElementType compute_dtype = ElementType::kF32;
  // Tokens per LM-head chunk of the loss (projection + cross-entropy recomputed per chunk in the
  // backward pass); 0 = the whole batch at once.
  int64_t loss_chunk = 0;
  // Recompute each decoder layer's internals in the backward pass instead of keeping them
  // (only the layer inputs stay alive): less memory for about one more forward pass.
  bool remat_layers = false;
  // Rows pack several documents, each ending with this token (train/data.h): every document
  // attends only to itself and its rotary positions restart at 0, as if it were alone in its
  // row. nullopt: each row is one sequence (positions 0..T-1, plain causal mask).
  std::optional<int32_t> document_end_id;
  // Several devices (docs/SHARDING.md): a mesh ("data=2", "data=2,model=2") and a sharding plan
  // (dp, fsdp, tp, dp_tp) run the step as per-device programs with collectives (the
  // ShardedTrainer); both empty: one device.
  std::string mesh;
  std::string plan;
};

// A batch of packed sequences: input_ids s32 [B,T]; labels s32 [B,T], labels[b][t] is the target
// for position t (already shifted), kIgnoreLabel where no loss is taken.
struct Batch {
  Literal input_ids;
  Literal labels;
};

struct StepStats {
  double loss = 0;       // mean cross-entropy over counted labels (before the update)
  int64_t tokens = 0;    // labels that counted (not kIgnoreLabel)
  double grad_norm = 0;  // global L2 norm of the gradient before clipping
  double lr = 0;         // learning rate used by this step
};

// The Trainer's loss and its gradient as one program, for checks and tools:
// loss_and_grad(weights f32..., input_ids, labels) -> (mean loss f32, counted tokens f32,
// d loss / d weight for each weight...), weights in models::WeightSpecs order.
StatusOr<std::shared_ptr<Module>> BuildLossAndGradProgram(const io::ModelConfig& config,
                                                          const TrainOptions& options,
                                                          int64_t batch, int64_t seq_len);

class ShardedTrainer;

// One trainer for one device and many: the ShardedTrainer (sharded_trainer.h) runs the step,
// and one device is its 1-device mesh (the dp plan over data=1, a step with no collective).
class Trainer {
 public:
  // `weights` in models::WeightSpecs(config) order, any float dtype (converted to f32 masters).
  static StatusOr<std::unique_ptr<Trainer>> Create(io::ModelConfig config,
                                                   std::vector<Literal> weights,
                                                   TrainOptions options, Backend& backend,
                                                   int64_t batch, int64_t seq_len);
  ~Trainer();

  // One forward/backward/AdamW step on `batch` ([batch, seq_len] as given to Create).
  StatusOr<StepStats> Step(const Batch& batch);
  // Mean loss over the counted labels of `batch`, without an update.
  StatusOr<double> EvalLoss(const Batch& batch);
  // f32 master copies, in WeightSpecs order.
  StatusOr<std::vector<Literal>> Weights();
  // Steps taken so far (restored by LoadOptimizerState).
  int64_t step() const;
  // Optimizer state for resuming: "step" (s64 scalar), then "m.<weight name>" and
  // "v.<weight name>" (f32) for every weight in WeightSpecs order.
  StatusOr<std::vector<std::pair<std::string, Literal>>> OptimizerState();
  Status LoadOptimizerState(const std::vector<std::pair<std::string, Literal>>& state);
  // The sharded trainer behind this one when options.plan is set, else null.
  ShardedTrainer* sharded() const;

  struct Impl;

 private:
  explicit Trainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tlaloc::train
