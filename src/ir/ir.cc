#include "tlaloc/ir/ir.h"

#include "tlaloc/ir/op_registry.h"

namespace tlaloc {

std::unique_ptr<Operation> Operation::Create(const OpDef& def, std::vector<Value> operands,
                                             const std::vector<Type>& result_types, AttrDict attrs,
                                             int num_regions) {
  std::unique_ptr<Operation> op(new Operation());
  op->def_ = &def;
  op->operands_ = std::move(operands);
  op->attrs_ = std::move(attrs);
  for (size_t i = 0; i < result_types.size(); ++i) {
    auto v = std::make_unique<ValueImpl>();
    v->type = result_types[i];
    v->producer = op.get();
    v->index = static_cast<int>(i);
    op->results_.push_back(std::move(v));
  }
  for (int i = 0; i < num_regions; ++i) op->regions_.push_back(std::make_unique<Region>(op.get()));
  return op;
}

Operation::~Operation() = default;

const std::string& Operation::name() const { return def_->name; }

std::vector<Value> Operation::results() const {
  std::vector<Value> r;
  for (const auto& v : results_) r.emplace_back(v.get());
  return r;
}
std::vector<Type> Operation::result_types() const {
  std::vector<Type> r;
  for (const auto& v : results_) r.push_back(v->type);
  return r;
}
std::vector<Type> Operation::operand_types() const {
  std::vector<Type> r;
  for (const auto& v : operands_) r.push_back(v.type());
  return r;
}

Value Block::AddArgument(Type type) {
  auto v = std::make_unique<ValueImpl>();
  v->type = std::move(type);
  v->owner_block = this;
  v->index = static_cast<int>(args_.size());
  args_.push_back(std::move(v));
  return Value(args_.back().get());
}
std::vector<Value> Block::arguments() const {
  std::vector<Value> r;
  for (const auto& v : args_) r.emplace_back(v.get());
  return r;
}
std::vector<Type> Block::argument_types() const {
  std::vector<Type> r;
  for (const auto& v : args_) r.push_back(v->type);
  return r;
}
Operation* Block::Append(std::unique_ptr<Operation> op) {
  op->parent_ = this;
  for (auto& r : op->regions_) r->set_parent_op(op.get());
  ops_.push_back(std::move(op));
  return ops_.back().get();
}

Block& Region::AddBlock() {
  blocks_.push_back(std::make_unique<Block>(this));
  return *blocks_.back();
}

Function::Function(std::string name, const std::vector<Type>& arg_types,
                   std::vector<Type> result_types)
    : name_(std::move(name)), result_types_(std::move(result_types)) {
  Block& b = body_.AddBlock();
  for (const auto& t : arg_types) b.AddArgument(t);
  arg_attrs_.resize(arg_types.size());
  result_attrs_.resize(result_types_.size());
}

Value Function::AddArgument(Type type) {
  arg_attrs_.emplace_back();
  return entry().AddArgument(std::move(type));
}

void Function::set_result_types(std::vector<Type> t) {
  result_types_ = std::move(t);
  result_attrs_.resize(result_types_.size());
}

Function* Module::AddFunction(std::string name, const std::vector<Type>& arg_types,
                              std::vector<Type> result_types) {
  functions_.push_back(
      std::make_unique<Function>(std::move(name), arg_types, std::move(result_types)));
  return functions_.back().get();
}

Function* Module::Find(const std::string& name) const {
  for (const auto& f : functions_)
    if (f->name() == name) return f.get();
  return nullptr;
}

Function* Module::Entry() const {
  if (Function* f = Find("main")) return f;
  for (const auto& f : functions_)
    if (f->is_public()) return f.get();
  return nullptr;
}

}  // namespace tlaloc
