#include "tlaloc/ir/builder.h"

namespace tlaloc {

namespace {
std::string TypesToString(const std::vector<Type>& types) {
  std::string s = "(";
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i].ToString();
  return s + ")";
}
}  // namespace

StatusOr<std::unique_ptr<Operation>> CreateOperation(
    const OpDef& def, std::vector<Value> operands, AttrDict attrs,
    const std::optional<std::vector<Type>>& result_types,
    std::vector<std::unique_ptr<Region>> regions) {
  std::vector<Type> operand_types;
  for (const Value& v : operands) {
    if (!v) return InvalidArgument(def.name + ": an operand is an invalid value");
    operand_types.push_back(v.type());
  }
  // num_regions < 0 means "any number" (case has one region per branch).
  if (def.num_regions >= 0 && static_cast<int>(regions.size()) != def.num_regions)
    return InvalidArgument(def.name + ": expected " + std::to_string(def.num_regions) +
                           " region(s), got " + std::to_string(regions.size()));
  InferInput in{operand_types, attrs, regions, result_types ? &*result_types : nullptr};
  auto inferred = def.infer(in);
  if (!inferred.ok()) return inferred.status().WithContext(def.name);
  if (result_types && !(*result_types == *inferred)) {
    return InvalidArgument(def.name + ": declared result types " + TypesToString(*result_types) +
                           " do not match the inferred " + TypesToString(*inferred));
  }
  auto op = Operation::Create(def, std::move(operands), *inferred, std::move(attrs), 0);
  // Move the regions in after creation so their parent is the new op.
  auto& op_regions = const_cast<std::vector<std::unique_ptr<Region>>&>(op->regions());
  for (auto& r : regions) {
    r->set_parent_op(op.get());
    op_regions.push_back(std::move(r));
  }
  return op;
}

void OpBuilder::Fail(Status s) {
  if (status_.ok()) status_ = std::move(s);
}

std::vector<Value> OpBuilder::Create(std::string_view name, std::vector<Value> operands,
                                     AttrDict attrs, std::optional<std::vector<Type>> result_types,
                                     std::vector<std::unique_ptr<Region>> regions) {
  last_op_ = nullptr;
  for (const Value& v : operands)
    if (!v) {
      Fail(InvalidArgument(std::string(name) + ": operand is invalid (an earlier error)"));
      return {};
    }
  auto def = OpRegistry::Global().Get(name);
  if (!def.ok()) {
    Fail(def.status());
    return {};
  }
  auto op = CreateOperation(**def, std::move(operands), std::move(attrs), result_types,
                            std::move(regions));
  if (!op.ok()) {
    Fail(op.status());
    return {};
  }
  last_op_ = block_->Append(std::move(*op));
  return last_op_->results();
}

Value OpBuilder::CreateOne(std::string_view name, std::vector<Value> operands, AttrDict attrs,
                           std::optional<std::vector<Type>> result_types,
                           std::vector<std::unique_ptr<Region>> regions) {
  auto r = Create(name, std::move(operands), std::move(attrs), std::move(result_types),
                  std::move(regions));
  return r.empty() ? Value() : r[0];
}

}  // namespace tlaloc
