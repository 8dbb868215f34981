// Collective ops: all_reduce, all_gather, reduce_scatter, all_to_all, collective_permute,
// collective_broadcast, and the process ids partition_id and replica_id. They print in MLIR's
// generic form, as StableHLO defines no pretty syntax for them (the ids print as
// `stablehlo.replica_id : tensor<ui32>`). Semantics across devices: collective_eval.cc.
#include <algorithm>

#include "collective_eval.h"
#include "op_areas.h"
#include "op_helpers.h"
#include "reduction_kernels.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/ir/collectives.h"

namespace tlaloc::ops {

void RegisterShardingOps(OpRegistry& r);  // collective_sharding.cc: sdy.sharding_constraint
// collective_manual.cc: sdy.manual_computation, sdy.return
void RegisterManualComputationOps(OpRegistry& r);

namespace {

// Members of the first group written in replica_groups, 0 when none are written: the group
// size a shape rule can know without the process grid.
StatusOr<int64_t> WrittenGroupSize(const AttrDict& attrs) {
  TL_ASSIGN_OR_RETURN(auto rows, GroupRows(attrs, "replica_groups"));
  if (rows.empty()) return int64_t{0};
  return static_cast<int64_t>(rows[0].size());
}

Status CheckAxis(int64_t axis, int64_t rank, const std::string& name) {
  if (axis < 0 || axis >= rank)
    return InvalidArgument("'" + name + "' is " + std::to_string(axis) + ", expected [0, " +
                           std::to_string(rank) + ")");
  return OkStatus();
}

// The element type the computation region takes: (tensor<E>, tensor<E>) -> tensor<E>.
StatusOr<ElementType> ComputationType(const InferInput& in, const std::string& op) {
  if (in.regions.size() != 1 || in.regions[0]->blocks().size() != 1)
    return InvalidArgument(op + " needs a computation region");
  const Block& b = in.regions[0]->front();
  if (b.num_arguments() != 2 || !b.argument(0).type().is_tensor() ||
      b.argument(0).type().tensor.rank() != 0 || !(b.argument(0).type() == b.argument(1).type()))
    return InvalidArgument(op + "'s computation must take two scalar tensors of one type");
  return b.argument(0).type().tensor.element_type;
}

// Checks the mode attributes (use_global_device_ids needs a channel).
Status CheckMode(const std::string& name, const AttrDict& attrs) {
  return CollectiveGroupMode(name, attrs).status();
}

StatusOr<std::vector<Type>> InferAllReduce(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  if (in.operand_types.empty()) return InvalidArgument("expected at least one operand");
  TL_RETURN_IF_ERROR(CheckMode("stablehlo.all_reduce", in.attrs));
  TL_RETURN_IF_ERROR(GroupRows(in.attrs, "replica_groups").status());
  TL_ASSIGN_OR_RETURN(ElementType e, ComputationType(in, "stablehlo.all_reduce"));
  std::vector<Type> out;
  for (size_t i = 0; i < in.operand_types.size(); ++i) {
    const TensorType& t = in.operand_types[i].tensor;
    if (t.element_type != e)
      return InvalidArgument("operand " + std::to_string(i) + " is " + t.ToString() +
                             ", the computation takes " + std::string(MlirName(e)));
    out.push_back(t);
  }
  return out;
}

// all_gather and reduce_scatter: the result grows (shrinks) along `dim_name` by the group size,
// which the grid may multiply (cross_replica_and_partition): declared results are taken when
// the dimension is a multiple (a divisor), else the written group size decides.
StatusOr<std::vector<Type>> InferResized(const InferInput& in, const std::string& op,
                                         const std::string& dim_name, bool gather) {
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  if (in.operand_types.empty()) return InvalidArgument("expected at least one operand");
  TL_RETURN_IF_ERROR(CheckMode(op, in.attrs));
  TL_ASSIGN_OR_RETURN(int64_t written, WrittenGroupSize(in.attrs));
  const Attribute* d = FindAttr(in.attrs, dim_name);
  if (!d || d->kind() != Attribute::Kind::kInt)
    return InvalidArgument("expected an integer '" + dim_name + "' attribute");
  const int64_t dim = d->as_int();
  std::vector<Type> out;
  for (size_t i = 0; i < in.operand_types.size(); ++i) {
    TensorType t = in.operand_types[i].tensor;
    TL_RETURN_IF_ERROR(CheckAxis(dim, t.rank(), dim_name));
    const std::vector<Type>* declared = in.declared_results;
    if (declared && declared->size() == in.operand_types.size() && (*declared)[i].is_tensor()) {
      const TensorType& r = (*declared)[i].tensor;
      bool ok = r.element_type == t.element_type && r.rank() == t.rank() && r.dims[dim] > 0 &&
                (gather ? r.dims[dim] % std::max<int64_t>(t.dims[dim], 1) == 0
                        : t.dims[dim] % r.dims[dim] == 0);
      for (int64_t k = 0; ok && k < t.rank(); ++k) ok = k == dim || r.dims[k] == t.dims[k];
      if (!ok)
        return InvalidArgument("result " + std::to_string(i) + " " + r.ToString() +
                               " cannot come from operand " + t.ToString() + " along " + dim_name +
                               " " + std::to_string(dim));
      out.push_back(r);
      continue;
    }
    if (written == 0)
      return InvalidArgument(op + " without replica_groups needs its result types written");
    if (gather) {
      t.dims[dim] *= written;
    } else {
      if (t.dims[dim] % written != 0)
        return InvalidArgument("dimension " + std::to_string(dim) + " of " + t.ToString() +
                               " does not split into " + std::to_string(written) + " parts");
      t.dims[dim] /= written;
    }
    out.push_back(t);
  }
  return out;
}

StatusOr<std::vector<Type>> InferAllToAll(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  if (in.operand_types.empty()) return InvalidArgument("expected at least one operand");
  TL_RETURN_IF_ERROR(CheckMode("stablehlo.all_to_all", in.attrs));
  const int64_t split_dim = GetIntAttr(in.attrs, "split_dimension", -1);
  const int64_t concat_dim = GetIntAttr(in.attrs, "concat_dimension", -1);
  const int64_t count = GetIntAttr(in.attrs, "split_count", 0);
  if (count <= 0) return InvalidArgument("'split_count' must be positive");
  TL_ASSIGN_OR_RETURN(int64_t written, WrittenGroupSize(in.attrs));
  if (written != 0 && written != count)
    return InvalidArgument("replica_groups have " + std::to_string(written) +
                           " member(s) per group, split_count is " + std::to_string(count));
  std::vector<Type> out;
  for (const Type& ty : in.operand_types) {
    TensorType t = ty.tensor;
    TL_RETURN_IF_ERROR(CheckAxis(split_dim, t.rank(), "split_dimension"));
    TL_RETURN_IF_ERROR(CheckAxis(concat_dim, t.rank(), "concat_dimension"));
    if (t.dims[split_dim] % count != 0)
      return InvalidArgument("dimension " + std::to_string(split_dim) + " of " + t.ToString() +
                             " does not split into " + std::to_string(count) + " parts");
    t.dims[split_dim] /= count;
    t.dims[concat_dim] *= count;
    out.push_back(t);
  }
  return out;
}

StatusOr<std::vector<Type>> InferCollectivePermute(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  TL_RETURN_IF_ERROR(CheckMode("stablehlo.collective_permute", in.attrs));
  TL_RETURN_IF_ERROR(SourceTargetPairs(in.attrs, 0, "").status());
  return std::vector<Type>{in.operand_types[0]};
}

StatusOr<std::vector<Type>> InferCollectiveBroadcast(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  TL_RETURN_IF_ERROR(CheckMode("stablehlo.collective_broadcast", in.attrs));
  TL_RETURN_IF_ERROR(GroupRows(in.attrs, "replica_groups").status());
  return in.operand_types;
}

// ---- Gradients -----------------------------------------------------------------------------

std::vector<std::unique_ptr<Region>> AddRegion(ElementType et) {
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

// The attributes that choose the process groups, copied to the gradient's collective.
AttrDict GroupAttrs(const Operation& op) {
  AttrDict a;
  for (const char* k : {"replica_groups", "channel_handle", "use_global_device_ids"})
    if (const Attribute* v = FindAttr(op.attrs(), k)) a[k] = *v;
  return a;
}

Status ExpectSumBody(const Operation& op) {
  auto kind = MatchBinaryBody(op.region(0));
  if (!kind || *kind != BinaryKind::kAdd)
    return Unimplemented(op.name() + " is differentiable only with an add computation");
  return OkStatus();
}

// The sum of the cotangents over the group, on every member: all_reduce(sum) is its own
// transpose.
StatusOr<std::vector<Value>> AllReduceVjp(OpBuilder& b, const Operation& op,
                                          const std::vector<Value>& x, const std::vector<Value>&,
                                          const std::vector<Value>& cts) {
  TL_RETURN_IF_ERROR(ExpectSumBody(op));
  std::vector<Value> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (!cts[i] || !IsFloat(x[i].tensor_type().element_type)) continue;
    out[i] = b.CreateOne("stablehlo.all_reduce", {cts[i]}, GroupAttrs(op), {},
                         AddRegion(cts[i].tensor_type().element_type));
  }
  TL_RETURN_IF_ERROR(b.status());
  return out;
}

StatusOr<std::vector<Value>> AllGatherVjp(OpBuilder& b, const Operation& op,
                                          const std::vector<Value>& x, const std::vector<Value>&,
                                          const std::vector<Value>& cts) {
  std::vector<Value> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (!cts[i] || !IsFloat(x[i].tensor_type().element_type)) continue;
    AttrDict a = GroupAttrs(op);
    a["scatter_dimension"] = Attribute::Int(GetIntAttr(op.attrs(), "all_gather_dim", 0));
    out[i] = b.CreateOne("stablehlo.reduce_scatter", {cts[i]}, a, std::vector<Type>{x[i].type()},
                         AddRegion(cts[i].tensor_type().element_type));
  }
  TL_RETURN_IF_ERROR(b.status());
  return out;
}

StatusOr<std::vector<Value>> ReduceScatterVjp(OpBuilder& b, const Operation& op,
                                              const std::vector<Value>& x,
                                              const std::vector<Value>&,
                                              const std::vector<Value>& cts) {
  TL_RETURN_IF_ERROR(ExpectSumBody(op));
  if (!cts[0] || !IsFloat(x[0].tensor_type().element_type)) return std::vector<Value>(1);
  AttrDict a = GroupAttrs(op);
  a["all_gather_dim"] = Attribute::Int(GetIntAttr(op.attrs(), "scatter_dimension", 0));
  Value g = b.CreateOne("stablehlo.all_gather", {cts[0]}, a, std::vector<Type>{x[0].type()});
  TL_RETURN_IF_ERROR(b.status());
  return std::vector<Value>{g};
}

StatusOr<std::vector<Value>> AllToAllVjp(OpBuilder& b, const Operation& op,
                                         const std::vector<Value>& x, const std::vector<Value>&,
                                         const std::vector<Value>& cts) {
  std::vector<Value> out(x.size());
  AttrDict a = GroupAttrs(op);
  a["split_dimension"] = Attribute::Int(GetIntAttr(op.attrs(), "concat_dimension", 0));
  a["concat_dimension"] = Attribute::Int(GetIntAttr(op.attrs(), "split_dimension", 0));
  a["split_count"] = Attribute::Int(GetIntAttr(op.attrs(), "split_count", 1));
  for (size_t i = 0; i < x.size(); ++i) {
    if (!cts[i] || !IsFloat(x[i].tensor_type().element_type)) continue;
    out[i] = b.CreateOne("stablehlo.all_to_all", {cts[i]}, a);
  }
  TL_RETURN_IF_ERROR(b.status());
  return out;
}

// The cotangent travels back from each target to its source; a device that sent nothing
// (a source of no pair) gets zeros, as the inverse permutation leaves it.
StatusOr<std::vector<Value>> CollectivePermuteVjp(OpBuilder& b, const Operation& op,
                                                  const std::vector<Value>& x,
                                                  const std::vector<Value>&,
                                                  const std::vector<Value>& cts) {
  if (!cts[0] || !IsFloat(x[0].tensor_type().element_type)) return std::vector<Value>(1);
  TL_ASSIGN_OR_RETURN(auto pairs, SourceTargetPairs(op.attrs(), 0, ""));
  std::vector<int64_t> inverse;
  for (const auto& [s, t] : pairs) {
    inverse.push_back(t);
    inverse.push_back(s);
  }
  AttrDict a;
  if (const Attribute* c = FindAttr(op.attrs(), "channel_handle")) a["channel_handle"] = *c;
  a["source_target_pairs"] = Attribute::Elements(
      Literal::FromVector<int64_t>({static_cast<int64_t>(pairs.size()), 2}, inverse));
  Value g = b.CreateOne("stablehlo.collective_permute", {cts[0]}, a);
  TL_RETURN_IF_ERROR(b.status());
  return std::vector<Value>{g};
}

// ---- Registration ---------------------------------------------------------------------------

void RegisterProcessId(OpRegistry& r, const std::string& name, bool replica) {
  OpDef d;
  d.name = name;
  d.traits.writes_all_results = true;
  d.traits.replaces_results = true;  // a fresh scalar
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 0));
    return std::vector<Type>{TensorType(ElementType::kU32, {})};
  };
  d.eval = [replica](const Operation&, std::span<const Literal>, std::vector<Literal>& results,
                     EvalContext&) -> Status {
    CollectiveContext& cc = CurrentCollectiveContext();
    results[0] = Literal::Scalar<uint32_t>(
        static_cast<uint32_t>(replica ? cc.replica_id() : cc.partition_id()));
    return OkStatus();
  };
  // stablehlo.replica_id : tensor<ui32>
  d.print = [](const Operation& op, OpPrinter& p) {
    p.PrintOptionalAttrDict(op.attrs(), {});
    p.Print(" : ");
    p.PrintType(op.result(0).type());
  };
  d.parse = ParseAttrDictAndResultType;
  d.vjp = [](OpBuilder&, const Operation&, const std::vector<Value>&, const std::vector<Value>&,
             const std::vector<Value>&) -> StatusOr<std::vector<Value>> {
    return std::vector<Value>{};
  };
  r.Register(std::move(d));
}

OpDef Collective(const std::string& name, InferFn infer, EvalFn eval, VjpFn vjp, int regions) {
  OpDef d;
  d.name = name;
  // Never removed or reordered: every device must reach the same collectives in one order.
  d.traits.side_effecting = true;
  d.infer = std::move(infer);
  d.eval = std::move(eval);
  d.vjp = std::move(vjp);
  d.num_regions = regions;
  return d;
}

}  // namespace

void RegisterCollectiveOps(OpRegistry& r) {
  r.Register(Collective("stablehlo.all_reduce", InferAllReduce, EvalAllReduce, AllReduceVjp, 1));
  r.Register(Collective(
      "stablehlo.all_gather",
      [](const InferInput& in) {
        return InferResized(in, "stablehlo.all_gather", "all_gather_dim", true);
      },
      EvalAllGather, AllGatherVjp, 0));
  r.Register(Collective(
      "stablehlo.reduce_scatter",
      [](const InferInput& in) -> StatusOr<std::vector<Type>> {
        TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
        TL_ASSIGN_OR_RETURN(ElementType e, ComputationType(in, "stablehlo.reduce_scatter"));
        if (in.operand_types[0].is_tensor() && in.operand_types[0].tensor.element_type != e)
          return InvalidArgument("the operand is " + in.operand_types[0].ToString() +
                                 ", the computation takes " + std::string(MlirName(e)));
        return InferResized(in, "stablehlo.reduce_scatter", "scatter_dimension", false);
      },
      EvalReduceScatter, ReduceScatterVjp, 1));
  r.Register(Collective("stablehlo.all_to_all", InferAllToAll, EvalAllToAll, AllToAllVjp, 0));
  r.Register(Collective("stablehlo.collective_permute", InferCollectivePermute,
                        EvalCollectivePermute, CollectivePermuteVjp, 0));
  r.Register(Collective("stablehlo.collective_broadcast", InferCollectiveBroadcast,
                        EvalCollectiveBroadcast, nullptr, 0));
  RegisterProcessId(r, "stablehlo.replica_id", true);
  RegisterProcessId(r, "stablehlo.partition_id", false);
  RegisterShardingOps(r);
  RegisterManualComputationOps(r);
}

}  // namespace tlaloc::ops
