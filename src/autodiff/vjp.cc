// Reverse-mode differentiation: clone the forward ops, then walk them backwards calling each
// op's VJP rule and summing cotangents per value. Remat regions are cloned a second time just
// before their rules run, so their forward intermediates die as early as the forward allows.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/builder/composite.h"
#include "tlaloc/ir/op_registry.h"

namespace tlaloc::autodiff {

namespace {

using ValueMap = std::unordered_map<ValueImpl*, Value>;

bool IsFloatTensor(const Type& t) { return t.is_tensor() && IsFloat(t.tensor.element_type); }

// Maps original values to clones: `into` receives new definitions and is searched first, then
// `fallback` (the forward clone, when recomputing a remat region).
struct CloneMap {
  ValueMap* into;
  const ValueMap* fallback = nullptr;
  StatusOr<Value> Lookup(Value v) const {
    auto it = into->find(v.impl());
    if (it != into->end()) return it->second;
    if (fallback) {
      auto jt = fallback->find(v.impl());
      if (jt != fallback->end()) return jt->second;
    }
    return Internal("autodiff: a value is used before its definition while cloning");
  }
};

// Clones `op` (with its regions) to the end of `block`.
StatusOr<Operation*> CloneOp(const Operation& op, Block& block, const CloneMap& map) {
  std::vector<Value> operands;
  for (Value v : op.operands()) {
    TL_ASSIGN_OR_RETURN(Value m, map.Lookup(v));
    operands.push_back(m);
  }
  auto clone = Operation::Create(op.def(), std::move(operands), op.result_types(), op.attrs(),
                                 op.num_regions());
  for (int i = 0; i < op.num_regions(); ++i) {
    for (const auto& blk : op.region(i).blocks()) {
      Block& nb = clone->region(i).AddBlock();
      for (Value a : blk->arguments()) (*map.into)[a.impl()] = nb.AddArgument(a.type());
      for (const auto& inner : blk->operations())
        TL_RETURN_IF_ERROR(CloneOp(*inner, nb, map).status());
    }
  }
  Operation* appended = block.Append(std::move(clone));
  for (int i = 0; i < op.num_results(); ++i) (*map.into)[op.result(i).impl()] = appended->result(i);
  return appended;
}

// Calls fn(value) for every operand of `op` and of the ops nested in its regions.
template <typename Fn>
void ForEachUse(const Operation& op, Fn&& fn) {
  for (Value v : op.operands()) fn(v);
  for (const auto& region : op.regions())
    for (const auto& blk : region->blocks())
      for (const auto& inner : blk->operations()) ForEachUse(*inner, fn);
}

Value ZerosOf(OpBuilder& b, const Type& type) {
  return Full(b, type.tensor.dims, 0.0, type.tensor.element_type).value();
}

class Differentiator {
 public:
  Differentiator(OpBuilder& b, const Function& f, const GradOptions& options)
      : b_(b), f_(f), options_(options) {}

  StatusOr<GradientValues> Run(const std::vector<Value>& args,
                               const std::vector<Value>& result_cotangents) {
    TL_RETURN_IF_ERROR(CheckInputs(args, result_cotangents));
    for (int i = 0; i < f_.num_arguments(); ++i) primal_[f_.entry().argument(i).impl()] = args[i];
    const Operation* ret = f_.entry().terminator();
    std::vector<const Operation*> body;
    for (const auto& op : f_.entry().operations())
      if (op.get() != ret) body.push_back(op.get());
    for (const Operation* op : body)
      TL_RETURN_IF_ERROR(CloneOp(*op, *b_.block(), CloneMap{&primal_}).status());
    MarkVaried(body);

    GradientValues out;
    for (int i = 0; i < ret->num_operands(); ++i) {
      TL_ASSIGN_OR_RETURN(Value r, CloneMap{&primal_}.Lookup(ret->operand(i)));
      out.results.push_back(r);
      Value seed = result_cotangents[i];
      if (seed && varied_.count(ret->operand(i).impl()) && IsFloatTensor(r.type()))
        TL_RETURN_IF_ERROR(Accumulate(ret->operand(i), seed, "the returned value"));
    }
    for (auto it = body.rbegin(); it != body.rend(); ++it) TL_RETURN_IF_ERROR(Backward(**it));
    for (int idx : options_.wrt) {
      Value arg = f_.entry().argument(idx);
      auto ct = cotangents_.find(arg.impl());
      out.gradients.push_back(ct != cotangents_.end() ? ct->second : ZerosOf(b_, arg.type()));
    }
    TL_RETURN_IF_ERROR(b_.status());
    return out;
  }

 private:
  Status CheckInputs(const std::vector<Value>& args, const std::vector<Value>& cts) {
    const std::string fname = "@" + f_.name();
    if (f_.body().blocks().size() != 1)
      return InvalidArgument("autodiff: " + fname + " has more than one block");
    const Operation* ret = f_.entry().terminator();
    if (!ret || !ret->def().traits.terminator)
      return InvalidArgument("autodiff: " + fname + " has no return");
    if (static_cast<int>(args.size()) != f_.num_arguments())
      return InvalidArgument("autodiff: " + fname + " takes " + std::to_string(f_.num_arguments()) +
                             " arguments, got " + std::to_string(args.size()));
    if (static_cast<int>(cts.size()) != ret->num_operands())
      return InvalidArgument("autodiff: " + fname + " has " + std::to_string(ret->num_operands()) +
                             " results, got " + std::to_string(cts.size()) + " cotangents");
    std::unordered_set<int> seen;
    for (int idx : options_.wrt) {
      if (idx < 0 || idx >= f_.num_arguments())
        return InvalidArgument("autodiff: argument index " + std::to_string(idx) + " of " + fname +
                               " is out of range [0, " + std::to_string(f_.num_arguments()) + ")");
      if (!seen.insert(idx).second)
        return InvalidArgument("autodiff: argument " + std::to_string(idx) + " of " + fname +
                               " is listed twice");
      const Type& t = f_.entry().argument(idx).type();
      if (!IsFloatTensor(t))
        return InvalidArgument("autodiff: gradient asked of argument " + std::to_string(idx) +
                               " of " + fname + ", of type " + t.ToString() +
                               "; expected a floating-point tensor");
    }
    return OkStatus();
  }

  // Forward activity: a float value is differentiated only when it depends on a wrt argument.
  void MarkVaried(const std::vector<const Operation*>& body) {
    for (int idx : options_.wrt) varied_.insert(f_.entry().argument(idx).impl());
    const std::set<const Operation*>* stopped =
        options_.marks ? &options_.marks->stopped() : nullptr;
    for (const Operation* op : body) {
      if (stopped && stopped->count(op)) continue;
      bool any = false;
      ForEachUse(*op, [&](Value v) { any = any || varied_.count(v.impl()) > 0; });
      if (!any) continue;
      for (Value r : op->results())
        if (IsFloatTensor(r.type())) varied_.insert(r.impl());
    }
    if (options_.marks) {
      const auto& regions = options_.marks->remat_regions();
      for (size_t i = 0; i < regions.size(); ++i)
        for (const Operation* op : regions[i]) region_of_[op] = static_cast<int>(i);
    }
  }

  Status Accumulate(Value original, Value ct, const std::string& where) {
    if (!(ct.type() == original.type()))
      return Internal("autodiff: cotangent of type " + ct.type().ToString() + " for a value of " +
                      original.type().ToString() + " from " + where);
    auto it = cotangents_.find(original.impl());
    if (it == cotangents_.end()) {
      cotangents_[original.impl()] = ct;
    } else {
      it->second = b_.CreateOne("stablehlo.add", {it->second, ct});
      TL_RETURN_IF_ERROR(b_.status());
    }
    return OkStatus();
  }

  // Clones remat region `r` again, so its rules read recomputed values.
  Status Recompute(int r) {
    std::vector<const Operation*> ops;
    for (const auto& op : f_.entry().operations())
      if (options_.marks->remat_regions()[r].count(op.get())) ops.push_back(op.get());
    for (const Operation* op : ops)
      TL_RETURN_IF_ERROR(CloneOp(*op, *b_.block(), CloneMap{&recomputed_, &primal_}).status());
    recomputed_regions_.insert(r);
    return OkStatus();
  }

  Status Backward(const Operation& op) {
    bool any_result = false;
    for (Value r : op.results()) any_result = any_result || cotangents_.count(r.impl());
    if (!any_result) return OkStatus();
    bool any_operand = false;
    for (Value v : op.operands()) any_operand = any_operand || varied_.count(v.impl());
    if (!any_operand)
      return Unimplemented("autodiff: " + op.name() + " in @" + f_.name() +
                           " reads a differentiated value inside its regions; gradients through "
                           "values captured by regions are not supported");
    if (!op.def().vjp && op.name() != "stablehlo.composite")
      return Unimplemented("autodiff: " + op.name() + " in @" + f_.name() +
                           " has no gradient rule, and its result depends on a differentiated "
                           "argument");
    auto region = region_of_.find(&op);
    if (region != region_of_.end() && !recomputed_regions_.count(region->second))
      TL_RETURN_IF_ERROR(Recompute(region->second));
    CloneMap map{&recomputed_, &primal_};
    if (region == region_of_.end()) map = CloneMap{&primal_};
    std::vector<Value> operands, results, cts;
    for (Value v : op.operands()) {
      TL_ASSIGN_OR_RETURN(Value m, map.Lookup(v));
      operands.push_back(m);
    }
    for (Value r : op.results()) {
      TL_ASSIGN_OR_RETURN(Value m, map.Lookup(r));
      results.push_back(m);
      auto ct = cotangents_.find(r.impl());
      cts.push_back(ct != cotangents_.end() ? ct->second : ZerosOf(b_, r.type()));
    }
    TL_RETURN_IF_ERROR(b_.status());
    if (op.name() == "stablehlo.composite") return BackwardComposite(op, operands, results, cts);
    // The rule reads attributes and regions from the op as cloned into the gradient program.
    const Operation* like = results.empty() ? &op : results[0].producer();
    auto grads = op.def().vjp(b_, *like, operands, results, cts);
    if (!grads.ok())
      return Status(grads.status().code(),
                    "autodiff: gradient of " + op.name() + ": " + grads.status().message());
    if (grads->size() != operands.size())
      return Internal("autodiff: the gradient rule of " + op.name() + " returned " +
                      std::to_string(grads->size()) + " cotangents for " +
                      std::to_string(operands.size()) + " operands");
    for (size_t i = 0; i < operands.size(); ++i) {
      Value v = op.operand(static_cast<int>(i));
      if (!(*grads)[i] || !varied_.count(v.impl())) continue;
      TL_RETURN_IF_ERROR(Accumulate(v, (*grads)[i], "the gradient rule of " + op.name()));
    }
    // Cotangents of this op's results are no longer needed: drop them so they can die.
    for (Value r : op.results()) cotangents_.erase(r.impl());
    return OkStatus();
  }

  // A composite's gradient is its decomposition's: the decomposition is cloned again here (its
  // forward recomputed) and differentiated with respect to the composite's varied operands.
  Status BackwardComposite(const Operation& op, const std::vector<Value>& operands,
                           const std::vector<Value>& results, const std::vector<Value>& cts) {
    const std::string name = GetStringAttr(op.attrs(), "name");
    if (name == kLinearCrossEntropyComposite && op.num_results() == 4 && op.num_operands() == 3)
      return BackwardLinearCrossEntropy(op, results, cts);
    if (name == kMaskedSoftmaxComposite && op.num_results() == 1 && op.num_operands() == 2)
      return BackwardMaskedSoftmax(op, operands, results, cts);
    const std::string symbol = GetStringAttr(op.attrs(), "decomposition");
    if (b_.module() == nullptr)
      return Unimplemented("autodiff: stablehlo.composite \"" + name + "\" in @" + f_.name() +
                           " needs the module (its decomposition @" + symbol +
                           "); the gradient's OpBuilder has none");
    const Function* decomposition = b_.module()->Find(symbol);
    if (decomposition == nullptr)
      return InvalidArgument("autodiff: stablehlo.composite \"" + name + "\" in @" + f_.name() +
                             " names the decomposition @" + symbol + ", which the module lacks");
    GradOptions sub;
    for (int i = 0; i < op.num_operands(); ++i)
      if (varied_.count(op.operand(i).impl()) && IsFloatTensor(op.operand(i).type()))
        sub.wrt.push_back(i);
    TL_ASSIGN_OR_RETURN(GradientValues g, EmitGradient(b_, *decomposition, operands, cts, sub));
    for (size_t j = 0; j < sub.wrt.size(); ++j)
      TL_RETURN_IF_ERROR(Accumulate(op.operand(sub.wrt[j]), g.gradients[j],
                                    "the decomposition of composite \"" + name + "\""));
    for (Value r : op.results()) cotangents_.erase(r.impl());
    return OkStatus();
  }

  // tlaloc.masked_softmax (builder::MaskedSoftmax) from its result y alone, as softmax's gradient
  // is usually written: dx = y * (dy - sum(dy * y)) over the last axis where the mask keeps x,
  // and 0 where it puts the fill (the select's gradient). Recomputing the decomposition instead
  // would make the interpreter's backward run the softmax again, and XLA (which inlines the
  // composite and merges the two copies) keep the forward's intermediates: the memory plan would
  // under-predict it. y is live until the backward anyway (attention's P.V reads it).
  Status BackwardMaskedSoftmax(const Operation& op, const std::vector<Value>& operands,
                               const std::vector<Value>& results, const std::vector<Value>& cts) {
    if (varied_.count(op.operand(0).impl()) && IsFloatTensor(op.operand(0).type())) {
      const Attribute* attributes = FindAttr(op.attrs(), "composite_attributes");
      if (!attributes || attributes->kind() != Attribute::Kind::kDict)
        return InvalidArgument("autodiff: tlaloc.masked_softmax in @" + f_.name() +
                               " has no composite_attributes");
      const std::vector<int64_t> dims =
          GetIntArrayAttr(attributes->as_dict(), "broadcast_dimensions");
      const Tensor y(results[0], &b_), dy(cts[0], &b_);
      const int64_t last = y.rank() - 1;
      const Tensor keep = BroadcastInDim(Tensor(operands[1], &b_), y.dims(), dims);
      const Tensor dx = Where(keep, y * (dy - Sum(dy * y, {last}, true)), FullLike(y, 0.0));
      TL_RETURN_IF_ERROR(b_.status());
      TL_RETURN_IF_ERROR(
          Accumulate(op.operand(0), dx.value(), "the gradient rule of tlaloc.masked_softmax"));
    }
    for (Value r : op.results()) cotangents_.erase(r.impl());
    return OkStatus();
  }

  // tlaloc.linear_cross_entropy with its gradients (train/loss.h): results (loss sum, count,
  // d loss sum / d hidden, d loss sum / d head) of operands (hidden, head, labels). The operands'
  // gradients are the last two results times the loss sum's cotangent; the forward pass formed
  // them, so nothing of the decomposition is recomputed.
  Status BackwardLinearCrossEntropy(const Operation& op, const std::vector<Value>& results,
                                    const std::vector<Value>& cts) {
    for (int i = 2; i < 4; ++i)
      if (cotangents_.count(op.result(i).impl()))
        return Unimplemented("autodiff: the gradients tlaloc.linear_cross_entropy returns (in @" +
                             f_.name() +
                             ") are used by a differentiated value; a second "
                             "derivative of the loss is not supported");
    const Tensor ct(cts[0], &b_);
    for (int i = 0; i < 2; ++i) {
      if (!varied_.count(op.operand(i).impl())) continue;
      const Tensor d(results[2 + i], &b_);
      Tensor g = d.element_type() == ElementType::kF32
                     ? d * ct
                     : Convert(Convert(d, ElementType::kF32) * ct, d.element_type());
      TL_RETURN_IF_ERROR(b_.status());
      TL_RETURN_IF_ERROR(
          Accumulate(op.operand(i), g.value(), "the gradient rule of tlaloc.linear_cross_entropy"));
    }
    for (Value r : op.results()) cotangents_.erase(r.impl());
    return OkStatus();
  }

  OpBuilder& b_;
  const Function& f_;
  const GradOptions& options_;
  ValueMap primal_, recomputed_;
  std::unordered_set<ValueImpl*> varied_;
  std::unordered_map<ValueImpl*, Value> cotangents_;
  std::unordered_map<const Operation*, int> region_of_;
  std::unordered_set<int> recomputed_regions_;
};

enum class Mode { kVjp, kValueAndGrad, kGrad };

StatusOr<Function*> BuildFunction(Module& module, const Function& f, const GradOptions& options,
                                  const std::string& name, Mode mode) {
  if (module.Find(name))
    return InvalidArgument("autodiff: module already has a function named @" + name);
  std::vector<Type> arg_types = f.argument_types();
  const Operation* ret = f.entry().terminator();
  if (!ret) return InvalidArgument("autodiff: @" + f.name() + " has no return");
  if (mode == Mode::kVjp)
    for (Value r : ret->operands()) arg_types.push_back(r.type());
  if (mode != Mode::kVjp) {
    if (options.output < 0 || options.output >= ret->num_operands())
      return InvalidArgument("autodiff: result " + std::to_string(options.output) + " of @" +
                             f.name() + " does not exist (it has " +
                             std::to_string(ret->num_operands()) + ")");
    const Type& t = ret->operand(options.output).type();
    if (!IsFloatTensor(t) || t.tensor.rank() != 0)
      return InvalidArgument("autodiff: result " + std::to_string(options.output) + " of @" +
                             f.name() + " is " + t.ToString() +
                             "; a gradient needs a floating-point scalar");
  }
  Function* g = module.AddFunction(name, arg_types, {});
  g->set_public(f.is_public());
  OpBuilder b(&g->entry(), &module);
  std::vector<Value> args = g->entry().arguments();
  std::vector<Value> cts(ret->num_operands());
  if (mode == Mode::kVjp) {
    for (int i = 0; i < ret->num_operands(); ++i) cts[i] = args[f.num_arguments() + i];
    args.resize(f.num_arguments());
  } else {
    cts[options.output] =
        Full(b, {}, 1.0, ret->operand(options.output).tensor_type().element_type).value();
  }
  Differentiator d(b, f, options);
  auto values = d.Run(args, cts);
  if (!values.ok()) {
    // Leave no half-built function behind.
    auto& fns = const_cast<std::vector<std::unique_ptr<Function>>&>(module.functions());
    fns.erase(std::remove_if(fns.begin(), fns.end(), [&](const auto& p) { return p.get() == g; }),
              fns.end());
    return values.status();
  }
  std::vector<Value> outs;
  if (mode != Mode::kGrad) outs = values->results;
  outs.insert(outs.end(), values->gradients.begin(), values->gradients.end());
  std::vector<Type> types;
  for (Value v : outs) types.push_back(v.type());
  b.Create("func.return", outs);
  TL_RETURN_IF_ERROR(b.status());
  g->set_result_types(types);
  RemoveDeadOps(*g);
  TL_RETURN_IF_ERROR(VerifyFunction(*g, &module));
  return g;
}

}  // namespace

StatusOr<GradientValues> EmitGradient(OpBuilder& b, const Function& f,
                                      const std::vector<Value>& args,
                                      const std::vector<Value>& result_cotangents,
                                      const GradOptions& options) {
  Differentiator d(b, f, options);
  return d.Run(args, result_cotangents);
}

StatusOr<Function*> Vjp(Module& module, const Function& f, const GradOptions& options,
                        const std::string& name) {
  return BuildFunction(module, f, options, name, Mode::kVjp);
}

StatusOr<Function*> ValueAndGrad(Module& module, const Function& f, const GradOptions& options,
                                 const std::string& name) {
  return BuildFunction(module, f, options, name, Mode::kValueAndGrad);
}

StatusOr<Function*> Grad(Module& module, const Function& f, const GradOptions& options,
                         const std::string& name) {
  return BuildFunction(module, f, options, name, Mode::kGrad);
}

void RemoveDeadOps(Function& fn) {
  std::unordered_map<ValueImpl*, int> uses;
  auto& ops = fn.entry().mutable_operations();
  for (const auto& op : ops) ForEachUse(*op, [&](Value v) { ++uses[v.impl()]; });
  std::vector<bool> dead(ops.size(), false);
  for (size_t i = ops.size(); i-- > 0;) {
    const Operation& op = *ops[i];
    if (op.def().traits.terminator || op.def().traits.side_effecting) continue;
    bool used = false;
    for (Value r : op.results()) used = used || uses[r.impl()] > 0;
    if (used) continue;
    dead[i] = true;
    ForEachUse(op, [&](Value v) { --uses[v.impl()]; });
  }
  size_t k = 0;
  std::erase_if(ops, [&](const std::unique_ptr<Operation>&) { return dead[k++]; });
}

}  // namespace tlaloc::autodiff
