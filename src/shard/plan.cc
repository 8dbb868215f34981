// Sharding plans (see plan.h).
#include "tlaloc/shard/plan.h"

#include <algorithm>

namespace tlaloc::shard {

namespace {

struct NamedPlan {
  PlanKind kind;
  const char* name;
};
constexpr NamedPlan kPlans[] = {{PlanKind::kDp, "dp"},
                                {PlanKind::kFsdp, "fsdp"},
                                {PlanKind::kTp, "tp"},
                                {PlanKind::kDpTp, "dp_tp"}};

Status Divides(std::string_view plan, const std::string& what, int64_t size, const char* axis,
               int64_t axis_size) {
  if (axis_size > 0 && size % axis_size == 0) return OkStatus();
  return InvalidArgument("plan " + std::string(plan) + ": " + what + " " + std::to_string(size) +
                         " does not divide by mesh axis '" + axis + "' (size " +
                         std::to_string(axis_size) + ")");
}

}  // namespace

std::string PlanNames() {
  std::string out;
  for (const NamedPlan& p : kPlans) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

StatusOr<PlanKind> PlanByName(std::string_view name) {
  for (const NamedPlan& p : kPlans)
    if (name == p.name) return p.kind;
  return InvalidArgument("unknown sharding plan '" + std::string(name) + "': expected one of " +
                         PlanNames());
}

std::string_view PlanName(PlanKind kind) {
  for (const NamedPlan& p : kPlans)
    if (p.kind == kind) return p.name;
  return "?";
}

StatusOr<ShardingPlan> ShardingPlan::Make(std::string_view name, const Mesh& mesh,
                                          const io::ModelConfig& config, int64_t batch) {
  TL_ASSIGN_OR_RETURN(PlanKind kind, PlanByName(name));
  TL_RETURN_IF_ERROR(models::CheckSupported(config));
  const bool data = kind != PlanKind::kTp, model = kind == PlanKind::kTp || kind == PlanKind::kDpTp;
  std::vector<std::string> want;
  if (data) want.push_back(kDataAxis);
  if (model) want.push_back(kModelAxis);
  std::vector<std::string> have;
  for (const MeshAxis& a : mesh.axes()) have.push_back(a.name);
  std::vector<std::string> sorted_have = have, sorted_want = want;
  std::sort(sorted_have.begin(), sorted_have.end());
  std::sort(sorted_want.begin(), sorted_want.end());
  if (sorted_have != sorted_want) {
    std::string axes;
    for (const auto& a : want) axes += (axes.empty() ? "'" : " and '") + a + "'";
    return InvalidArgument("plan " + std::string(name) + " needs a mesh of the axes " + axes +
                           " (e.g. " +
                           (data && model ? "data=2,model=2"
                            : data        ? "data=2"
                                          : "model=2") +
                           "); got mesh " + mesh.ToString());
  }
  ShardingPlan plan;
  plan.kind_ = kind;
  plan.mesh_ = mesh;
  plan.batch_ = batch;
  plan.specs_ = models::WeightSpecs(config);
  const int64_t dsize = plan.data_size(), msize = plan.model_size();
  if (batch <= 0) return InvalidArgument("plan " + std::string(name) + ": batch must be positive");
  if (data) TL_RETURN_IF_ERROR(Divides(name, "batch", batch, kDataAxis, dsize));
  if (model) {
    for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
      if (!config.IsMoeLayer(l)) continue;
      // Experts split over `model`, as many on every device.
      TL_RETURN_IF_ERROR(
          Divides(name, "num_experts", config.FeedForwardOf(l).experts, kModelAxis, msize));
      plan.splits_experts_ = msize > 1;
      break;
    }
    TL_RETURN_IF_ERROR(
        Divides(name, "num_attention_heads", config.num_attention_heads, kModelAxis, msize));
    TL_RETURN_IF_ERROR(
        Divides(name, "num_key_value_heads", config.num_key_value_heads, kModelAxis, msize));
    bool dense_mlp = false;  // intermediate_size only sizes the dense layers' MLP
    for (int64_t l = 0; l < config.num_hidden_layers; ++l) dense_mlp |= !config.IsMoeLayer(l);
    if (dense_mlp)
      TL_RETURN_IF_ERROR(
          Divides(name, "intermediate_size", config.intermediate_size, kModelAxis, msize));
  }
  if (model && config.quantization) {
    // A row-parallel int8 matrix splits its contraction: each device's columns must be whole
    // blocks, each with its own scale, or a block would be scaled on two devices.
    const int64_t block = config.quantization->group_size;
    for (const models::WeightSpec& spec : plan.specs_) {
      if (spec.fixed_type != ElementType::kS8 || spec.tensor_parallel_dim != 1) continue;
      const int64_t cols = spec.shape[1];
      if (cols % msize == 0 && (cols / msize) % block == 0) continue;
      return InvalidArgument("plan " + std::string(name) + ": int8 weight " + spec.name + " has " +
                             std::to_string(cols) + " input columns in blocks of " +
                             std::to_string(block) + " (one scale each); split over mesh axis '" +
                             kModelAxis + "' (size " + std::to_string(msize) +
                             ") a block would straddle devices: each device's columns must be "
                             "a multiple of " +
                             std::to_string(block));
    }
  }
  for (const models::WeightSpec& spec : plan.specs_) {
    const int64_t rank = static_cast<int64_t>(spec.shape.size());
    Sharding s = Sharding::Replicated(rank, kMeshName);
    if (kind == PlanKind::kFsdp) {
      // The first dimension that divides: most weights split their rows; one that cannot
      // (a tiny norm) stays replicated, its gradient all-reduced instead.
      for (int64_t d = 0; d < rank; ++d) {
        if (spec.shape[d] % dsize == 0) {
          s.dims[d] = {kDataAxis};
          break;
        }
      }
    } else if (model) {
      // The family says which dimension (WeightSpec::tensor_parallel_dim).
      const int64_t d = spec.tensor_parallel_dim;
      if (d >= 0 && d < rank) s.dims[d] = {kModelAxis};
    }
    TL_RETURN_IF_ERROR(s.Check(mesh, TensorType(ElementType::kF32, spec.shape)));
    plan.weight_shardings_.push_back(std::move(s));
  }
  return plan;
}

int64_t ShardingPlan::AxisSize(const char* axis) const {
  const int i = mesh_.AxisIndex(axis);
  return i < 0 ? 1 : mesh_.axes()[i].size;
}

TensorType ShardingPlan::LocalWeightType(size_t i) const {
  TensorType t(ElementType::kF32, specs_[i].shape);
  auto local = weight_shardings_[i].LocalType(mesh_, t);
  return local.ok() ? *local : t;  // Make checked every sharding
}

std::vector<std::string> ShardingPlan::WeightAxes(size_t i) const {
  for (const auto& axes : weight_shardings_[i].dims)
    if (!axes.empty()) return axes;
  return {};
}

int64_t ShardingPlan::WeightDim(size_t i) const {
  const auto& dims = weight_shardings_[i].dims;
  for (size_t d = 0; d < dims.size(); ++d)
    if (!dims[d].empty()) return static_cast<int64_t>(d);
  return -1;
}

Sharding ShardingPlan::tokens() const {
  Sharding s = Sharding::Replicated(2, kMeshName);
  if (kind_ != PlanKind::kTp) s.dims[0] = {kDataAxis};
  return s;
}

Sharding ShardingPlan::activation(std::string_view what) const {
  const bool batch_split = kind_ != PlanKind::kTp;
  const bool heads_split = kind_ == PlanKind::kTp || kind_ == PlanKind::kDpTp;
  if (what == "hidden") {
    Sharding s = Sharding::Replicated(3, kMeshName);
    if (batch_split) s.dims[0] = {kDataAxis};
    return s;
  }
  if (what == "heads") {
    Sharding s = Sharding::Replicated(4, kMeshName);
    if (batch_split) s.dims[0] = {kDataAxis};
    if (heads_split) s.dims[2] = {kModelAxis};
    return s;
  }
  return Sharding::Replicated(0, kMeshName);
}

std::vector<std::string> ShardingPlan::OtherAxes(const std::vector<std::string>& axes) const {
  std::vector<std::string> out;
  for (const MeshAxis& a : mesh_.axes())
    if (std::find(axes.begin(), axes.end(), a.name) == axes.end()) out.push_back(a.name);
  return out;
}

std::vector<std::vector<int64_t>> ShardingPlan::Groups(const std::vector<std::string>& axes) const {
  std::vector<std::vector<int64_t>> groups;
  std::vector<std::vector<int64_t>> keys;
  for (int64_t d = 0; d < mesh_.num_devices(); ++d) {
    std::vector<int64_t> coords = mesh_.Coordinates(d), key;
    for (size_t a = 0; a < mesh_.axes().size(); ++a)
      if (std::find(axes.begin(), axes.end(), mesh_.axes()[a].name) == axes.end())
        key.push_back(coords[a]);
    auto it = std::find(keys.begin(), keys.end(), key);
    if (it == keys.end()) {
      keys.push_back(key);
      groups.push_back({d});
    } else {
      groups[it - keys.begin()].push_back(d);
    }
  }
  return groups;
}

namespace {

// Per dimension, where device `device`'s part starts (and its size).
StatusOr<std::pair<std::vector<int64_t>, std::vector<int64_t>>> PartBox(const Mesh& mesh,
                                                                        const Sharding& sharding,
                                                                        const TensorType& type,
                                                                        int64_t device) {
  TL_RETURN_IF_ERROR(sharding.Check(mesh, type));
  const std::vector<int64_t> coords = mesh.Coordinates(device);
  std::vector<int64_t> start(type.rank(), 0), size = type.dims;
  for (int64_t d = 0; d < type.rank(); ++d) {
    int64_t index = 0, parts = 1;
    for (const std::string& axis : sharding.dims[d]) {  // major first
      const int a = mesh.AxisIndex(axis);
      index = index * mesh.axes()[a].size + coords[a];
      parts *= mesh.axes()[a].size;
    }
    size[d] = type.dims[d] / parts;
    start[d] = index * size[d];
  }
  return std::make_pair(start, size);
}

// Copies the box [start, start + size) between a global row-major tensor and a dense part:
// to_part picks it out, otherwise writes it back. Rows of the last dimension move at once.
void CopyBox(std::byte* global, std::byte* part, const std::vector<int64_t>& dims,
             const std::vector<int64_t>& start, const std::vector<int64_t>& size,
             int64_t elem_bytes, bool to_part) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (rank == 0) {
    if (to_part)
      std::memcpy(part, global, elem_bytes);
    else
      std::memcpy(global, part, elem_bytes);
    return;
  }
  std::vector<int64_t> stride(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * dims[d + 1];
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < rank; ++d) rows *= size[d];
  const int64_t row_bytes = size[rank - 1] * elem_bytes;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = start[rank - 1];
    for (int64_t d = 0; d + 1 < rank; ++d) offset += (start[d] + idx[d]) * stride[d];
    std::byte* g = global + offset * elem_bytes;
    std::byte* p = part + r * row_bytes;
    if (to_part)
      std::memcpy(p, g, row_bytes);
    else
      std::memcpy(g, p, row_bytes);
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++idx[d] < size[d]) break;
      idx[d] = 0;
    }
  }
}

int64_t ElementBytes(const TensorType& t) {
  TensorType one(t.element_type, {});
  return one.byte_size();
}

}  // namespace

StatusOr<Literal> LocalPart(const Literal& global, const Mesh& mesh, const Sharding& sharding,
                            int64_t device) {
  TL_ASSIGN_OR_RETURN(auto box, PartBox(mesh, sharding, global.type(), device));
  Literal part(TensorType(global.element_type(), box.second));
  if (part.num_elements() == 0) return part;
  CopyBox(const_cast<std::byte*>(global.data()), part.data(), global.dims(), box.first, box.second,
          ElementBytes(global.type()), true);
  return part;
}

StatusOr<Literal> Assemble(const std::vector<Literal>& parts, const Mesh& mesh,
                           const Sharding& sharding, const TensorType& type) {
  if (static_cast<int64_t>(parts.size()) != mesh.num_devices())
    return InvalidArgument("assembling " + Type(type).ToString() + " from " +
                           std::to_string(parts.size()) + " part(s) over mesh " + mesh.ToString());
  Literal out(type);
  for (size_t d = 0; d < parts.size(); ++d) {
    TL_ASSIGN_OR_RETURN(auto box, PartBox(mesh, sharding, type, static_cast<int64_t>(d)));
    if (parts[d].dims() != box.second || parts[d].element_type() != type.element_type)
      return InvalidArgument("device " + std::to_string(d) + "'s part of " + Type(type).ToString() +
                             " is " + Type(parts[d].type()).ToString());
    if (out.num_elements() == 0) continue;
    CopyBox(out.data(), const_cast<std::byte*>(parts[d].data()), type.dims, box.first, box.second,
            ElementBytes(type), false);
  }
  return out;
}

}  // namespace tlaloc::shard
