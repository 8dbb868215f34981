// Sharding plans for a model family's training step: which mesh axis splits each parameter,
// AdamW moment, batch input and key activation. A plan is chosen by name over a mesh whose axes
// it names (`data`, `model`); both lowerings (the per-device step with collectives, and the
// global program with Shardy annotations) read their shardings from it. See docs/SHARDING.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/sharding.h"
#include "tlaloc/models/family.h"

namespace tlaloc::shard {

inline constexpr char kDataAxis[] = "data";
inline constexpr char kModelAxis[] = "model";
// The mesh's symbol in annotated programs.
inline constexpr char kMeshName[] = "mesh";

enum class PlanKind {
  kDp,    // batch over `data`; parameters and moments replicated; gradients all-reduced
  kFsdp,  // batch, parameters and moments over `data`; weights gathered before use
  kTp,    // heads and the MLP's intermediate dimension over `model` (Megatron-style); a MoE
          // layer's experts over `model` (expert parallelism)
  kDpTp,  // kTp's weights with kDp's batch, on a data x model mesh
};

// "dp, fsdp, tp, dp_tp"
std::string PlanNames();
// The plan called `name`; an unknown name is refused naming the four.
StatusOr<PlanKind> PlanByName(std::string_view name);
std::string_view PlanName(PlanKind kind);

class ShardingPlan {
 public:
  // The plan `name` over `mesh` for a [batch, seq_len] training step of `config`. Refused, by
  // name: an unknown plan, a mesh whose axes are not the plan's (dp, fsdp: data; tp: model;
  // dp_tp: data and model), and a dimension the plan splits that does not divide by its axis
  // (heads, kv heads, intermediate size, num_experts, batch).
  static StatusOr<ShardingPlan> Make(std::string_view name, const Mesh& mesh,
                                     const io::ModelConfig& config, int64_t batch);

  PlanKind kind() const { return kind_; }
  std::string_view name() const { return PlanName(kind_); }
  const Mesh& mesh() const { return mesh_; }
  int64_t num_devices() const { return mesh_.num_devices(); }
  // Sizes of the two axes (1 when the mesh lacks one).
  int64_t data_size() const { return AxisSize(kDataAxis); }
  int64_t model_size() const { return AxisSize(kModelAxis); }
  int64_t batch() const { return batch_; }
  int64_t local_batch() const { return batch_ / data_size(); }
  // Whether MoE layers' stacked experts are split over `model` (tp and dp_tp of a MoE model on
  // more than one model device): each device holds num_experts / model_size of them.
  bool splits_experts() const { return splits_experts_; }

  // The weights in models::WeightSpecs order and the sharding of each (its AdamW moments have
  // the same); the shape one device holds.
  const std::vector<models::WeightSpec>& weights() const { return specs_; }
  const Sharding& weight(size_t i) const { return weight_shardings_[i]; }
  TensorType LocalWeightType(size_t i) const;
  // The mesh axes weight i is split over (its sharded dimension's axes), and the dimension
  // (-1 when replicated).
  std::vector<std::string> WeightAxes(size_t i) const;
  int64_t WeightDim(size_t i) const;
  // input_ids and labels [batch, seq_len].
  Sharding tokens() const;
  // Key activations: "hidden" (the residual stream [B, T, H]), "heads" (q/k/v [B, T, heads,
  // D]); replicated scalars (loss) are Sharding::Replicated(0).
  Sharding activation(std::string_view what) const;

  // Device groups that differ only along `axes` (each in ascending device id, which is the
  // axes' mesh order); no axes: every device alone.
  std::vector<std::vector<int64_t>> Groups(const std::vector<std::string>& axes) const;
  // The axes of the mesh that are not in `axes`.
  std::vector<std::string> OtherAxes(const std::vector<std::string>& axes) const;

 private:
  int64_t AxisSize(const char* axis) const;

  PlanKind kind_ = PlanKind::kDp;
  Mesh mesh_;
  int64_t batch_ = 0;
  bool splits_experts_ = false;
  std::vector<models::WeightSpec> specs_;
  std::vector<Sharding> weight_shardings_;
};

// One device's part of `global` under `sharding` (a copy).
StatusOr<Literal> LocalPart(const Literal& global, const Mesh& mesh, const Sharding& sharding,
                            int64_t device);
// The global tensor of `type` from every device's part (parts[d] for device d).
StatusOr<Literal> Assemble(const std::vector<Literal>& parts, const Mesh& mesh,
                           const Sharding& sharding, const TensorType& type);

}  // namespace tlaloc::shard
