// Kernels in the global form of a generation step program (see manual_kernels.h).
#include "tlaloc/shard/manual_kernels.h"

#include <algorithm>

#include "tlaloc/ir/builder.h"
#include "tlaloc/ir/op_registry.h"
#include "tlaloc/ir/rewrite.h"
#include "tlaloc/shard/lowering.h"

namespace tlaloc::shard {

namespace {

Sharding WithoutLastDim(Sharding s) {
  if (!s.dims.empty()) s.dims.back().clear();
  return s;
}

bool IsSplit(const Sharding& s) {
  for (const auto& axes : s.dims)
    if (!axes.empty()) return true;
  return false;
}

}  // namespace

Status AnnotateGenerationStep(Module& module, const std::string& function,
                              const models::ProgramSignature& signature, const ShardingPlan& plan) {
  Function* fn = module.Find(function);
  if (!fn) return NotFound("AnnotateGenerationStep: no function @" + function);
  if (static_cast<int>(signature.inputs.size()) != fn->num_arguments() ||
      static_cast<int>(signature.outputs.size()) != static_cast<int>(fn->result_types().size()))
    return InvalidArgument("AnnotateGenerationStep: the signature does not describe @" + function);
  AddMesh(module, kMeshName, plan.mesh());
  std::vector<Sharding> args;
  for (const models::PortSpec& in : signature.inputs) {
    Sharding s = Sharding::Replicated(in.type.rank(), kMeshName);
    if (in.port == models::Port::kWeight) {
      const auto& specs = plan.weights();
      auto it = std::find_if(specs.begin(), specs.end(),
                             [&](const models::WeightSpec& w) { return w.name == in.name; });
      if (it == specs.end())
        return InvalidArgument("AnnotateGenerationStep: weight " + in.name + " is not the plan's");
      s = plan.weight(static_cast<size_t>(it - specs.begin()));
    } else if ((in.port == models::Port::kKCache || in.port == models::Port::kVCache) &&
               in.type.rank() == 4 && plan.model_size() > 1) {
      s.dims[1] = {kModelAxis};  // kv heads
    }
    TL_RETURN_IF_ERROR(s.Check(plan.mesh(), in.type).WithContext("input " + in.name));
    args.push_back(s);
  }
  for (size_t i = 0; i < args.size(); ++i) SetArgSharding(*fn, static_cast<int>(i), args[i]);
  for (size_t j = 0; j < signature.outputs.size(); ++j) {
    const models::PortSpec& out = signature.outputs[j];
    SetResultSharding(*fn, static_cast<int>(j),
                      out.aliased_input >= 0 ? args[out.aliased_input]
                                             : Sharding::Replicated(out.type.rank(), kMeshName));
  }
  return CheckShardings(module, *fn);
}

std::function<Tensor(std::string_view what, const Tensor&)> GenerationAnnotateHook(
    const ShardingPlan& plan) {
  return [plan](std::string_view what, const Tensor& x) {
    const Sharding s = plan.activation(what);
    return static_cast<int64_t>(s.dims.size()) == x.type().rank() ? ShardingConstraint(x, s) : x;
  };
}

Sharding ValueSharding(const Function& fn, Value v, const Mesh& mesh) {
  for (int depth = 0; depth < 64 && v; ++depth) {
    std::optional<Sharding> found;
    if (v.is_block_argument()) {
      if (v.owner_block() == &fn.entry()) {
        auto s = ArgSharding(fn, v.index());
        if (s.ok() && *s) found = **s;
      }
      if (!found) break;
    } else if (const Operation* p = v.producer(); p->name() == "sdy.sharding_constraint") {
      if (const Attribute* a = FindAttr(p->attrs(), "sharding")) {
        auto s = Sharding::FromSdy(a->as_string());
        if (s.ok()) found = *s;
      }
      if (!found) break;
    } else if (p->def().traits.elementwise || p->name() == "stablehlo.convert") {
      Value next;
      for (Value o : p->operands())
        if (o.tensor_type().dims == v.tensor_type().dims) next = o;
      v = next;
      continue;
    } else {
      break;
    }
    if (found->Check(mesh, v.tensor_type()).ok()) return *found;
    break;
  }
  return Sharding::Replicated(v ? static_cast<int>(v.tensor_type().rank()) : 0, kMeshName);
}

StatusOr<int> PlaceKernelsInManualComputations(Module& module, const std::string& function) {
  Function* fn = module.Find(function);
  if (!fn) return NotFound("PlaceKernelsInManualComputations: no function @" + function);
  TL_ASSIGN_OR_RETURN(Mesh mesh, FindMesh(module, kMeshName));
  const OpRegistry& reg = OpRegistry::Global();
  const OpDef* manual_def = reg.Find("sdy.manual_computation");
  const OpDef* return_def = reg.Find("sdy.return");
  if (!manual_def || !return_def) return Internal("sdy.manual_computation is not registered");
  std::vector<Attribute> manual_axes;
  for (const MeshAxis& a : mesh.axes()) manual_axes.push_back(Attribute::String(a.name));
  Block& block = fn->entry();
  auto& ops = block.mutable_operations();
  int wrapped = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    Operation* call = ops[i].get();
    if (call->name() != "stablehlo.custom_call") continue;
    std::string label = "stablehlo.custom_call";
    if (const Attribute* t = FindAttr(call->attrs(), "call_target_name"))
      label += " @" + t->as_string();
    std::vector<Sharding> in, out;
    for (Value v : call->operands()) in.push_back(WithoutLastDim(ValueSharding(*fn, v, mesh)));
    for (Value r : call->results()) {
      Sharding s = Sharding::Replicated(static_cast<int>(r.tensor_type().rank()), kMeshName);
      for (size_t k = 0; k < in.size(); ++k)
        if (call->operand(static_cast<int>(k)).tensor_type().dims == r.tensor_type().dims) {
          s = in[k];
          break;
        }
      out.push_back(s);
    }
    // A split operand must be the shape and sharding of a result; else all whole.
    bool consistent = true;
    for (size_t k = 0; k < in.size() && consistent; ++k) {
      if (!IsSplit(in[k])) continue;
      bool matches = false;
      for (size_t j = 0; j < out.size(); ++j)
        matches |= call->result(static_cast<int>(j)).tensor_type().dims ==
                       call->operand(static_cast<int>(k)).tensor_type().dims &&
                   out[j] == in[k];
      consistent = matches;
    }
    if (!consistent) {
      for (size_t k = 0; k < in.size(); ++k)
        in[k] = Sharding::Replicated(static_cast<int>(in[k].dims.size()), kMeshName);
      for (size_t j = 0; j < out.size(); ++j)
        out[j] = Sharding::Replicated(static_cast<int>(out[j].dims.size()), kMeshName);
    }
    // The body: the call on the local parts.
    auto region = std::make_unique<Region>();
    Block& body = region->AddBlock();
    std::vector<Value> args;
    for (size_t k = 0; k < in.size(); ++k) {
      const Value v = call->operand(static_cast<int>(k));
      TL_ASSIGN_OR_RETURN(TensorType local, in[k].LocalType(mesh, v.tensor_type()));
      args.push_back(body.AddArgument(Type(local)));
    }
    std::vector<Type> local_results;
    for (size_t j = 0; j < out.size(); ++j) {
      TL_ASSIGN_OR_RETURN(TensorType local,
                          out[j].LocalType(mesh, call->result(static_cast<int>(j)).tensor_type()));
      local_results.push_back(Type(local));
    }
    Operation* inner =
        body.Append(Operation::Create(call->def(), args, local_results, call->attrs()));
    body.Append(Operation::Create(*return_def, inner->results(), {}, {}));
    auto list = [](const std::vector<Sharding>& shardings) {
      std::vector<Attribute> a;
      for (const Sharding& s : shardings) a.push_back(Attribute::Opaque(s.ToSdy()));
      return Attribute::Array(std::move(a));
    };
    AttrDict attrs;
    attrs["in_shardings"] = list(in);
    attrs["out_shardings"] = list(out);
    attrs["manual_axes"] = Attribute::Array(manual_axes);
    std::vector<std::unique_ptr<Region>> regions;
    regions.push_back(std::move(region));
    auto manual = CreateOperation(*manual_def, call->operands(), attrs, call->result_types(),
                                  std::move(regions));
    if (!manual.ok())
      return manual.status().WithContext("placing " + label + " in sdy.manual_computation");
    // In the call's place; its results' uses read the manual computation's.
    Operation* placed = block.Append(std::move(*manual));
    std::rotate(ops.begin() + static_cast<std::ptrdiff_t>(i) + 1, ops.end() - 1, ops.end());
    for (int r = 0; r < call->num_results(); ++r)
      for (size_t j = i + 2; j < ops.size(); ++j)
        ReplaceUses(*ops[j], call->result(r).impl(), placed->result(r));
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
    ++wrapped;
  }
  TL_RETURN_IF_ERROR(Verify(module).WithContext("after placing kernels in manual computations"));
  return wrapped;
}

}  // namespace tlaloc::shard
