// The elementwise op area: shared helpers of elementwise_kernels.h and the area's registration.
// The ops themselves live in elementwise_{math,arith,bitwise,compare,convert,chlo}.cc.
#include "elementwise_kernels.h"
#include "op_areas.h"

namespace tlaloc::ops {

namespace ew {

unsigned KindOf(ElementType et) {
  if (et == ElementType::kPred) return kPredK;
  if (IsFloat(et)) return kFloatK;
  if (IsSignedInt(et)) return kSignedK;
  return kUnsignedK;
}

std::string KindsToString(unsigned kinds) {
  std::string s;
  auto add = [&](unsigned k, const char* name) {
    if (!(kinds & k)) return;
    if (!s.empty()) s += " or ";
    s += name;
  };
  add(kPredK, "i1");
  add(kSignedK, "signed integer");
  add(kUnsignedK, "unsigned integer");
  add(kFloatK, "float");
  return s;
}

Status CheckKinds(const Type& t, unsigned allowed, const std::string& what) {
  if (!t.is_tensor())
    return InvalidArgument("expected " + what + " to be a tensor, got " + t.ToString());
  if (!(KindOf(t.tensor.element_type) & allowed))
    return InvalidArgument("expected " + what + " of " + KindsToString(allowed) +
                           " element type, got " + t.ToString());
  return OkStatus();
}

Status UnsupportedElementType(const Operation& op, ElementType et) {
  return InvalidArgument(op.name() + " does not support element type " + std::string(MlirName(et)));
}

OpDef& DefineSameType(OpRegistry& r, const std::string& name, int num_operands, unsigned kinds,
                      EvalFn eval, bool result_pred) {
  OpDef d;
  d.name = name;
  d.traits.elementwise = true;
  d.traits.writes_all_results = true;  // every eval maps all elements
  d.traits.in_place = OpTraits::InPlace::kAnyOperand;  // each element read before written
  d.infer = [num_operands, kinds,
             result_pred](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, num_operands));
    TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
    TL_RETURN_IF_ERROR(ExpectSameOperandTypes(in));
    TL_RETURN_IF_ERROR(CheckKinds(in.operand_types[0], kinds, "operands"));
    Type t = in.operand_types[0];
    if (result_pred) t.tensor.element_type = ElementType::kPred;
    return std::vector<Type>{t};
  };
  d.eval = std::move(eval);
  d.print = [](const Operation& op, OpPrinter& p) { PrintSameTypeOrFunctional(op, p); };
  d.parse = ParseSameTypeOrFunctional;
  return r.Register(std::move(d));
}

}  // namespace ew

void RegisterElementwiseOps(OpRegistry& r) {
  ew::RegisterElementwiseMathOps(r);
  ew::RegisterElementwiseArithmeticOps(r);
  ew::RegisterElementwiseBitwiseOps(r);
  ew::RegisterElementwiseCompareOps(r);
  ew::RegisterElementwiseConvertOps(r);
  ew::RegisterChloOps(r);
}

}  // namespace tlaloc::ops
