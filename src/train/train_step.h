// The train-step program builder of the ShardedTrainer, whose 1-device case is the Trainer
// (internal to train/).
// A StepLowering says how one device's copy of the step differs from the single-device step;
// without one the builder emits the single-device step.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "tlaloc/models/family.h"
#include "tlaloc/train/adamw.h"
#include "tlaloc/train/loss.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

struct StepLowering {
  // Every weight's f32 type as the program takes it (each device's part when sharded), and the
  // token inputs' type.
  std::vector<TensorType> weight_types;
  TensorType tokens;
  // Turns weight i as the program holds it into the tensor the model uses (FSDP gathers it).
  std::function<Tensor(size_t i, const Tensor& held)> use_weight;
  // Tensor-parallel block reductions and annotations for the family's train_forward.
  models::ParallelHooks parallel;
  // Turns this device's loss terms into the whole batch's (data parallelism sums them).
  std::function<LossTerms(const LossTerms&)> reduce_loss;
  // The loss cotangent each device seeds its backward pass with.
  double seed = 1.0;
  // Completes gradient i from this device's part (sums copies held on several devices).
  std::function<Tensor(size_t i, const Tensor& grad)> finish_grad;
  GlobalSumOfSquares global_sum_of_squares;
};

// The ports (tlaloc/train/step_ports.h): StepPorts::TrainStep, or with grads_only StepPorts::Grads.
// train_step(params..., m..., v..., step s32, input_ids, labels)
//   -> (params'..., m'..., v'..., loss f32, tokens f32, grad_norm f32, lr f32)
// or, with grads_only, grads(params..., input_ids, labels) -> (loss, tokens, grads...).
StatusOr<std::shared_ptr<Module>> BuildStepProgram(const io::ModelConfig& config,
                                                   const TrainOptions& options,
                                                   const std::vector<models::WeightSpec>& specs,
                                                   int64_t batch, int64_t seq_len,
                                                   const StepLowering* lowering = nullptr,
                                                   bool grads_only = false);
// eval_loss(params..., input_ids, labels) -> (loss, tokens) (StepPorts::Eval): the step's loss
// without its backward pass, for the same lowering.
StatusOr<std::shared_ptr<Module>> BuildEvalProgram(const io::ModelConfig& config,
                                                   const TrainOptions& options,
                                                   const std::vector<models::WeightSpec>& specs,
                                                   int64_t batch, int64_t seq_len,
                                                   const StepLowering* lowering = nullptr);

}  // namespace tlaloc::train
