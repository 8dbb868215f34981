// Where each argument and result of a training program sits, by name: the train step, its
// grads-only and eval forms, and the AdamW program. A program's ports are an ordered list of
// groups, each one tensor per weight (parameters, gradients, moments) or one scalar/batch tensor
// (step, input_ids, loss, ...); builders add their arguments and results in that order, and the
// trainers index buffers through it instead of counting (`3 * n + 1`).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc::train {

enum class Port {
  // One tensor per weight (WeightSpecs order), f32.
  kParams,
  kGrads,
  kM,  // AdamW first moments
  kV,  // AdamW second moments
  // One tensor each.
  kStep,      // s32 scalar: the 1-based number of this step
  kInputIds,  // s32 [B, T]
  kLabels,    // s32 [B, T]
  kLoss,      // f32 scalar: mean cross-entropy over the counted labels
  kTokens,    // f32 scalar: labels that counted
  kGradNorm,  // f32 scalar: global L2 norm before clipping
  kLr,        // f32 scalar: learning rate used
};

std::string_view PortName(Port port);
// Whether the port holds one tensor per weight.
bool IsPerWeight(Port port);

// An ordered list of port groups over `weights` weights.
class PortList {
 public:
  PortList(std::initializer_list<Port> order, size_t weights);

  // Index of `port` (its i-th tensor for a per-weight port). The port must be in the list.
  int operator()(Port port, size_t i = 0) const;
  bool has(Port port) const;
  // Tensors in all: what a program takes or returns.
  int size() const { return size_; }
  // Every (port, i) in order, one per tensor.
  std::vector<std::pair<Port, size_t>> Each() const;
  const std::vector<Port>& order() const { return order_; }

 private:
  std::vector<Port> order_;
  std::vector<int> first_;  // first index of each group of order_
  size_t weights_;
  int size_ = 0;
};

// A program's arguments and results.
struct StepPorts {
  PortList args, results;

  // train_step(params..., m..., v..., step, input_ids, labels)
  //   -> (params'..., m'..., v'..., loss, tokens, grad_norm, lr)
  static StepPorts TrainStep(size_t weights);
  // grads(params..., input_ids, labels) -> (loss, tokens, grads...)
  static StepPorts Grads(size_t weights);
  // eval_loss(params..., input_ids, labels) -> (loss, tokens)
  static StepPorts Eval(size_t weights);
  // adamw_step(params..., grads..., m..., v..., step) -> (params'..., m'..., v'..., grad_norm, lr)
  static StepPorts AdamW(size_t weights);

  // Marks every per-weight argument that has a result of the same port (parameters and moments)
  // as aliasing it (tf.aliasing_output), so a caller that donates them is updated in place.
  void SetAliases(Function& fn) const;
};

}  // namespace tlaloc::train
