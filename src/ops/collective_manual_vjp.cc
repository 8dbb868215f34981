// The gradient rule of sdy.manual_computation. The cotangents are themselves a manual
// computation over the same manual axes: its operands are the primal operands (with their
// in_shardings) and the results' cotangents (with the out_shardings), and its body recomputes the
// forward body on the local parts and runs reverse mode over it, op by op with their own rules.
// Each operand's cotangent leaves with the operand's sharding, except along manual axes that do
// not split the operand: there every part holds only its own share, so the body returns the
// shares stacked on a new leading dimension split over those axes, and a sum over that
// dimension outside the manual computation adds them (on XLA the partitioner turns that sum into
// the all_reduce the transpose of a replicated use needs, as shard_map's psum does; on one device
// the interpreter writes each part's share into its slot).
#include "collective_manual_vjp.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "op_helpers.h"
#include "tlaloc/ir/sharding.h"
#include "tlaloc/ir/typed_builder.h"

namespace tlaloc::ops {

namespace {

StatusOr<std::vector<Sharding>> Shardings(const Operation& op, const std::string& name) {
  const Attribute* a = FindAttr(op.attrs(), name);
  if (!a || a->kind() != Attribute::Kind::kArray)
    return InvalidArgument("sdy.manual_computation without '" + name + "'");
  std::vector<Sharding> out;
  for (const Attribute& e : a->as_array()) {
    TL_ASSIGN_OR_RETURN(Sharding s, Sharding::FromSdy(e.as_string()));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> ManualAxesOf(const Operation& op) {
  std::vector<std::string> axes;
  if (const Attribute* a = FindAttr(op.attrs(), "manual_axes");
      a && a->kind() == Attribute::Kind::kArray)
    for (const Attribute& e : a->as_array()) axes.push_back(e.as_string());
  return axes;
}

Attribute ShardingArray(const std::vector<Sharding>& shardings) {
  std::vector<Attribute> out;
  for (const Sharding& s : shardings) out.push_back(Attribute::Opaque(s.ToSdy()));
  return Attribute::Array(std::move(out));
}

// The size of each manual axis that splits one of the op's values (global / local sizes).
std::map<std::string, int64_t> AxisSizes(const Operation& op, const std::vector<Sharding>& in,
                                         const std::vector<Sharding>& out,
                                         const std::vector<std::string>& manual) {
  std::map<std::string, int64_t> sizes;
  const Block& body = op.region(0).front();
  auto note = [&](const Sharding& s, const TensorType& global, const TensorType& local) {
    for (size_t d = 0; d < s.dims.size() && d < global.dims.size(); ++d) {
      std::vector<std::string> axes;
      for (const std::string& a : s.dims[d])
        if (std::find(manual.begin(), manual.end(), a) != manual.end()) axes.push_back(a);
      if (axes.size() == 1 && local.dims[d] > 0)
        sizes.emplace(axes[0], global.dims[d] / local.dims[d]);
    }
  };
  for (int i = 0; i < op.num_operands(); ++i)
    note(in[i], op.operand(i).tensor_type(), body.argument(i).tensor_type());
  for (int i = 0; i < op.num_results(); ++i)
    note(out[i], op.result(i).tensor_type(), body.terminator()->operand(i).tensor_type());
  return sizes;
}

void CloneOps(const Block& src, Block& dst, std::unordered_map<ValueImpl*, Value>& map) {
  for (const auto& op : src.operations()) {
    if (op.get() == src.terminator()) continue;
    std::vector<Value> operands;
    for (Value v : op->operands()) operands.push_back(map.count(v.impl()) ? map[v.impl()] : v);
    auto copy =
        Operation::Create(op->def(), operands, op->result_types(), op->attrs(), op->num_regions());
    for (int r = 0; r < op->num_regions(); ++r)
      for (const auto& blk : op->region(r).blocks()) {
        Block& nb = copy->region(r).AddBlock();
        for (Value a : blk->arguments()) map[a.impl()] = nb.AddArgument(a.type());
        CloneOps(*blk, nb, map);
        if (const Operation* t = blk->terminator()) {
          std::vector<Value> ret;
          for (Value v : t->operands()) ret.push_back(map.count(v.impl()) ? map[v.impl()] : v);
          nb.Append(Operation::Create(t->def(), ret, {}, t->attrs()));
        }
      }
    Operation* placed = dst.Append(std::move(copy));
    for (int i = 0; i < op->num_results(); ++i) map[op->result(i).impl()] = placed->result(i);
  }
}

void MarkOperandsUsed(const Operation& op, std::unordered_set<ValueImpl*>& used) {
  for (Value v : op.operands()) used.insert(v.impl());
  for (const auto& r : op.regions())
    for (const auto& b : r->blocks())
      for (const auto& inner : b->operations()) MarkOperandsUsed(*inner, used);
}

// Drops the ops of `block` whose results nothing reads (recomputed forward values the reverse
// pass does not need, cotangents of integer or unused operands), as autodiff does for functions.
void RemoveDeadOps(Block& block) {
  auto& ops = block.mutable_operations();
  std::unordered_set<ValueImpl*> used;
  std::vector<bool> keep(ops.size(), false);
  for (size_t k = ops.size(); k-- > 0;) {
    const Operation& op = *ops[k];
    bool live = op.def().traits.terminator || op.def().traits.side_effecting;
    for (Value r : op.results()) live = live || used.count(r.impl()) > 0;
    if (!live) continue;
    keep[k] = true;
    MarkOperandsUsed(op, used);
  }
  size_t next = 0;
  for (size_t k = 0; k < ops.size(); ++k)
    if (keep[k]) ops[next++] = std::move(ops[k]);
  ops.resize(next);
}

// Reverse mode over the ops of `block` (a recomputed body), cotangents summed per value.
class BodyGradient {
 public:
  BodyGradient(OpBuilder& b, Block& block) : b_(b), block_(block) {}

  Status Accumulate(Value v, Value g, const std::string& from) {
    if (!g || !IsFloat(v.tensor_type().element_type)) return OkStatus();
    const Block* owner = v.is_block_argument() ? v.owner_block() : v.producer()->parent_block();
    if (owner != &block_)
      return Unimplemented("sdy.manual_computation's gradient: " + from +
                           " reads a value from outside the body (a body takes every value it "
                           "uses as an operand)");
    auto [it, added] = cotangents_.emplace(v.impl(), g);
    if (!added) it->second = hlo::Add(b_, it->second, g);
    return OkStatus();
  }

  Status Run(const std::vector<Operation*>& ops) {
    for (auto op = ops.rbegin(); op != ops.rend(); ++op) {
      std::vector<Value> cts;
      bool any = false;
      for (Value r : (*op)->results()) {
        auto it = cotangents_.find(r.impl());
        any |= it != cotangents_.end();
        cts.push_back(it != cotangents_.end() ? it->second : Value());
      }
      if (!any) continue;
      if (!(*op)->def().vjp)
        return Unimplemented("sdy.manual_computation's gradient: " + (*op)->name() +
                             " in the body has no gradient rule");
      for (size_t i = 0; i < cts.size(); ++i)
        if (!cts[i]) cts[i] = hlo::Zeros(b_, (*op)->result(static_cast<int>(i)).tensor_type());
      TL_ASSIGN_OR_RETURN(std::vector<Value> grads,
                          (*op)->def().vjp(b_, **op, (*op)->operands(), (*op)->results(), cts));
      TL_RETURN_IF_ERROR(b_.status());
      for (size_t i = 0; i < grads.size() && i < static_cast<size_t>((*op)->num_operands()); ++i)
        TL_RETURN_IF_ERROR(
            Accumulate((*op)->operand(static_cast<int>(i)), grads[i], (*op)->name()));
    }
    return OkStatus();
  }

  Value Of(Value v) const {
    auto it = cotangents_.find(v.impl());
    return it == cotangents_.end() ? Value() : it->second;
  }

 private:
  OpBuilder& b_;
  Block& block_;
  std::unordered_map<ValueImpl*, Value> cotangents_;
};

}  // namespace

StatusOr<std::vector<Value>> ManualComputationVjp(OpBuilder& b, const Operation& op,
                                                  const std::vector<Value>& operands,
                                                  const std::vector<Value>&,
                                                  const std::vector<Value>& result_cotangents) {
  TL_ASSIGN_OR_RETURN(std::vector<Sharding> in, Shardings(op, "in_shardings"));
  TL_ASSIGN_OR_RETURN(std::vector<Sharding> out, Shardings(op, "out_shardings"));
  const std::vector<std::string> manual = ManualAxesOf(op);
  const Block& body = op.region(0).front();
  const std::map<std::string, int64_t> sizes = AxisSizes(op, in, out, manual);

  // Which operands get a cotangent, and the manual axes along which each is only a share.
  std::vector<int> wrt;
  std::vector<std::vector<std::string>> share_axes;
  for (int i = 0; i < op.num_operands(); ++i) {
    if (!IsFloat(op.operand(i).tensor_type().element_type)) continue;
    std::vector<std::string> axes;
    for (const std::string& a : manual) {
      bool splits = false;
      for (const auto& dim : in[i].dims)
        splits |= std::find(dim.begin(), dim.end(), a) != dim.end();
      if (!splits) axes.push_back(a);
    }
    for (const std::string& a : axes)
      if (!sizes.count(a))
        return Unimplemented("sdy.manual_computation's gradient: manual axis '" + a +
                             "' splits none of the op's values, so its size (how many shares "
                             "of operand " +
                             std::to_string(i) + "'s cotangent to sum) is unknown here");
    wrt.push_back(i);
    share_axes.push_back(std::move(axes));
  }

  // The body: forward recomputed on the parts, then reverse mode.
  auto region = std::make_unique<Region>();
  Block& block = region->AddBlock();
  std::unordered_map<ValueImpl*, Value> map;
  std::vector<Value> args;
  for (int i = 0; i < body.num_arguments(); ++i) {
    args.push_back(block.AddArgument(body.argument(i).type()));
    map[body.argument(i).impl()] = args.back();
  }
  std::vector<Value> ct_args;
  for (int i = 0; i < op.num_results(); ++i)
    ct_args.push_back(block.AddArgument(body.terminator()->operand(i).type()));
  CloneOps(body, block, map);
  std::vector<Operation*> forward;
  for (const auto& o : block.operations()) forward.push_back(o.get());

  Block* outer = b.block();
  b.set_block(&block);
  BodyGradient grad(b, block);
  Status status = OkStatus();
  for (int i = 0; i < op.num_results() && status.ok(); ++i) {
    Value r = body.terminator()->operand(i);
    status = grad.Accumulate(map.count(r.impl()) ? map[r.impl()] : r, ct_args[i], "sdy.return");
  }
  if (status.ok()) status = grad.Run(forward);
  std::vector<Value> returned;
  std::vector<Sharding> ct_shardings;
  std::vector<Type> ct_types;
  for (size_t k = 0; k < wrt.size() && status.ok(); ++k) {
    const int i = wrt[k];
    Value g = grad.Of(args[i]);
    const TensorType local = args[i].tensor_type();
    if (!g) g = hlo::Zeros(b, local);
    TensorType global = op.operand(i).tensor_type();
    Sharding s = in[i];
    if (!share_axes[k].empty()) {
      // [1, local...] per part, [shares, global...] outside.
      int64_t shares = 1;
      for (const std::string& a : share_axes[k]) shares *= sizes.at(a);
      TensorType one = local;
      one.dims.insert(one.dims.begin(), 1);
      g = hlo::Reshape(b, g, one);
      global.dims.insert(global.dims.begin(), shares);
      s.dims.insert(s.dims.begin(), share_axes[k]);
    }
    returned.push_back(g);
    ct_shardings.push_back(std::move(s));
    ct_types.push_back(Type(global));
  }
  if (status.ok()) status = b.status();
  if (status.ok()) b.Create("sdy.return", returned);
  b.set_block(outer);
  if (status.ok() && b.ok()) RemoveDeadOps(block);
  TL_RETURN_IF_ERROR(status);
  TL_RETURN_IF_ERROR(b.status());

  std::vector<Sharding> vjp_in = in;
  vjp_in.insert(vjp_in.end(), out.begin(), out.end());
  AttrDict attrs;
  attrs["in_shardings"] = ShardingArray(vjp_in);
  attrs["out_shardings"] = ShardingArray(ct_shardings);
  if (const Attribute* a = FindAttr(op.attrs(), "manual_axes")) attrs["manual_axes"] = *a;
  std::vector<Value> vjp_operands = operands;
  vjp_operands.insert(vjp_operands.end(), result_cotangents.begin(), result_cotangents.end());
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(std::move(region));
  std::vector<Value> cts =
      b.Create("sdy.manual_computation", vjp_operands, attrs, ct_types, std::move(regions));
  TL_RETURN_IF_ERROR(b.status());
  std::vector<Value> grads(operands.size());
  for (size_t k = 0; k < wrt.size(); ++k)
    grads[wrt[k]] = share_axes[k].empty() ? cts[k] : hlo::SumOver(b, cts[k], {0});
  return grads;
}

}  // namespace tlaloc::ops
