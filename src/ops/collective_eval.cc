#include "collective_eval.h"

#include <algorithm>
#include <numeric>

#include "reduction_kernels.h"
#include "tlaloc/ir/collectives.h"

namespace tlaloc::ops {

namespace {

// A tensor seen as [outer, len, inner] around one axis.
struct AxisView {
  int64_t outer = 1, len = 1, inner_bytes = 1;
};

AxisView ViewAround(const TensorType& t, int64_t axis) {
  AxisView v;
  v.inner_bytes = ElementSize(t.element_type);
  for (int64_t d = 0; d < t.rank(); ++d) {
    if (d < axis) v.outer *= t.dims[d];
    if (d == axis) v.len = t.dims[d];
    if (d > axis) v.inner_bytes *= t.dims[d];
  }
  return v;
}

// Copies `count` slices along `axis` from src[src_start...] to dst[dst_start...]; the tensors
// agree on every other dimension.
void CopyAlong(const Literal& src, int64_t src_start, Literal& dst, int64_t dst_start,
               int64_t count, int64_t axis) {
  const AxisView s = ViewAround(src.type(), axis), d = ViewAround(dst.type(), axis);
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(dst.data() + (o * d.len + dst_start) * d.inner_bytes,
                src.data() + (o * s.len + src_start) * s.inner_bytes, count * s.inner_bytes);
}

// Part `index` of `count` equal parts of `src` along `axis`, as a new tensor.
Literal SliceAlong(const Literal& src, int64_t axis, int64_t index, int64_t count) {
  TensorType t = src.type();
  const int64_t part = t.dims[axis] / count;
  t.dims[axis] = part;
  Literal out = Literal::Uninitialized(t);
  CopyAlong(src, index * part, out, 0, part, axis);
  return out;
}

struct Placement {
  std::vector<int64_t> group;  // device ids, in the order the op's groups list them
  int64_t index = 0;           // this device's position in `group`
};

// The process group of this device for a replica_groups op.
StatusOr<Placement> PlaceInGroup(const Operation& op, bool must_cover = true) {
  CollectiveContext& cc = CurrentCollectiveContext();
  TL_ASSIGN_OR_RETURN(GroupMode mode, CollectiveGroupMode(op.name(), op.attrs()));
  TL_ASSIGN_OR_RETURN(auto rows, GroupRows(op.attrs(), "replica_groups"));
  TL_ASSIGN_OR_RETURN(auto groups, ProcessGroups(mode, rows, cc.grid(), must_cover));
  Placement p;
  p.group = GroupOf(groups, cc.device());
  auto it = std::find(p.group.begin(), p.group.end(), cc.device());
  p.index = it - p.group.begin();
  return p;
}

// Positions of the group's members in ascending device id: the fixed reduction order.
std::vector<size_t> AscendingOrder(const std::vector<int64_t>& group) {
  std::vector<size_t> order(group.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return group[a] < group[b]; });
  return order;
}

// Every member sent operands of the types this device has.
Status CheckSameTypes(const Operation& op, const std::vector<int64_t>& group,
                      const std::vector<std::vector<Literal>>& all, std::span<const Literal> mine) {
  for (size_t j = 0; j < all.size(); ++j) {
    if (all[j].size() != mine.size())
      return InvalidArgument(op.name() + ": device " + std::to_string(group[j]) + " sent " +
                             std::to_string(all[j].size()) + " operand(s), this device " +
                             std::to_string(mine.size()));
    for (size_t k = 0; k < mine.size(); ++k)
      if (!(all[j][k].type() == mine[k].type()))
        return InvalidArgument(op.name() + ": device " + std::to_string(group[j]) +
                               " sent operand " + std::to_string(k) + " as " +
                               all[j][k].type().ToString() + ", this device has " +
                               mine[k].type().ToString());
  }
  return OkStatus();
}

StatusOr<std::vector<std::vector<Literal>>> ExchangeChecked(const Operation& op, const Placement& p,
                                                            std::span<const Literal> operands) {
  std::vector<Literal> mine(operands.begin(), operands.end());
  TL_ASSIGN_OR_RETURN(auto all,
                      CurrentCollectiveContext().Exchange(op.name(), p.group, std::move(mine)));
  TL_RETURN_IF_ERROR(CheckSameTypes(op, p.group, all, operands));
  return all;
}

// Folds `values` (same type) left to right with the op's computation region into `out`.
Status Fold(const Region& region, const std::vector<const Literal*>& values, Literal& out,
            EvalContext& ctx) {
  const int64_t n = out.num_elements();
  if (values.size() == 1 || n == 0) {
    std::memcpy(out.data(), values[0]->data(), out.byte_size());
    return OkStatus();
  }
  if (values[0]->element_type() != out.element_type())
    return Unimplemented("a computation whose element type differs from the operand's");
  if (RegionIsVectorizable(region)) {
    TL_ASSIGN_OR_RETURN(Literal acc, values[0]->Reshaped({n}));
    for (size_t i = 1; i < values.size(); ++i) {
      TL_ASSIGN_OR_RETURN(Literal next, values[i]->Reshaped({n}));
      TL_ASSIGN_OR_RETURN(auto r, RunRegionVectorized(region, {acc, next}, n, ctx));
      if (r.size() != 1 || r[0].element_type() != out.element_type())
        return InvalidArgument("the computation must return one value of the operand's type");
      acc = std::move(r[0]);
    }
    std::memcpy(out.data(), acc.data(), out.byte_size());
    return OkStatus();
  }
  // A general body: once per element, in the same order.
  for (int64_t e = 0; e < n; ++e) {
    Literal acc = ElementAsScalar(*values[0], e);
    for (size_t i = 1; i < values.size(); ++i) {
      TL_ASSIGN_OR_RETURN(auto r, ctx.RunRegion(region, {acc, ElementAsScalar(*values[i], e)}));
      if (r.size() != 1 || r[0].element_type() != out.element_type())
        return InvalidArgument("the computation must return one value of the operand's type");
      acc = std::move(r[0]);
    }
    CopyElement(acc, 0, out, e);
  }
  return OkStatus();
}

}  // namespace

Status EvalAllReduce(const Operation& op, std::span<const Literal> operands,
                     std::vector<Literal>& results, EvalContext& ctx) {
  TL_ASSIGN_OR_RETURN(Placement p, PlaceInGroup(op));
  TL_ASSIGN_OR_RETURN(auto all, ExchangeChecked(op, p, operands));
  const std::vector<size_t> order = AscendingOrder(p.group);
  for (size_t k = 0; k < operands.size(); ++k) {
    std::vector<const Literal*> values;
    for (size_t j : order) values.push_back(&all[j][k]);
    TL_RETURN_IF_ERROR(Fold(op.region(0), values, results[k], ctx));
  }
  return OkStatus();
}

Status EvalAllGather(const Operation& op, std::span<const Literal> operands,
                     std::vector<Literal>& results, EvalContext&) {
  TL_ASSIGN_OR_RETURN(Placement p, PlaceInGroup(op));
  const int64_t dim = GetIntAttr(op.attrs(), "all_gather_dim", 0);
  const int64_t members = static_cast<int64_t>(p.group.size());
  for (size_t k = 0; k < operands.size(); ++k)
    if (operands[k].dims()[dim] * members != results[k].dims()[dim])
      return InvalidArgument("stablehlo.all_gather: result " + std::to_string(k) + " is " +
                             results[k].type().ToString() + ", but a group of " +
                             std::to_string(members) + " gathers " +
                             std::to_string(operands[k].dims()[dim] * members) +
                             " along dimension " + std::to_string(dim));
  TL_ASSIGN_OR_RETURN(auto all, ExchangeChecked(op, p, operands));
  for (size_t k = 0; k < operands.size(); ++k) {
    const int64_t len = operands[k].dims()[dim];
    for (int64_t j = 0; j < members; ++j) CopyAlong(all[j][k], 0, results[k], j * len, len, dim);
  }
  return OkStatus();
}

Status EvalReduceScatter(const Operation& op, std::span<const Literal> operands,
                         std::vector<Literal>& results, EvalContext& ctx) {
  TL_ASSIGN_OR_RETURN(Placement p, PlaceInGroup(op));
  const int64_t dim = GetIntAttr(op.attrs(), "scatter_dimension", 0);
  const int64_t members = static_cast<int64_t>(p.group.size());
  if (operands[0].dims()[dim] % members != 0 ||
      operands[0].dims()[dim] / members != results[0].dims()[dim])
    return InvalidArgument("stablehlo.reduce_scatter: dimension " + std::to_string(dim) + " of " +
                           operands[0].type().ToString() + " does not split into " +
                           std::to_string(members) + " parts of " + results[0].type().ToString());
  TL_ASSIGN_OR_RETURN(auto all, ExchangeChecked(op, p, operands));
  // Only this device's part is reduced: slice every member's operand first.
  std::vector<Literal> parts;
  for (size_t j : AscendingOrder(p.group))
    parts.push_back(SliceAlong(all[j][0], dim, p.index, members));
  std::vector<const Literal*> values;
  for (const Literal& l : parts) values.push_back(&l);
  return Fold(op.region(0), values, results[0], ctx);
}

Status EvalAllToAll(const Operation& op, std::span<const Literal> operands,
                    std::vector<Literal>& results, EvalContext&) {
  TL_ASSIGN_OR_RETURN(Placement p, PlaceInGroup(op));
  const int64_t split_dim = GetIntAttr(op.attrs(), "split_dimension", 0);
  const int64_t concat_dim = GetIntAttr(op.attrs(), "concat_dimension", 0);
  const int64_t split_count = GetIntAttr(op.attrs(), "split_count", 1);
  if (static_cast<int64_t>(p.group.size()) != split_count)
    return InvalidArgument("stablehlo.all_to_all: split_count is " + std::to_string(split_count) +
                           " but this device's process group has " +
                           std::to_string(p.group.size()) + " member(s)");
  TL_ASSIGN_OR_RETURN(auto all, ExchangeChecked(op, p, operands));
  for (size_t k = 0; k < operands.size(); ++k) {
    for (int64_t j = 0; j < split_count; ++j) {
      Literal part = SliceAlong(all[j][k], split_dim, p.index, split_count);
      const int64_t len = part.dims()[concat_dim];
      CopyAlong(part, 0, results[k], j * len, len, concat_dim);
    }
  }
  return OkStatus();
}

StatusOr<std::vector<std::pair<int64_t, int64_t>>> SourceTargetPairs(const AttrDict& attrs,
                                                                     int64_t bound,
                                                                     const std::string& unit) {
  const Attribute* a = FindAttr(attrs, "source_target_pairs");
  if (!a || a->kind() != Attribute::Kind::kElements || a->as_elements().type().rank() != 2 ||
      a->as_elements().dims()[1] != 2 || !IsInteger(a->as_elements().element_type()))
    return InvalidArgument("'source_target_pairs' must be an Nx2 integer dense attribute");
  const Literal& l = a->as_elements();
  std::vector<std::pair<int64_t, int64_t>> pairs;
  std::vector<int64_t> sources, targets;
  for (int64_t i = 0; i < l.dims()[0]; ++i) {
    int64_t s = l.GetAsInt64(2 * i), t = l.GetAsInt64(2 * i + 1);
    for (int64_t id : {s, t})
      if (bound > 0 && (id < 0 || id >= bound))
        return InvalidArgument("source_target_pairs: " + unit + " id " + std::to_string(id) +
                               " is out of range [0, " + std::to_string(bound) + ")");
    if (std::find(sources.begin(), sources.end(), s) != sources.end())
      return InvalidArgument("source_target_pairs: source " + std::to_string(s) + " appears twice");
    if (std::find(targets.begin(), targets.end(), t) != targets.end())
      return InvalidArgument("source_target_pairs: target " + std::to_string(t) + " appears twice");
    sources.push_back(s);
    targets.push_back(t);
    pairs.emplace_back(s, t);
  }
  return pairs;
}

Status EvalCollectivePermute(const Operation& op, std::span<const Literal> operands,
                             std::vector<Literal>& results, EvalContext&) {
  CollectiveContext& cc = CurrentCollectiveContext();
  TL_ASSIGN_OR_RETURN(GroupMode mode, CollectiveGroupMode(op.name(), op.attrs()));
  const bool cross_partition = mode == GroupMode::kCrossPartition;
  const ProcessGrid& grid = cc.grid();
  TL_ASSIGN_OR_RETURN(
      auto pairs,
      SourceTargetPairs(op.attrs(), cross_partition ? grid.num_partitions : grid.num_replicas,
                        cross_partition ? "partition" : "replica"));
  // Every process that shares this device's other coordinate takes part, whether it sends,
  // receives or neither, so that all of them agree on one group.
  Placement p;
  const int64_t bound = cross_partition ? grid.num_partitions : grid.num_replicas;
  for (int64_t i = 0; i < bound; ++i)
    p.group.push_back(cross_partition ? grid.DeviceOf(cc.replica_id(), i)
                                      : grid.DeviceOf(i, cc.partition_id()));
  const int64_t self = cross_partition ? cc.partition_id() : cc.replica_id();
  p.index = self;
  TL_ASSIGN_OR_RETURN(auto all, ExchangeChecked(op, p, operands));
  for (const auto& [source, target] : pairs)
    if (target == self)
      std::memcpy(results[0].data(), all[source][0].data(), results[0].byte_size());
  return OkStatus();  // no source: the zeros the result arrived with
}

Status EvalCollectiveBroadcast(const Operation& op, std::span<const Literal> operands,
                               std::vector<Literal>& results, EvalContext&) {
  TL_ASSIGN_OR_RETURN(Placement p, PlaceInGroup(op, /*must_cover=*/false));
  if (p.group.empty()) return OkStatus();  // in no group: zeros
  TL_ASSIGN_OR_RETURN(auto all, ExchangeChecked(op, p, operands));
  for (size_t k = 0; k < operands.size(); ++k)
    std::memcpy(results[k].data(), all[0][k].data(), results[k].byte_size());
  return OkStatus();
}

}  // namespace tlaloc::ops
