// Training over several devices with a sharding plan (shard/plan.h), lowered to one per-device
// train-step program with StableHLO collectives: the Trainer's step program, built with the
// plan's weights, batch part and collectives, compiled for a 1 x N grid and run on every device
// at once. Parameters and AdamW moments live on their devices between steps; only the scalars
// (loss, tokens, grad norm, lr) come back to the host. Weights() and OptimizerState() assemble
// host copies when asked (checkpoints). The Trainer is its 1-device case (the dp plan over
// data=1, whose program has no collective). See docs/SHARDING.md.
#pragma once

#include <memory>
#include <vector>

#include "tlaloc/shard/plan.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

// The loss, counted tokens and every gradient (WeightSpecs order, whole tensors on the host).
struct LossAndGrads {
  double loss = 0;
  double tokens = 0;
  std::vector<Literal> grads;
};

class ShardedTrainer {
 public:
  // `weights` in WeightSpecs order (any float dtype; split onto the devices as f32 masters).
  // The backend needs plan.num_devices() devices.
  static StatusOr<std::unique_ptr<ShardedTrainer>> Create(io::ModelConfig config,
                                                          std::vector<Literal> weights,
                                                          TrainOptions options, Backend& backend,
                                                          shard::ShardingPlan plan,
                                                          int64_t seq_len);
  ~ShardedTrainer();

  StatusOr<StepStats> Step(const Batch& batch);
  // Mean loss over the counted labels of `batch`, without an update (a forward-only program).
  StatusOr<double> EvalLoss(const Batch& batch);
  // The gradients the step would apply (assembled from the devices), without an update.
  StatusOr<LossAndGrads> LossAndGrad(const Batch& batch);
  StatusOr<std::vector<Literal>> Weights();
  int64_t step() const;
  StatusOr<std::vector<std::pair<std::string, Literal>>> OptimizerState();
  Status LoadOptimizerState(const std::vector<std::pair<std::string, Literal>>& state);

  const shard::ShardingPlan& plan() const;
  // The per-device train-step program (the same on every device).
  std::shared_ptr<const Module> step_module() const;
  // Peak live bytes of each device in the last step (empty where the backend does not say).
  std::vector<int64_t> last_peak_bytes() const;
  // Bytes of parameters and both moments each device holds.
  int64_t state_bytes_per_device() const;
  // What device `device` holds for weight i: 0 parameter, 1 first moment, 2 second moment.
  const DeviceBuffer& held(int which, int device, size_t i) const;

  struct Impl;

 private:
  explicit ShardedTrainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The same train step as one global program for XLA's partitioner: `sdy.mesh`, `sdy.sharding`
// on every argument and result as the plan says, and `sdy.sharding_constraint` on the
// attention heads, the residual stream, gathered weights and gradients.
StatusOr<std::shared_ptr<Module>> BuildAnnotatedStepProgram(const io::ModelConfig& config,
                                                            const TrainOptions& options,
                                                            const shard::ShardingPlan& plan,
                                                            int64_t seq_len);
// The per-device train-step program of the plan (what ShardedTrainer runs).
StatusOr<std::shared_ptr<Module>> BuildDeviceStepProgram(const io::ModelConfig& config,
                                                         const TrainOptions& options,
                                                         const shard::ShardingPlan& plan,
                                                         int64_t seq_len, bool grads_only = false);

}  // namespace tlaloc::train
