// compare, select and clamp.
//   stablehlo.compare  LT, %a, %b,  FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
//   stablehlo.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>
//   stablehlo.clamp %min, %x, %max : tensor<4xf32>      (or a functional type for scalar bounds)
#include <array>
#include <string_view>

#include "elementwise_kernels.h"

namespace tlaloc::ops::ew {

namespace {

using Values = std::vector<Value>;

enum class Dir { kEQ, kNE, kGE, kGT, kLE, kLT };
constexpr std::array<std::string_view, 6> kDirNames = {"EQ", "NE", "GE", "GT", "LE", "LT"};
constexpr std::array<std::string_view, 5> kTypeNames = {"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED",
                                                        "NOTYPE"};

std::optional<Dir> ParseDir(std::string_view s) {
  for (size_t i = 0; i < kDirNames.size(); ++i)
    if (kDirNames[i] == s) return static_cast<Dir>(i);
  return std::nullopt;
}

bool IsCompareType(std::string_view s) {
  for (auto n : kTypeNames)
    if (n == s) return true;
  return false;
}

template <typename K>
bool Apply(Dir d, K a, K b) {
  switch (d) {
    case Dir::kEQ:
      return a == b;
    case Dir::kNE:
      return a != b;
    case Dir::kGE:
      return a >= b;
    case Dir::kGT:
      return a > b;
    case Dir::kLE:
      return a <= b;
    case Dir::kLT:
      return a < b;
  }
  return false;
}

// TOTALORDER key: the IEEE bit pattern made monotonic as a signed integer, so that
// -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN.
template <typename T>
int64_t TotalOrderKey(T v) {
  int64_t bits;
  int width;
  if constexpr (kIsHalfLike<T>) {
    bits = static_cast<int16_t>(v.bits);
    width = 16;
  } else if constexpr (std::is_same_v<T, float>) {
    bits = std::bit_cast<int32_t>(v);
    width = 32;
  } else {
    bits = std::bit_cast<int64_t>(v);
    width = 64;
  }
  const int64_t magnitude_mask =
      width == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (width - 1)) - 1;
  return bits < 0 ? bits ^ magnitude_mask : bits;
}

StatusOr<std::vector<Type>> InferCompare(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectOperandCount(in, 2));
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  TL_RETURN_IF_ERROR(ExpectSameOperandTypes(in));
  const Attribute* dir = FindAttr(in.attrs, "comparison_direction");
  if (!dir || (dir->kind() != Attribute::Kind::kEnum && dir->kind() != Attribute::Kind::kString) ||
      !ParseDir(dir->as_string()))
    return InvalidArgument(
        "expected a 'comparison_direction' attribute of EQ, NE, GE, GT, LE or LT");
  ElementType et = in.operand_types[0].tensor.element_type;
  if (const Attribute* ct = FindAttr(in.attrs, "compare_type")) {
    const std::string& t = ct->as_string();
    if (!IsCompareType(t))
      return InvalidArgument(
          "expected 'compare_type' FLOAT, TOTALORDER, SIGNED, UNSIGNED or "
          "NOTYPE, got " +
          ct->DebugString());
    bool ok = t == "NOTYPE" || ((t == "FLOAT" || t == "TOTALORDER") && IsFloat(et)) ||
              (t == "SIGNED" && IsSignedInt(et)) ||
              (t == "UNSIGNED" && (IsUnsignedInt(et) || et == ElementType::kPred));
    if (!ok)
      return InvalidArgument("compare_type " + t + " does not fit operands of type " +
                             in.operand_types[0].ToString());
  }
  Type r = in.operand_types[0];
  r.tensor.element_type = ElementType::kPred;
  return std::vector<Type>{r};
}

Status EvalCompare(const Operation& op, std::span<const Literal> in, std::vector<Literal>& out,
                   EvalContext& ctx) {
  Dir dir = *ParseDir(GetStringAttr(op.attrs(), "comparison_direction"));
  bool total = false;
  if (const Attribute* ct = FindAttr(op.attrs(), "compare_type"))
    total = ct->as_string() == "TOTALORDER";
  return DispatchElementType(in[0].element_type(), [&]<typename T>() -> Status {
    if constexpr (kIsFloatLike<T>) {
      if (total) {
        Map2<T, T, bool>(ctx, in[0], in[1], out[0], [dir](T a, T b) {
          return Apply(dir, TotalOrderKey(a), TotalOrderKey(b));
        });
        return OkStatus();
      }
    }
    Map2<T, T, bool>(ctx, in[0], in[1], out[0],
                     [dir](T a, T b) { return Apply(dir, Up(a), Up(b)); });
    return OkStatus();
  });
}

void RegisterCompare(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.compare";
  d.traits.writes_all_results = true;
  d.traits.elementwise = true;
  d.infer = InferCompare;
  d.eval = EvalCompare;
  d.print = [](const Operation& op, OpPrinter& p) {
    p.Print("  " + GetStringAttr(op.attrs(), "comparison_direction") + ", ");
    p.PrintOperand(op.operand(0));
    p.Print(", ");
    p.PrintOperand(op.operand(1));
    if (const Attribute* ct = FindAttr(op.attrs(), "compare_type"))
      p.Print(",  " + ct->as_string());
    p.PrintOptionalAttrDict(op.attrs(), {"comparison_direction", "compare_type"});
    p.Print(" : ");
    p.PrintFunctionalType(op);
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_ASSIGN_OR_RETURN(std::string dir, p.ParseIdentifier());
    if (!ParseDir(dir))
      return p.Error("expected a comparison direction (EQ, NE, GE, GT, LE, LT), got " + dir);
    op.attrs["comparison_direction"] = Attribute::Enum(dir, "comparison_direction");
    TL_RETURN_IF_ERROR(p.ParsePunct(","));
    TL_ASSIGN_OR_RETURN(Value a, p.ParseOperand());
    TL_RETURN_IF_ERROR(p.ParsePunct(","));
    TL_ASSIGN_OR_RETURN(Value b, p.ParseOperand());
    op.operands = {a, b};
    if (p.ParseOptionalPunct(",")) {
      TL_ASSIGN_OR_RETURN(std::string type, p.ParseIdentifier());
      if (!IsCompareType(type))
        return p.Error(
            "expected a comparison type (FLOAT, TOTALORDER, SIGNED, UNSIGNED, "
            "NOTYPE), got " +
            type);
      op.attrs["compare_type"] = Attribute::Enum(type, "comparison_type");
    }
    TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
    TL_RETURN_IF_ERROR(p.ParsePunct(":"));
    std::vector<Type> inputs;
    return p.ParseFunctionalType(inputs, op.result_types);
  };
  r.Register(std::move(d));
}

// Either the same type as `like` or a rank-0 tensor of its element type.
bool SameOrScalarOf(const Type& t, const Type& like) {
  return t == like || (t.is_tensor() && t.tensor.rank() == 0 &&
                       t.tensor.element_type == like.tensor.element_type);
}

void RegisterSelect(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.select";
  d.traits.writes_all_results = true;
  d.traits.in_place = OpTraits::InPlace::kAnyOperand;  // on_true or on_false
  d.traits.elementwise = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 3));
    TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
    const Type& pred = in.operand_types[0];
    const Type& on_true = in.operand_types[1];
    if (pred.tensor.element_type != ElementType::kPred)
      return InvalidArgument("expected the predicate (operand 0) to be of i1 type, got " +
                             pred.ToString());
    if (!(on_true == in.operand_types[2]))
      return InvalidArgument("expected on_true and on_false of the same type, got " +
                             on_true.ToString() + " and " + in.operand_types[2].ToString());
    if (pred.tensor.rank() != 0 && pred.tensor.dims != on_true.tensor.dims)
      return InvalidArgument("expected the predicate to be a scalar or of shape " +
                             on_true.ToString() + ", got " + pred.ToString());
    return std::vector<Type>{on_true};
  };
  d.eval = [](const Operation&, std::span<const Literal> in, std::vector<Literal>& out,
              EvalContext& ctx) -> Status {
    if (in[0].num_elements() == 1 && out[0].num_elements() != 1) {
      out[0] = in[0].span<bool>()[0] ? in[1] : in[2];  // a scalar predicate picks a whole operand
      return OkStatus();
    }
    ReuseDeadOperand(in, out, ctx);  // each element is read before it is written
    const bool* p = in[0].span<bool>().data();
    auto run = [&]<typename U>() {
      const U* t = reinterpret_cast<const U*>(in[1].data());
      const U* f = reinterpret_cast<const U*>(in[2].data());
      U* o = reinterpret_cast<U*>(out[0].data());
      ParallelRange(ctx, out[0].num_elements(), [&](int64_t lo, int64_t hi) {
        // Branch-free and of one element width, so the compiler vectorises it.
        for (int64_t i = lo; i < hi; ++i) o[i] = p[i] ? t[i] : f[i];
      });
    };
    switch (ElementSize(in[1].element_type())) {
      case 1:
        run.operator()<uint8_t>();
        break;
      case 2:
        run.operator()<uint16_t>();
        break;
      case 4:
        run.operator()<uint32_t>();
        break;
      default:
        run.operator()<uint64_t>();
        break;
    }
    return OkStatus();
  };
  // "%p, %t, %f : pred_type, result_type" when on_true, on_false and the result agree.
  d.print = [](const Operation& op, OpPrinter& p) {
    p.Print(" ");
    p.PrintOperands(op.operands());
    p.PrintOptionalAttrDict(op.attrs(), {});
    p.Print(" : ");
    p.PrintType(op.operand(0).type());
    p.Print(", ");
    p.PrintType(op.result(0).type());
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
    if (op.operands.size() != 3) return p.Error("expected 3 operands for stablehlo.select");
    TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
    TL_RETURN_IF_ERROR(p.ParsePunct(":"));
    if (p.Peek("(")) {
      std::vector<Type> inputs;
      return p.ParseFunctionalType(inputs, op.result_types);
    }
    TL_ASSIGN_OR_RETURN(Type pred, p.ParseType());
    if (!(pred == op.operands[0].type()))
      return p.Error("predicate type " + pred.ToString() + " does not match the operand's " +
                     op.operands[0].type().ToString());
    TL_RETURN_IF_ERROR(p.ParsePunct(","));
    TL_ASSIGN_OR_RETURN(Type result, p.ParseType());
    op.result_types = {result};
    return OkStatus();
  };
  d.vjp = [](OpBuilder& b, const Operation&, const Values& x, const Values&,
             const Values& cts) -> StatusOr<Values> {
    Value zero = hlo::SplatLike(b, cts[0], 0);
    Value gt = hlo::Select(b, x[0], cts[0], zero);
    Value gf = hlo::Select(b, x[0], zero, cts[0]);
    TL_RETURN_IF_ERROR(b.status());
    return Values{Value(), gt, gf};
  };
  r.Register(std::move(d));
}

void RegisterClamp(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.clamp";
  d.traits.writes_all_results = true;
  d.traits.elementwise = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 3));
    TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
    const Type& x = in.operand_types[1];
    TL_RETURN_IF_ERROR(CheckKinds(x, kAnyK, "operand"));
    for (int i : {0, 2})
      if (!SameOrScalarOf(in.operand_types[i], x))
        return InvalidArgument(std::string("expected ") + (i == 0 ? "min" : "max") +
                               " to be a scalar or of the operand's type " + x.ToString() +
                               ", got " + in.operand_types[i].ToString());
    return std::vector<Type>{x};
  };
  d.eval = [](const Operation&, std::span<const Literal> in, std::vector<Literal>& out,
              EvalContext& ctx) -> Status {
    return DispatchElementType(in[1].element_type(), [&]<typename T>() -> Status {
      Map3<T, T, T, T>(ctx, in[0], in[1], in[2], out[0], [](T lo, T x, T hi) {
        return Down<T>(Minimum(Maximum(Up(x), Up(lo)), Up(hi)));
      });
      return OkStatus();
    });
  };
  d.print = [](const Operation& op, OpPrinter& p) { PrintSameTypeOrFunctional(op, p); };
  d.parse = ParseSameTypeOrFunctional;
  // The operand's cotangent passes where min <= x <= max (needs same-shape bounds).
  d.vjp = [](OpBuilder& b, const Operation&, const Values& x, const Values&,
             const Values& cts) -> StatusOr<Values> {
    if (!(x[0].type() == x[1].type()) || !(x[2].type() == x[1].type()))
      return Unimplemented("clamp gradient with scalar bounds needs a broadcast");
    using hlo::CompareDirection;
    Value inside = hlo::And(b, hlo::Compare(b, x[1], x[0], CompareDirection::kGe),
                            hlo::Compare(b, x[1], x[2], CompareDirection::kLe));
    Value g = hlo::Select(b, inside, cts[0], hlo::SplatLike(b, cts[0], 0));
    TL_RETURN_IF_ERROR(b.status());
    return Values{Value(), g, Value()};
  };
  r.Register(std::move(d));
}

}  // namespace

void RegisterElementwiseCompareOps(OpRegistry& r) {
  RegisterCompare(r);
  RegisterSelect(r);
  RegisterClamp(r);
}

}  // namespace tlaloc::ops::ew
