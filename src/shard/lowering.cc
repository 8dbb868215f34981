// Emitting collectives and Shardy constraints (see lowering.h).
#include "tlaloc/shard/lowering.h"

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

}  // namespace tlaloc::shard
