// Tensor, FunctionBuilder, constants and elementwise functions.
#include <cmath>

#include "builder/internal.h"

namespace tlaloc {

using namespace builder_internal;

namespace builder_internal {

OpBuilder* BuilderOf(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->builder()) return t->builder();
  return nullptr;
}

Tensor Wrap(OpBuilder* b, Value v) { return Tensor(v, b); }

int64_t NormalizeAxis(OpBuilder* b, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1)) {
    if (b)
      b->Fail(InvalidArgument("axis " + std::to_string(axis) + " is out of range for rank " +
                              std::to_string(rank)));
    return 0;
  }
  return a;
}

std::unique_ptr<Region> ScalarBinaryRegion(const std::string& op, ElementType et) {
  auto region = std::make_unique<Region>();
  Block& block = region->AddBlock();
  Value a = block.AddArgument(TensorType(et, {}));
  Value c = block.AddArgument(TensorType(et, {}));
  OpBuilder rb(&block);
  Value r = rb.CreateOne(op, {a, c});
  rb.Create("stablehlo.return", {r});
  return region;
}

Attribute I64Array(std::vector<int64_t> v) { return Attribute::IntArray(std::move(v)); }
Attribute I64(int64_t v) { return Attribute::Int(v, ElementType::kS64); }

std::vector<int64_t> BroadcastShapes(OpBuilder* b, const std::vector<int64_t>& x,
                                     const std::vector<int64_t>& y) {
  size_t n = std::max(x.size(), y.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t dx = i < n - x.size() ? 1 : x[i - (n - x.size())];
    int64_t dy = i < n - y.size() ? 1 : y[i - (n - y.size())];
    if (dx != dy && dx != 1 && dy != 1) {
      if (b)
        b->Fail(InvalidArgument("shapes [" + DimsToString(x) + "] and [" + DimsToString(y) +
                                "] do not broadcast"));
      return x;
    }
    out[i] = dx == 1 ? dy : dx;
  }
  return out;
}

}  // namespace builder_internal

namespace {
const TensorType& InvalidType() {
  static const TensorType t(ElementType::kF32, {});
  return t;
}

// Brings a and b to a common shape (numpy rules); element types must already agree.
std::pair<Tensor, Tensor> Broadcast2(const Tensor& a, const Tensor& b) {
  OpBuilder* ob = BuilderOf({&a, &b});
  if (!a.valid() || !b.valid()) return {a, b};
  if (a.element_type() != b.element_type()) {
    ob->Fail(InvalidArgument("element types differ: " + a.type().ToString() + " and " +
                             b.type().ToString()));
    return {Tensor(), Tensor()};
  }
  auto shape = BroadcastShapes(ob, a.dims(), b.dims());
  return {BroadcastTo(a, shape), BroadcastTo(b, shape)};
}

Tensor Binary(const char* op, const Tensor& a, const Tensor& b) {
  OpBuilder* ob = BuilderOf({&a, &b});
  if (!ob) return Tensor();
  auto [x, y] = Broadcast2(a, b);
  return Wrap(ob, ob->CreateOne(op, {x.value(), y.value()}));
}

Tensor Unary(const char* op, const Tensor& x) {
  if (!x.builder()) return Tensor();
  return Wrap(x.builder(), x.builder()->CreateOne(op, {x.value()}));
}

Tensor Compare(const char* dir, const Tensor& a, const Tensor& b) {
  OpBuilder* ob = BuilderOf({&a, &b});
  if (!ob) return Tensor();
  auto [x, y] = Broadcast2(a, b);
  if (!x.valid()) return Tensor();
  ElementType et = x.element_type();
  const char* type = IsFloat(et) ? "FLOAT" : IsSignedInt(et) ? "SIGNED" : "UNSIGNED";
  return Wrap(ob, ob->CreateOne("stablehlo.compare", {x.value(), y.value()},
                                {{"comparison_direction", Attribute::Enum(dir, "comparison_direction")},
                                 {"compare_type", Attribute::Enum(type, "comparison_type")}}));
}

Tensor ScalarLike(const Tensor& x, double s) {
  if (!x.builder()) return Tensor();
  return Scalar(*x.builder(), s, x.element_type());
}
}  // namespace

const TensorType& Tensor::type() const {
  return value_ && value_.type().is_tensor() ? value_.tensor_type() : InvalidType();
}

int64_t Tensor::dim(int64_t axis) const { return dims()[NormalizeAxis(b_, axis, rank())]; }

FunctionBuilder::FunctionBuilder(Module* module, std::string name,
                                 const std::vector<Type>& arg_types)
    : fn_(module->AddFunction(std::move(name), arg_types, {})),
      b_(&fn_->entry(), module) {}

Tensor FunctionBuilder::arg(int i) { return Tensor(fn_->entry().argument(i), &b_); }

Tensor FunctionBuilder::AddArg(const TensorType& type) {
  return Tensor(fn_->AddArgument(type), &b_);
}

Status FunctionBuilder::Return(const std::vector<Tensor>& values) {
  std::vector<Value> vs;
  std::vector<Type> types;
  for (const Tensor& t : values) {
    if (!t.valid()) {
      b_.Fail(InvalidArgument("@" + fn_->name() + " returns an invalid tensor"));
      return b_.status();
    }
    vs.push_back(t.value());
    types.push_back(t.value().type());
  }
  b_.Create("func.return", vs);
  fn_->set_result_types(types);
  return b_.status();
}

Tensor Constant(OpBuilder& b, Literal value) {
  return Wrap(&b, b.CreateOne("stablehlo.constant", {}, {{"value", Attribute::Elements(std::move(value))}}));
}

Tensor Scalar(OpBuilder& b, double value, ElementType et) {
  return Constant(b, Literal::FromDoubles(et, {}, {value}));
}

Tensor Full(OpBuilder& b, const std::vector<int64_t>& dims, double value, ElementType et) {
  return BroadcastInDim(Scalar(b, value, et), dims, {});
}

Tensor Zeros(OpBuilder& b, const std::vector<int64_t>& dims, ElementType et) {
  return Full(b, dims, 0, et);
}

Tensor Iota(OpBuilder& b, const std::vector<int64_t>& dims, int64_t axis, ElementType et) {
  return Wrap(&b, b.CreateOne("stablehlo.iota", {}, {{"iota_dimension", I64(axis)}},
                              std::vector<Type>{TensorType(et, dims)}));
}

Tensor FullLike(const Tensor& x, double value) {
  if (!x.builder()) return Tensor();
  return Full(*x.builder(), x.dims(), value, x.element_type());
}

Tensor operator+(const Tensor& a, const Tensor& b) { return Binary("stablehlo.add", a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return Binary("stablehlo.subtract", a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return Binary("stablehlo.multiply", a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return Binary("stablehlo.divide", a, b); }
Tensor operator-(const Tensor& a) { return Unary("stablehlo.negate", a); }
Tensor operator+(const Tensor& a, double s) { return a + ScalarLike(a, s); }
Tensor operator-(const Tensor& a, double s) { return a - ScalarLike(a, s); }
Tensor operator*(const Tensor& a, double s) { return a * ScalarLike(a, s); }
Tensor operator/(const Tensor& a, double s) { return a / ScalarLike(a, s); }
Tensor operator+(double s, const Tensor& a) { return ScalarLike(a, s) + a; }
Tensor operator-(double s, const Tensor& a) { return ScalarLike(a, s) - a; }
Tensor operator*(double s, const Tensor& a) { return ScalarLike(a, s) * a; }
Tensor operator/(double s, const Tensor& a) { return ScalarLike(a, s) / a; }
Tensor operator&(const Tensor& a, const Tensor& b) { return Binary("stablehlo.and", a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return Binary("stablehlo.or", a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return Binary("stablehlo.xor", a, b); }

Tensor Max(const Tensor& a, const Tensor& b) { return Binary("stablehlo.maximum", a, b); }
Tensor Min(const Tensor& a, const Tensor& b) { return Binary("stablehlo.minimum", a, b); }
Tensor Pow(const Tensor& a, const Tensor& b) { return Binary("stablehlo.power", a, b); }
Tensor Rem(const Tensor& a, const Tensor& b) { return Binary("stablehlo.remainder", a, b); }
Tensor Atan2(const Tensor& a, const Tensor& b) { return Binary("stablehlo.atan2", a, b); }
Tensor ShiftLeft(const Tensor& a, const Tensor& b) { return Binary("stablehlo.shift_left", a, b); }
Tensor ShiftRightLogical(const Tensor& a, const Tensor& b) {
  return Binary("stablehlo.shift_right_logical", a, b);
}
Tensor ShiftRightArithmetic(const Tensor& a, const Tensor& b) {
  return Binary("stablehlo.shift_right_arithmetic", a, b);
}
Tensor Eq(const Tensor& a, const Tensor& b) { return Compare("EQ", a, b); }
Tensor Ne(const Tensor& a, const Tensor& b) { return Compare("NE", a, b); }
Tensor Lt(const Tensor& a, const Tensor& b) { return Compare("LT", a, b); }
Tensor Le(const Tensor& a, const Tensor& b) { return Compare("LE", a, b); }
Tensor Gt(const Tensor& a, const Tensor& b) { return Compare("GT", a, b); }
Tensor Ge(const Tensor& a, const Tensor& b) { return Compare("GE", a, b); }

Tensor Exp(const Tensor& x) { return Unary("stablehlo.exponential", x); }
Tensor Log(const Tensor& x) { return Unary("stablehlo.log", x); }
Tensor Sqrt(const Tensor& x) { return Unary("stablehlo.sqrt", x); }
Tensor Rsqrt(const Tensor& x) { return Unary("stablehlo.rsqrt", x); }
Tensor Tanh(const Tensor& x) { return Unary("stablehlo.tanh", x); }
Tensor Logistic(const Tensor& x) { return Unary("stablehlo.logistic", x); }
Tensor Abs(const Tensor& x) { return Unary("stablehlo.abs", x); }
Tensor Sign(const Tensor& x) { return Unary("stablehlo.sign", x); }
Tensor Floor(const Tensor& x) { return Unary("stablehlo.floor", x); }
Tensor Sin(const Tensor& x) { return Unary("stablehlo.sine", x); }
Tensor Cos(const Tensor& x) { return Unary("stablehlo.cosine", x); }
Tensor Not(const Tensor& x) { return Unary("stablehlo.not", x); }
Tensor ErfInv(const Tensor& x) { return Unary("chlo.erf_inv", x); }
Tensor Erf(const Tensor& x) { return Unary("chlo.erf", x); }

Tensor Convert(const Tensor& x, ElementType et) {
  if (!x.builder()) return Tensor();
  if (x.element_type() == et) return x;
  return Wrap(x.builder(), x.builder()->CreateOne("stablehlo.convert", {x.value()}, {},
                                                  std::vector<Type>{TensorType(et, x.dims())}));
}

Tensor BitcastConvert(const Tensor& x, ElementType et) {
  if (!x.builder()) return Tensor();
  if (ElementSize(et) != ElementSize(x.element_type())) {
    x.builder()->Fail(InvalidArgument("BitcastConvert needs element types of equal width"));
    return Tensor();
  }
  return Wrap(x.builder(), x.builder()->CreateOne("stablehlo.bitcast_convert", {x.value()}, {},
                                                  std::vector<Type>{TensorType(et, x.dims())}));
}

Tensor Where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  OpBuilder* ob = BuilderOf({&cond, &a, &b});
  if (!ob || !cond.valid() || !a.valid() || !b.valid()) return Tensor();
  auto shape = BroadcastShapes(ob, BroadcastShapes(ob, cond.dims(), a.dims()), b.dims());
  Tensor c = BroadcastTo(cond, shape), x = BroadcastTo(a, shape), y = BroadcastTo(b, shape);
  return Wrap(ob, ob->CreateOne("stablehlo.select", {c.value(), x.value(), y.value()}));
}

Tensor Clamp(const Tensor& lo, const Tensor& x, const Tensor& hi) {
  OpBuilder* ob = BuilderOf({&lo, &x, &hi});
  if (!ob) return Tensor();
  return Wrap(ob, ob->CreateOne("stablehlo.clamp", {lo.value(), x.value(), hi.value()}));
}

}  // namespace tlaloc
