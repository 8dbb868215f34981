// Tensor-parallel generation's layout (see tensor_parallel.h).
#include "generate/tensor_parallel.h"

namespace tlaloc::generate {

StatusOr<TensorParallelLayout> LayOutTensorParallel(const models::ModelFamily& family,
                                                    const io::ModelConfig& config, const Mesh& mesh,
                                                    const std::string& what) {
  auto plan = shard::ShardingPlan::Make("tp", mesh, config, 1);
  if (!plan.ok()) return Status(plan.status().code(), what + ": " + plan.status().message());
  TensorParallelLayout layout{std::move(*plan), config, {}};
  const int64_t m = layout.plan.model_size();
  io::ModelConfig& dc = layout.device_config;
  dc.num_attention_heads /= m;
  dc.num_key_value_heads /= m;
  dc.intermediate_size /= m;
  const auto device_specs = family.weight_specs(dc);
  const auto& specs = layout.plan.weights();
  if (device_specs.size() != specs.size())
    return Internal(what + ": the plan and the family list different weights");
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<int64_t> part = layout.plan.LocalWeightType(i).dims;
    // The device config sizes every weight but the experts, which the plan splits itself.
    std::vector<int64_t> want = device_specs[i].shape;
    if (!specs[i].stacked.empty() && layout.plan.splits_experts() && !want.empty()) want[0] /= m;
    if (device_specs[i].name != specs[i].name || part != want)
      return Internal(what + ": weight " + specs[i].name + "'s part is " + DimsToString(part) +
                      ", the device program takes " + DimsToString(want));
    layout.weight_shapes.push_back(std::move(part));
  }
  return layout;
}

models::ParallelHooks TensorParallelHooks(const TensorParallelLayout& layout,
                                          shard::CollectiveEmitter& emit) {
  models::ParallelHooks hooks;
  const shard::DeviceGroups groups = layout.plan.Groups({shard::kModelAxis});
  shard::CollectiveEmitter* e = &emit;
  hooks.reduce_partial = [e, groups](const Tensor& x) { return e->AllReduceSum(x, groups); };
  hooks.first_expert = shard::FirstExpertHook(layout.plan);
  hooks.weight_shapes = layout.weight_shapes;
  return hooks;
}

}  // namespace tlaloc::generate
