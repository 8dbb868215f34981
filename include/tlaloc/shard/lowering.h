// Emitting a plan's collectives into a per-device program, and its annotations into a global
// one. Per-device collectives name their groups by device id (a positive channel and
// use_global_device_ids: the specification's flattened_ids), so one program serves every
// device of a 1 x N grid; a group of one device emits nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/ir/sharding.h"
#include "tlaloc/shard/plan.h"

namespace tlaloc::shard {

using DeviceGroups = std::vector<std::vector<int64_t>>;

class CollectiveEmitter {
 public:
  // stablehlo.all_reduce with an add computation over `groups`.
  Tensor AllReduceSum(const Tensor& x, const DeviceGroups& groups);
  // stablehlo.all_gather along `dim`, members' parts concatenated in group order.
  Tensor AllGather(const Tensor& x, const DeviceGroups& groups, int64_t dim);
  int64_t collectives() const { return next_channel_ - 1; }

 private:
  int64_t next_channel_ = 1;  // each collective its own channel id, as XLA expects
};

// sdy.sharding_constraint of x (a global program's annotation; identity on one device).
Tensor ShardingConstraint(const Tensor& x, const Sharding& sharding);

// sdy.manual_computation over `manual_axes` of `mesh` (a global program's region that the
// partitioner leaves alone, e.g. around a kernel's custom call): `body` gets each input's local
// part (its dimensions split over the manual axes divided) and returns each output's local part;
// the outputs' global types follow from `out_shardings`. Errors (a sharding that does not fit
// its value, a body returning the wrong count) fail the builder.
std::vector<Tensor> ManualComputation(
    const Mesh& mesh, const std::vector<Tensor>& inputs, const std::vector<Sharding>& in_shardings,
    const std::vector<Sharding>& out_shardings, const std::vector<std::string>& manual_axes,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& body);

// This device's coordinate (s32 scalar) along mesh axis `axis` in a per-device program of a
// 1 x N grid: from stablehlo.partition_id, which is the device id there (the last mesh axis
// varies fastest). 0 for an axis the mesh lacks.
Tensor AxisIndex(OpBuilder& b, const Mesh& mesh, std::string_view axis);

// models::ParallelHooks::first_expert for a per-device program under `plan`: the device's
// `model` coordinate times its expert count. Empty when the plan splits no experts.
std::function<Tensor(OpBuilder&, int64_t)> FirstExpertHook(const ShardingPlan& plan);

}  // namespace tlaloc::shard
