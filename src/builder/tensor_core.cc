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

Tensor Binary(hlo::BinaryFn op, const Tensor& a, const Tensor& b) {
  OpBuilder* ob = BuilderOf({&a, &b});
  if (!ob) return Tensor();
  auto [x, y] = Broadcast2(a, b);
  return Wrap(ob, op(*ob, x.value(), y.value()));
}

Tensor Unary(Value (*op)(OpBuilder&, Value), const Tensor& x) {
  if (!x.builder()) return Tensor();
  return Wrap(x.builder(), op(*x.builder(), x.value()));
}

Tensor Compare(hlo::CompareDirection dir, const Tensor& a, const Tensor& b) {
  OpBuilder* ob = BuilderOf({&a, &b});
  if (!ob) return Tensor();
  auto [x, y] = Broadcast2(a, b);
  if (!x.valid()) return Tensor();
  return Wrap(ob, hlo::Compare(*ob, x.value(), y.value(), dir));
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
  return Wrap(&b, hlo::Constant(b, std::move(value)));
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
  return Wrap(&b, hlo::Iota(b, TensorType(et, dims), axis));
}

Tensor FullLike(const Tensor& x, double value) {
  if (!x.builder()) return Tensor();
  return Full(*x.builder(), x.dims(), value, x.element_type());
}

Tensor operator+(const Tensor& a, const Tensor& b) { return Binary(hlo::Add, a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return Binary(hlo::Sub, a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return Binary(hlo::Mul, a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return Binary(hlo::Div, a, b); }
Tensor operator-(const Tensor& a) { return Unary(hlo::Neg, a); }
Tensor operator+(const Tensor& a, double s) { return a + ScalarLike(a, s); }
Tensor operator-(const Tensor& a, double s) { return a - ScalarLike(a, s); }
Tensor operator*(const Tensor& a, double s) { return a * ScalarLike(a, s); }
Tensor operator/(const Tensor& a, double s) { return a / ScalarLike(a, s); }
Tensor operator+(double s, const Tensor& a) { return ScalarLike(a, s) + a; }
Tensor operator-(double s, const Tensor& a) { return ScalarLike(a, s) - a; }
Tensor operator*(double s, const Tensor& a) { return ScalarLike(a, s) * a; }
Tensor operator/(double s, const Tensor& a) { return ScalarLike(a, s) / a; }
Tensor operator&(const Tensor& a, const Tensor& b) { return Binary(hlo::And, a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return Binary(hlo::Or, a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return Binary(hlo::Xor, a, b); }

Tensor Max(const Tensor& a, const Tensor& b) { return Binary(hlo::Max, a, b); }
Tensor Min(const Tensor& a, const Tensor& b) { return Binary(hlo::Min, a, b); }
Tensor Pow(const Tensor& a, const Tensor& b) { return Binary(hlo::Pow, a, b); }
Tensor Rem(const Tensor& a, const Tensor& b) { return Binary(hlo::Rem, a, b); }
Tensor Atan2(const Tensor& a, const Tensor& b) { return Binary(hlo::Atan2, a, b); }
Tensor ShiftLeft(const Tensor& a, const Tensor& b) { return Binary(hlo::ShiftLeft, a, b); }
Tensor ShiftRightLogical(const Tensor& a, const Tensor& b) {
  return Binary(hlo::ShiftRightLogical, a, b);
}
Tensor ShiftRightArithmetic(const Tensor& a, const Tensor& b) {
  return Binary(hlo::ShiftRightArithmetic, a, b);
}
Tensor Eq(const Tensor& a, const Tensor& b) { return Compare(hlo::CompareDirection::kEq, a, b); }
Tensor Ne(const Tensor& a, const Tensor& b) { return Compare(hlo::CompareDirection::kNe, a, b); }
Tensor Lt(const Tensor& a, const Tensor& b) { return Compare(hlo::CompareDirection::kLt, a, b); }
Tensor Le(const Tensor& a, const Tensor& b) { return Compare(hlo::CompareDirection::kLe, a, b); }
Tensor Gt(const Tensor& a, const Tensor& b) { return Compare(hlo::CompareDirection::kGt, a, b); }
Tensor Ge(const Tensor& a, const Tensor& b) { return Compare(hlo::CompareDirection::kGe, a, b); }

Tensor Exp(const Tensor& x) { return Unary(hlo::Exp, x); }
Tensor Log(const Tensor& x) { return Unary(hlo::Log, x); }
Tensor Sqrt(const Tensor& x) { return Unary(hlo::Sqrt, x); }
Tensor Rsqrt(const Tensor& x) { return Unary(hlo::Rsqrt, x); }
Tensor Tanh(const Tensor& x) { return Unary(hlo::Tanh, x); }
Tensor Logistic(const Tensor& x) { return Unary(hlo::Logistic, x); }
Tensor Abs(const Tensor& x) { return Unary(hlo::Abs, x); }
Tensor Sign(const Tensor& x) { return Unary(hlo::Sign, x); }
Tensor Floor(const Tensor& x) { return Unary(hlo::Floor, x); }
Tensor Sin(const Tensor& x) { return Unary(hlo::Sin, x); }
Tensor Cos(const Tensor& x) { return Unary(hlo::Cos, x); }
Tensor Not(const Tensor& x) { return Unary(hlo::Not, x); }
Tensor ErfInv(const Tensor& x) { return Unary(hlo::ErfInv, x); }
Tensor Erf(const Tensor& x) { return Unary(hlo::Erf, x); }

Tensor Convert(const Tensor& x, ElementType et) {
  if (!x.builder()) return Tensor();
  if (x.element_type() == et) return x;
  return Wrap(x.builder(), hlo::Convert(*x.builder(), x.value(), et));
}

Tensor BitcastConvert(const Tensor& x, ElementType et) {
  if (!x.builder()) return Tensor();
  if (ElementSize(et) != ElementSize(x.element_type())) {
    x.builder()->Fail(InvalidArgument("BitcastConvert needs element types of equal width"));
    return Tensor();
  }
  return Wrap(x.builder(), hlo::BitcastConvert(*x.builder(), x.value(), et));
}

Tensor Where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  OpBuilder* ob = BuilderOf({&cond, &a, &b});
  if (!ob || !cond.valid() || !a.valid() || !b.valid()) return Tensor();
  auto shape = BroadcastShapes(ob, BroadcastShapes(ob, cond.dims(), a.dims()), b.dims());
  Tensor c = BroadcastTo(cond, shape), x = BroadcastTo(a, shape), y = BroadcastTo(b, shape);
  return Wrap(ob, hlo::Select(*ob, c.value(), x.value(), y.value()));
}

Tensor Clamp(const Tensor& lo, const Tensor& x, const Tensor& hi) {
  OpBuilder* ob = BuilderOf({&lo, &x, &hi});
  if (!ob) return Tensor();
  return Wrap(ob, hlo::Clamp(*ob, lo.value(), x.value(), hi.value()));
}

}  // namespace tlaloc
