// Emitting collectives and Shardy constraints (see lowering.h).
#include "tlaloc/shard/lowering.h"

#include <algorithm>

namespace tlaloc::shard {

namespace {

bool Trivial(const DeviceGroups& groups) {
  for (const auto& g : groups)
    if (g.size() > 1) return false;
  return true;
}

AttrDict GroupAttrs(const DeviceGroups& groups, int64_t channel) {
  const int64_t width = static_cast<int64_t>(groups[0].size());
  std::vector<int64_t> flat;
  for (const auto& g : groups) flat.insert(flat.end(), g.begin(), g.end());
  AttrDict a;
  a["replica_groups"] = Attribute::Elements(
      Literal::FromVector<int64_t>({static_cast<int64_t>(groups.size()), width}, flat));
  a["channel_handle"] =
      Attribute::Struct("stablehlo.channel_handle",
                        {{"handle", Attribute::Int(channel)}, {"type", Attribute::Int(1)}});
  a["use_global_device_ids"] = Attribute::Unit();
  return a;
}

std::vector<std::unique_ptr<Region>> AddComputation(ElementType et) {
  auto region = std::make_unique<Region>();
  Block& block = region->AddBlock();
  Type t(TensorType(et, {}));
  Value a = block.AddArgument(t), c = block.AddArgument(t);
  OpBuilder rb(&block);
  rb.Create("stablehlo.return", {rb.CreateOne("stablehlo.add", {a, c})});
  std::vector<std::unique_ptr<Region>> v;
  v.push_back(std::move(region));
  return v;
}

}  // namespace

Tensor CollectiveEmitter::AllReduceSum(const Tensor& x, const DeviceGroups& groups) {
  if (Trivial(groups)) return x;
  OpBuilder* b = x.builder();
  Value r = b->CreateOne("stablehlo.all_reduce", {x.value()}, GroupAttrs(groups, next_channel_++),
                         {}, AddComputation(x.element_type()));
  return Tensor(r, b);
}

Tensor CollectiveEmitter::AllGather(const Tensor& x, const DeviceGroups& groups, int64_t dim) {
  if (Trivial(groups)) return x;
  OpBuilder* b = x.builder();
  AttrDict a = GroupAttrs(groups, next_channel_++);
  a["all_gather_dim"] = Attribute::Int(dim);
  std::vector<int64_t> dims = x.type().dims;
  dims[dim] *= static_cast<int64_t>(groups[0].size());
  Value g = b->CreateOne("stablehlo.all_gather", {x.value()}, a,
                         std::vector<Type>{TensorType(x.element_type(), dims)});
  return Tensor(g, b);
}

Tensor ShardingConstraint(const Tensor& x, const Sharding& sharding) {
  OpBuilder* b = x.builder();
  AttrDict a;
  a["sharding"] = Attribute::Opaque(sharding.ToSdy());
  return Tensor(b->CreateOne("sdy.sharding_constraint", {x.value()}, a), b);
}

namespace {

// The part of a sharding along the manual axes: what the body of a manual computation holds.
Sharding ManualPart(const Sharding& s, const std::vector<std::string>& manual) {
  Sharding part = s;
  part.replicated.clear();
  for (auto& axes : part.dims)
    std::erase_if(axes, [&](const std::string& a) {
      return std::find(manual.begin(), manual.end(), a) == manual.end();
    });
  return part;
}

}  // namespace

std::vector<Tensor> ManualComputation(
    const Mesh& mesh, const std::vector<Tensor>& inputs, const std::vector<Sharding>& in_shardings,
    const std::vector<Sharding>& out_shardings, const std::vector<std::string>& manual_axes,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& body) {
  if (inputs.empty()) return {};
  OpBuilder* b = inputs[0].builder();
  if (!b || !b->ok()) return {};
  auto fail = [b](const std::string& message) {
    b->Fail(InvalidArgument("sdy.manual_computation: " + message));
    return std::vector<Tensor>{};
  };
  if (in_shardings.size() != inputs.size())
    return fail(std::to_string(inputs.size()) + " inputs and " +
                std::to_string(in_shardings.size()) + " in_shardings");
  for (const std::string& axis : manual_axes)
    if (mesh.AxisIndex(axis) < 0)
      return fail("manual axis '" + axis + "' is not in mesh " + mesh.ToString());
  auto region = std::make_unique<Region>();
  Block& block = region->AddBlock();
  std::vector<Tensor> locals;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Status fits = in_shardings[i].Check(mesh, inputs[i].type());
    if (!fits.ok()) return fail("input " + std::to_string(i) + ": " + fits.message());
    auto local = ManualPart(in_shardings[i], manual_axes).LocalType(mesh, inputs[i].type());
    if (!local.ok()) return fail(local.status().message());
    locals.push_back(Tensor(block.AddArgument(Type(*local)), b));
  }
  Block* outer = b->block();
  b->set_block(&block);
  std::vector<Tensor> parts = body(locals);
  std::vector<Value> values;
  std::vector<Type> result_types;
  for (const Tensor& t : parts) values.push_back(t.value());
  if (b->ok() && parts.size() != out_shardings.size()) {
    b->set_block(outer);
    return fail("the body returns " + std::to_string(parts.size()) + " values for " +
                std::to_string(out_shardings.size()) + " out_shardings");
  }
  for (size_t j = 0; j < parts.size() && b->ok(); ++j) {
    // The global shape: each dimension times the manual axes that split it.
    TensorType global = parts[j].type();
    const Sharding part = ManualPart(out_shardings[j], manual_axes);
    if (static_cast<int64_t>(part.dims.size()) != global.rank()) {
      b->set_block(outer);
      return fail("out_shardings " + std::to_string(j) + " " + out_shardings[j].ToSdyBody() +
                  " does not fit the body's " + global.ToString());
    }
    for (size_t d = 0; d < part.dims.size(); ++d)
      for (const std::string& axis : part.dims[d])
        global.dims[d] *= mesh.axes()[mesh.AxisIndex(axis)].size;
    result_types.push_back(Type(global));
  }
  if (b->ok()) b->Create("sdy.return", values);
  b->set_block(outer);
  if (!b->ok()) return {};
  auto list = [](const std::vector<Sharding>& shardings) {
    std::vector<Attribute> out;
    for (const Sharding& s : shardings) out.push_back(Attribute::Opaque(s.ToSdy()));
    return Attribute::Array(std::move(out));
  };
  AttrDict attrs;
  attrs["in_shardings"] = list(in_shardings);
  attrs["out_shardings"] = list(out_shardings);
  std::vector<Attribute> axes;
  for (const std::string& axis : manual_axes) axes.push_back(Attribute::String(axis));
  attrs["manual_axes"] = Attribute::Array(std::move(axes));
  std::vector<Value> operands;
  for (const Tensor& t : inputs) operands.push_back(t.value());
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(std::move(region));
  std::vector<Value> out =
      b->Create("sdy.manual_computation", operands, attrs, result_types, std::move(regions));
  std::vector<Tensor> tensors;
  for (Value v : out) tensors.push_back(Tensor(v, b));
  return tensors;
}

Tensor AxisIndex(OpBuilder& b, const Mesh& mesh, std::string_view axis) {
  const int a = mesh.AxisIndex(axis);
  if (a < 0 || mesh.axes()[a].size == 1) return Scalar(b, 0, ElementType::kS32);
  int64_t stride = 1;  // devices between neighbours along the axis
  for (size_t i = a + 1; i < mesh.axes().size(); ++i) stride *= mesh.axes()[i].size;
  Tensor id = Convert(Tensor(b.CreateOne("stablehlo.partition_id", {}, {}), &b), ElementType::kS32);
  if (stride > 1) id = id / Scalar(b, static_cast<double>(stride), ElementType::kS32);
  return Rem(id, Scalar(b, static_cast<double>(mesh.axes()[a].size), ElementType::kS32));
}

std::function<Tensor(OpBuilder&, int64_t)> FirstExpertHook(const ShardingPlan& plan) {
  if (!plan.splits_experts()) return {};
  Mesh mesh = plan.mesh();
  return [mesh](OpBuilder& b, int64_t local_experts) {
    return AxisIndex(b, mesh, kModelAxis) *
           Scalar(b, static_cast<double>(local_experts), ElementType::kS32);
  };
}

}  // namespace tlaloc::shard
