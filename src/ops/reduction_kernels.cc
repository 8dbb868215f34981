#include "reduction_kernels.h"

#include <set>
#include <unordered_map>

namespace tlaloc::ops {

namespace {

struct BinaryName {
  BinaryKind kind;
  const char* name;
};
constexpr BinaryName kBinaryNames[] = {
    {BinaryKind::kAdd, "stablehlo.add"},     {BinaryKind::kMul, "stablehlo.multiply"},
    {BinaryKind::kMax, "stablehlo.maximum"}, {BinaryKind::kMin, "stablehlo.minimum"},
    {BinaryKind::kAnd, "stablehlo.and"},     {BinaryKind::kOr, "stablehlo.or"},
    {BinaryKind::kXor, "stablehlo.xor"},
};

bool IsScalarTensor(const Type& t) { return t.is_tensor() && t.tensor.rank() == 0; }

}  // namespace

const char* BinaryOpName(BinaryKind k) {
  for (const auto& n : kBinaryNames)
    if (n.kind == k) return n.name;
  return "";
}

std::optional<BinaryKind> BinaryKindFromOpName(const std::string& name) {
  for (const auto& n : kBinaryNames)
    if (name == n.name) return n.kind;
  return std::nullopt;
}

bool BinaryKindSupports(BinaryKind k, ElementType et) {
  bool bitwise = k == BinaryKind::kAnd || k == BinaryKind::kOr || k == BinaryKind::kXor;
  return !(bitwise && IsFloat(et));
}

std::optional<BinaryKind> MatchBinaryBody(const Region& region, bool* in_order) {
  if (region.blocks().size() != 1) return std::nullopt;
  const Block& b = region.front();
  if (b.num_arguments() != 2 || b.operations().size() != 2) return std::nullopt;
  const Operation& op = *b.operations()[0];
  const Operation& ret = *b.operations()[1];
  if (op.num_operands() != 2 || op.num_results() != 1 || op.num_regions() != 0 ||
      !op.attrs().empty())
    return std::nullopt;
  if (ret.num_operands() != 1 || !(ret.operand(0) == op.result(0))) return std::nullopt;
  Value a0 = b.argument(0), a1 = b.argument(1);
  bool order = op.operand(0) == a0 && op.operand(1) == a1;
  bool swapped = op.operand(0) == a1 && op.operand(1) == a0;
  if (!order && !swapped) return std::nullopt;
  if (!IsScalarTensor(a0.type()) || !(a0.type() == a1.type()) ||
      !(op.result(0).type() == a0.type()))
    return std::nullopt;
  auto kind = BinaryKindFromOpName(op.name());
  if (!kind || !BinaryKindSupports(*kind, a0.tensor_type().element_type)) return std::nullopt;
  if (in_order) *in_order = order;
  return kind;
}

std::optional<CompareSpec> MatchCompareBody(const Region& region) {
  if (region.blocks().size() != 1) return std::nullopt;
  const Block& b = region.front();
  if (b.num_arguments() < 2 || b.operations().size() != 2) return std::nullopt;
  const Operation& op = *b.operations()[0];
  const Operation& ret = *b.operations()[1];
  if (op.name() != "stablehlo.compare" || op.num_operands() != 2) return std::nullopt;
  if (ret.num_operands() != 1 || !(ret.operand(0) == op.result(0))) return std::nullopt;
  CompareSpec spec;
  if (op.operand(0) == b.argument(0) && op.operand(1) == b.argument(1)) {
    spec.swapped = false;
  } else if (op.operand(0) == b.argument(1) && op.operand(1) == b.argument(0)) {
    spec.swapped = true;
  } else {
    return std::nullopt;
  }
  if (!IsScalarTensor(b.argument(0).type())) return std::nullopt;
  const Attribute* dir = FindAttr(op.attrs(), "comparison_direction");
  if (!dir) return std::nullopt;
  const std::string& d = dir->as_string();
  if (d == "EQ")
    spec.dir = CompareDir::kEQ;
  else if (d == "NE")
    spec.dir = CompareDir::kNE;
  else if (d == "LT")
    spec.dir = CompareDir::kLT;
  else if (d == "LE")
    spec.dir = CompareDir::kLE;
  else if (d == "GT")
    spec.dir = CompareDir::kGT;
  else if (d == "GE")
    spec.dir = CompareDir::kGE;
  else
    return std::nullopt;
  ElementType et = b.argument(0).tensor_type().element_type;
  std::string type = GetStringAttr(op.attrs(), "compare_type", "");
  if (type.empty()) {
    spec.kind = CompareKind::kDefault;
  } else if (type == "FLOAT") {
    spec.kind = CompareKind::kFloat;
  } else if (type == "TOTALORDER") {
    spec.kind = CompareKind::kTotalOrder;
  } else if (type == "SIGNED") {
    spec.kind = CompareKind::kSigned;
  } else if (type == "UNSIGNED") {
    spec.kind = CompareKind::kUnsigned;
  } else {
    return std::nullopt;
  }
  // A compare type that does not fit the element type is left to the op itself to judge.
  bool is_float = IsFloat(et);
  if (is_float && (spec.kind == CompareKind::kSigned || spec.kind == CompareKind::kUnsigned))
    return std::nullopt;
  if (!is_float && (spec.kind == CompareKind::kFloat || spec.kind == CompareKind::kTotalOrder))
    return std::nullopt;
  return spec;
}

Literal ElementAsScalar(const Literal& l, int64_t i) {
  Literal s(TensorType(l.element_type(), {}));
  CopyElement(l, i, s, 0);
  return s;
}

Status CheckDimensionList(const std::vector<int64_t>& dims, int64_t rank, const std::string& what) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank)
      return InvalidArgument(what + " has dimension " + std::to_string(d) +
                             ", expected one in [0, " + std::to_string(rank) + ")");
    if (seen[d]) return InvalidArgument(what + " repeats dimension " + std::to_string(d));
    seen[d] = true;
  }
  return OkStatus();
}

namespace {

// Forwards to the interpreter's context but never lets an op take over an operand's buffer:
// values of a vectorised body may be read again by later ops.
class NoReuseContext : public EvalContext {
 public:
  explicit NoReuseContext(EvalContext& inner) : inner_(inner) {}
  StatusOr<std::vector<Literal>> RunRegion(const Region& region,
                                           std::vector<Literal> args) override {
    return inner_.RunRegion(region, std::move(args));
  }
  StatusOr<std::vector<Literal>> CallFunction(const std::string& name,
                                              std::vector<Literal> args) override {
    return inner_.CallFunction(name, std::move(args));
  }
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t)>& body) override {
    inner_.ParallelFor(n, grain, body);
  }
  bool CanReuseOperand(int) const override { return false; }
  const std::function<Status(std::span<const Literal>, std::vector<Literal>&)>* FindCustomCall(
      const std::string& target) const override {
    return inner_.FindCustomCall(target);
  }

 private:
  EvalContext& inner_;
};

}  // namespace

bool RegionIsVectorizable(const Region& region) {
  if (region.blocks().size() != 1) return false;
  const Block& b = region.front();
  std::set<const ValueImpl*> defined;
  for (Value a : b.arguments()) {
    if (!IsScalarTensor(a.type())) return false;
    defined.insert(a.impl());
  }
  for (const auto& op : b.operations()) {
    bool is_const = op->name() == "stablehlo.constant";
    if (!op->def().traits.terminator && !is_const &&
        (!op->def().traits.elementwise || !op->def().eval || op->num_regions() != 0))
      return false;
    for (Value v : op->operands())
      if (!defined.count(v.impl())) return false;
    for (Value r : op->results()) {
      if (!IsScalarTensor(r.type())) return false;
      defined.insert(r.impl());
    }
  }
  return b.terminator() && b.terminator()->def().traits.terminator;
}

StatusOr<std::vector<Literal>> RunRegionVectorized(const Region& region, std::vector<Literal> args,
                                                   int64_t m, EvalContext& ctx) {
  NoReuseContext no_reuse(ctx);
  const Block& b = region.front();
  std::unordered_map<const ValueImpl*, Literal> values;
  for (int i = 0; i < b.num_arguments(); ++i) values[b.argument(i).impl()] = std::move(args[i]);
  for (const auto& op_ptr : b.operations()) {
    const Operation& op = *op_ptr;
    if (op.def().traits.terminator) {
      std::vector<Literal> out;
      for (Value v : op.operands()) out.push_back(values.at(v.impl()));
      return out;
    }
    if (op.name() == "stablehlo.constant") {
      const Literal& c = FindAttr(op.attrs(), "value")->as_elements();
      Literal v(TensorType(c.element_type(), {m}));
      for (int64_t i = 0; i < m; ++i) CopyElement(c, 0, v, i);
      values[op.result(0).impl()] = std::move(v);
      continue;
    }
    std::vector<Literal> operands;
    for (Value v : op.operands()) operands.push_back(values.at(v.impl()));
    std::vector<Literal> results;
    for (Value r : op.results())
      results.emplace_back(TensorType(r.tensor_type().element_type, {m}));
    Status s = op.def().eval(op, operands, results, no_reuse);
    if (!s.ok()) return s.WithContext(op.name());
    for (int i = 0; i < op.num_results(); ++i) {
      if (results[i].num_elements() != m)
        return Internal(op.name() + " changed the length of a vectorised value");
      values[op.result(i).impl()] = std::move(results[i]);
    }
  }
  return InvalidArgument("the region has no terminator");
}

StatusOr<size_t> CheckInputsThenInits(const InferInput& in) {
  const size_t n2 = in.operand_types.size();
  if (n2 == 0 || n2 % 2 != 0)
    return InvalidArgument("expected N inputs followed by N init values, got " +
                           std::to_string(n2) + " operands");
  const size_t n = n2 / 2;
  const TensorType& t0 = in.operand_types[0].tensor;
  for (size_t i = 0; i < n; ++i) {
    const TensorType& t = in.operand_types[i].tensor;
    if (t.dims != t0.dims)
      return InvalidArgument("input " + std::to_string(i) + " has shape " + t.ToString() +
                             ", expected the shape of input 0, " + t0.ToString());
    const TensorType& init = in.operand_types[n + i].tensor;
    if (init.rank() != 0)
      return InvalidArgument("init value " + std::to_string(i) + " must be a scalar, got " +
                             init.ToString());
  }
  return n;
}

StatusOr<std::vector<ElementType>> ReductionBodyResults(const Region& body, size_t n) {
  if (body.empty()) return std::vector<ElementType>{};
  const Block& block = body.front();
  if (block.num_arguments() != static_cast<int>(2 * n))
    return InvalidArgument("the body takes " + std::to_string(block.num_arguments()) +
                           " arguments, expected " + std::to_string(2 * n));
  if (!block.terminator()) return std::vector<ElementType>{};
  TL_ASSIGN_OR_RETURN(std::vector<Type> ret, RegionReturnTypes(body));
  if (ret.size() != n)
    return InvalidArgument("the body returns " + std::to_string(ret.size()) + " values, expected " +
                           std::to_string(n));
  std::vector<ElementType> ets;
  for (const Type& t : ret) {
    if (!t.is_tensor() || t.tensor.rank() != 0)
      return InvalidArgument("the body must return scalars, got " + t.ToString());
    ets.push_back(t.tensor.element_type);
  }
  return ets;
}

StatusOr<std::vector<Type>> RegionReturnTypes(const Region& region) {
  if (region.blocks().empty()) return InvalidArgument("expected a non-empty region");
  const Operation* term = region.front().terminator();
  if (!term || !term->def().traits.terminator)
    return InvalidArgument("expected the region to end with stablehlo.return");
  return term->operand_types();
}

}  // namespace tlaloc::ops
