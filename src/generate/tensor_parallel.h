// Tensor-parallel generation's layout (the engine's mesh path): the `tp` plan checked for what
// generation needs, each device's config and weight shapes, and the step programs' hooks.
#pragma once

#include <optional>
#include <vector>

#include "tlaloc/models/family.h"
#include "tlaloc/shard/lowering.h"
#include "tlaloc/shard/plan.h"

namespace tlaloc::generate {

struct TensorParallelLayout {
  shard::ShardingPlan plan;
  // The config with the heads, KV heads and intermediate size divided by the `model` axis: what
  // sizes each device's attention, MLP and KV pools (num_experts stays whole: every device
  // routes over all experts).
  io::ModelConfig device_config;
  // Each weight's part, in WeightSpecs order (a MoE layer's experts: E / N of them).
  std::vector<std::vector<int64_t>> weight_shapes;
};

// The layout of `config` over `mesh` (one `model` axis), refusing by name what does not split:
// a mesh that is not the plan's, heads, KV heads, intermediate size or experts that do not
// divide, int8 blocks that would straddle devices. `what` prefixes the errors.
StatusOr<TensorParallelLayout> LayOutTensorParallel(const models::ModelFamily& family,
                                                    const io::ModelConfig& config, const Mesh& mesh,
                                                    const std::string& what);

// The step programs' hooks: the block all_reduce over all devices after each row-parallel
// product (and each MoE layer's expert slice), the first local expert from partition_id, and
// the weights' part shapes. `emit` numbers the channels and must outlive the build.
models::ParallelHooks TensorParallelHooks(const TensorParallelLayout& layout,
                                          shard::CollectiveEmitter& emit);

}  // namespace tlaloc::generate
