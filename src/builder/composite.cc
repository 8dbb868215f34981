#include "tlaloc/builder/composite.h"

#include <unordered_map>

namespace tlaloc {

void CloneBlockInto(const Block& src, Block& dst, std::unordered_map<ValueImpl*, Value>& map) {
  for (const auto& op : src.operations()) {
    std::vector<Value> operands;
    for (Value v : op->operands()) operands.push_back(map.count(v.impl()) ? map[v.impl()] : v);
    auto copy =
        Operation::Create(op->def(), operands, op->result_types(), op->attrs(), op->num_regions());
    for (int r = 0; r < op->num_regions(); ++r)
      for (const auto& b : op->region(r).blocks()) {
        Block& nb = copy->region(r).AddBlock();
        for (Value a : b->arguments()) map[a.impl()] = nb.AddArgument(a.type());
        CloneBlockInto(*b, nb, map);
      }
    Operation* placed = dst.Append(std::move(copy));
    for (int i = 0; i < op->num_results(); ++i) map[op->result(i).impl()] = placed->result(i);
  }
}

void CopyPrivateFunctions(const Module& from, Module& to) {
  for (const auto& f : from.functions()) {
    if (f->is_public() || to.Find(f->name())) continue;
    Function* copy = to.AddFunction(f->name(), f->argument_types(), f->result_types());
    copy->set_public(false);
    std::unordered_map<ValueImpl*, Value> map;
    for (int i = 0; i < f->num_arguments(); ++i)
      map[f->entry().argument(i).impl()] = copy->entry().argument(i);
    CloneBlockInto(f->entry(), copy->entry(), map);
  }
}

std::string CompositeTypeName(const TensorType& t) {
  std::string s(ShortName(t.element_type));
  s += "_";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? "x" : "") + std::to_string(t.dims[i]);
  if (t.dims.empty()) s += "scalar";
  return s;
}

std::vector<Tensor> EmitComposite(
    std::string_view name, const std::vector<Tensor>& operands, AttrDict attributes,
    const std::string& function,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>& args)>& body) {
  OpBuilder* b = nullptr;
  for (const Tensor& t : operands) {
    if (!t.valid()) return {};
    if (!b) b = t.builder();
  }
  if (!b) return {};
  Module* module = b->module();
  if (module == nullptr) return body(operands);
  const Function* fn = module->Find(function);
  if (fn == nullptr) {
    std::vector<Type> arg_types;
    for (const Tensor& t : operands) arg_types.push_back(t.value().type());
    FunctionBuilder fb(module, function, arg_types);
    fb.function()->set_public(false);
    std::vector<Tensor> args;
    for (size_t i = 0; i < operands.size(); ++i) args.push_back(fb.arg(static_cast<int>(i)));
    Status s = fb.Return(body(args));
    if (!s.ok()) {
      b->Fail(s.WithContext("the decomposition of composite \"" + std::string(name) + "\""));
      return {};
    }
    fn = fb.function();
  }
  std::vector<Value> values;
  for (const Tensor& t : operands) values.push_back(t.value());
  AttrDict attrs;
  attrs["name"] = Attribute::String(std::string(name));
  attrs["composite_attributes"] = Attribute::Dict(std::move(attributes));
  attrs["decomposition"] = Attribute::Symbol(function);
  attrs["version"] = Attribute::Int(1, ElementType::kS32);
  std::vector<Tensor> results;
  for (Value v : b->Create("stablehlo.composite", values, std::move(attrs), fn->result_types()))
    results.emplace_back(v, b);
  return results;
}

}  // namespace tlaloc
