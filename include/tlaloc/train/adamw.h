// AdamW as program ops: decoupled weight decay, bias correction, optional clipping by global
// gradient norm and a warmup + cosine learning-rate schedule, following torch.optim.AdamW and
// torch.nn.utils.clip_grad_norm_ step for step. The per-step scalars (schedule, bias
// corrections) are computed in f64 inside the program, as PyTorch computes them on the host.
#pragma once

#include <functional>
#include <vector>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/ir/ir.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

struct AdamWTensors {
  std::vector<Tensor> params, m, v;  // updated values (f32)
  Tensor grad_norm;                  // f32 scalar: global L2 norm before clipping
  Tensor lr;                         // f32 scalar: learning rate used
};

// Completes gradient i's sum of squares when each device holds only part of it (a sharded
// step sums the parts over the devices); null: the gradient is whole.
using GlobalSumOfSquares = std::function<Tensor(size_t i, const Tensor& local_sum_of_squares)>;

// Emits one AdamW step. params, grads, m, v: one f32 tensor each per parameter; step: s32
// scalar, the 1-based number of this step.
AdamWTensors EmitAdamW(const AdamWConfig& config, const std::vector<Tensor>& params,
                       const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                       const std::vector<Tensor>& v, const Tensor& step,
                       const GlobalSumOfSquares& global_sum_of_squares = nullptr);

// A module whose entry `adamw_step`(params..., grads..., m..., v..., step s32) returns
// (params'..., m'..., v'..., grad_norm, lr); params, m and v alias their updated results
// (tf.aliasing_output), so a caller that donates them gets the update in place.
StatusOr<std::shared_ptr<Module>> BuildAdamWProgram(const AdamWConfig& config,
                                                    const std::vector<TensorType>& param_types);

}  // namespace tlaloc::train
