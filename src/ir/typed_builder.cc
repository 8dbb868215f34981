#include "tlaloc/ir/typed_builder.h"

#include <utility>

namespace tlaloc::hlo {

namespace {

Value Unary(OpBuilder& b, const char* name, Value x) { return b.CreateOne(name, {x}); }
Value Binary(OpBuilder& b, const char* name, Value x, Value y) { return b.CreateOne(name, {x, y}); }

const char* DirectionName(CompareDirection d) {
  switch (d) {
    case CompareDirection::kEq:
      return "EQ";
    case CompareDirection::kNe:
      return "NE";
    case CompareDirection::kLt:
      return "LT";
    case CompareDirection::kLe:
      return "LE";
    case CompareDirection::kGt:
      return "GT";
    case CompareDirection::kGe:
      return "GE";
  }
  return "EQ";
}

std::vector<Type> Types(const TensorType& t) { return std::vector<Type>{Type(t)}; }

}  // namespace

Value Add(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.add", x, y); }
Value Sub(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.subtract", x, y); }
Value Mul(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.multiply", x, y); }
Value Div(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.divide", x, y); }
Value Pow(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.power", x, y); }
Value Max(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.maximum", x, y); }
Value Min(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.minimum", x, y); }
Value Rem(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.remainder", x, y); }
Value Atan2(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.atan2", x, y); }
Value And(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.and", x, y); }
Value Or(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.or", x, y); }
Value Xor(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.xor", x, y); }
Value ShiftLeft(OpBuilder& b, Value x, Value y) { return Binary(b, "stablehlo.shift_left", x, y); }
Value ShiftRightLogical(OpBuilder& b, Value x, Value y) {
  return Binary(b, "stablehlo.shift_right_logical", x, y);
}
Value ShiftRightArithmetic(OpBuilder& b, Value x, Value y) {
  return Binary(b, "stablehlo.shift_right_arithmetic", x, y);
}

Value Neg(OpBuilder& b, Value x) { return Unary(b, "stablehlo.negate", x); }
Value Abs(OpBuilder& b, Value x) { return Unary(b, "stablehlo.abs", x); }
Value Sign(OpBuilder& b, Value x) { return Unary(b, "stablehlo.sign", x); }
Value Floor(OpBuilder& b, Value x) { return Unary(b, "stablehlo.floor", x); }
Value Exp(OpBuilder& b, Value x) { return Unary(b, "stablehlo.exponential", x); }
Value Log(OpBuilder& b, Value x) { return Unary(b, "stablehlo.log", x); }
Value Sqrt(OpBuilder& b, Value x) { return Unary(b, "stablehlo.sqrt", x); }
Value Rsqrt(OpBuilder& b, Value x) { return Unary(b, "stablehlo.rsqrt", x); }
Value Tanh(OpBuilder& b, Value x) { return Unary(b, "stablehlo.tanh", x); }
Value Logistic(OpBuilder& b, Value x) { return Unary(b, "stablehlo.logistic", x); }
Value Not(OpBuilder& b, Value x) { return Unary(b, "stablehlo.not", x); }
Value Sin(OpBuilder& b, Value x) { return Unary(b, "stablehlo.sine", x); }
Value Cos(OpBuilder& b, Value x) { return Unary(b, "stablehlo.cosine", x); }
Value Erf(OpBuilder& b, Value x) { return Unary(b, "chlo.erf", x); }
Value ErfInv(OpBuilder& b, Value x) { return Unary(b, "chlo.erf_inv", x); }
Value Sinh(OpBuilder& b, Value x) { return Unary(b, "chlo.sinh", x); }
Value Cosh(OpBuilder& b, Value x) { return Unary(b, "chlo.cosh", x); }
Value Digamma(OpBuilder& b, Value x) { return Unary(b, "chlo.digamma", x); }
Value Polygamma(OpBuilder& b, Value n, Value x) { return Binary(b, "chlo.polygamma", n, x); }

Value Compare(OpBuilder& b, Value x, Value y, CompareDirection direction) {
  if (!x || !x.type().is_tensor()) return b.CreateOne("stablehlo.compare", {x, y});
  const ElementType et = x.tensor_type().element_type;
  const char* type = IsFloat(et) ? "FLOAT" : IsSignedInt(et) ? "SIGNED" : "UNSIGNED";
  return b.CreateOne(
      "stablehlo.compare", {x, y},
      {{"comparison_direction", Attribute::Enum(DirectionName(direction), "comparison_direction")},
       {"compare_type", Attribute::Enum(type, "comparison_type")}});
}

Value Select(OpBuilder& b, Value pred, Value on_true, Value on_false) {
  return b.CreateOne("stablehlo.select", {pred, on_true, on_false});
}

Value Clamp(OpBuilder& b, Value lo, Value x, Value hi) {
  return b.CreateOne("stablehlo.clamp", {lo, x, hi});
}

Value Convert(OpBuilder& b, Value x, ElementType to) {
  if (!x || !x.type().is_tensor()) return b.CreateOne("stablehlo.convert", {x});
  return b.CreateOne("stablehlo.convert", {x}, {}, Types(TensorType(to, x.tensor_type().dims)));
}

Value BitcastConvert(OpBuilder& b, Value x, ElementType to) {
  if (!x || !x.type().is_tensor()) return b.CreateOne("stablehlo.bitcast_convert", {x});
  return b.CreateOne("stablehlo.bitcast_convert", {x}, {},
                     Types(TensorType(to, x.tensor_type().dims)));
}

Value Constant(OpBuilder& b, Literal value) {
  return b.CreateOne("stablehlo.constant", {}, {{"value", Attribute::Elements(std::move(value))}});
}

Value Splat(OpBuilder& b, const TensorType& type, double value) {
  Literal l(type);
  for (int64_t i = 0; i < l.num_elements(); ++i) l.SetFromDouble(i, value);
  return Constant(b, std::move(l));
}

Value SplatLike(OpBuilder& b, Value like, double value) {
  if (!like || !like.type().is_tensor()) return Value();
  return Splat(b, like.tensor_type(), value);
}

Value Zeros(OpBuilder& b, const TensorType& type) {
  Value zero = Constant(b, Literal(TensorType(type.element_type, {})));
  if (type.rank() == 0) return zero;
  return BroadcastInDim(b, zero, type, {});
}

Value ZerosLike(OpBuilder& b, Value like) {
  if (!like || !like.type().is_tensor()) return Value();
  return Zeros(b, like.tensor_type());
}

Value Iota(OpBuilder& b, const TensorType& type, int64_t dimension) {
  return b.CreateOne("stablehlo.iota", {}, {{"iota_dimension", Attribute::Int(dimension)}},
                     Types(type));
}

Value BroadcastInDim(OpBuilder& b, Value x, const TensorType& to, const Dims& dims) {
  return b.CreateOne("stablehlo.broadcast_in_dim", {x},
                     {{"broadcast_dimensions", Attribute::IntArray(dims)}}, Types(to));
}

Value Reshape(OpBuilder& b, Value x, const TensorType& to) {
  if (x && x.type().is_tensor() && x.tensor_type() == to) return x;
  return b.CreateOne("stablehlo.reshape", {x}, {}, Types(to));
}

Value Transpose(OpBuilder& b, Value x, const Dims& permutation) {
  return b.CreateOne("stablehlo.transpose", {x},
                     {{"permutation", Attribute::IntArray(permutation)}});
}

Value Reverse(OpBuilder& b, Value x, const Dims& dims) {
  return b.CreateOne("stablehlo.reverse", {x}, {{"dimensions", Attribute::IntArray(dims)}});
}

Value Concatenate(OpBuilder& b, std::vector<Value> xs, int64_t dimension) {
  return b.CreateOne("stablehlo.concatenate", std::move(xs),
                     {{"dimension", Attribute::Int(dimension)}});
}

Value Slice(OpBuilder& b, Value x, const Dims& start, const Dims& limit, const Dims& strides) {
  return b.CreateOne("stablehlo.slice", {x},
                     {{"start_indices", Attribute::IntArray(start)},
                      {"limit_indices", Attribute::IntArray(limit)},
                      {"strides", Attribute::IntArray(strides)}});
}

Value Pad(OpBuilder& b, Value x, Value padding, const Dims& low, const Dims& high,
          const Dims& interior) {
  return b.CreateOne("stablehlo.pad", {x, padding},
                     {{"edge_padding_low", Attribute::IntArray(low)},
                      {"edge_padding_high", Attribute::IntArray(high)},
                      {"interior_padding", Attribute::IntArray(interior)}});
}

Value DynamicSlice(OpBuilder& b, Value x, const std::vector<Value>& starts, const Dims& sizes) {
  std::vector<Value> operands = {x};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return b.CreateOne("stablehlo.dynamic_slice", std::move(operands),
                     {{"slice_sizes", Attribute::IntArray(sizes)}});
}

Value DynamicUpdateSlice(OpBuilder& b, Value x, Value update, const std::vector<Value>& starts) {
  std::vector<Value> operands = {x, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return b.CreateOne("stablehlo.dynamic_update_slice", std::move(operands));
}

void Return(OpBuilder& b, std::vector<Value> values) {
  b.Create("stablehlo.return", std::move(values));
}

std::unique_ptr<Region> ScalarBinaryRegion(ElementType et, BinaryFn fn) {
  auto region = std::make_unique<Region>();
  Block& body = region->AddBlock();
  const Type scalar(TensorType(et, {}));
  Value x = body.AddArgument(scalar);
  Value y = body.AddArgument(scalar);
  OpBuilder rb(&body);
  Return(rb, {fn(rb, x, y)});
  return region;
}

Value Reduce(OpBuilder& b, Value x, Value init, const Dims& dims, BinaryFn fn) {
  if (!x || !x.type().is_tensor()) return b.CreateOne("stablehlo.reduce", {x, init});
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(ScalarBinaryRegion(x.tensor_type().element_type, fn));
  return b.CreateOne("stablehlo.reduce", {x, init}, {{"dimensions", Attribute::IntArray(dims)}}, {},
                     std::move(regions));
}

Value SumOver(OpBuilder& b, Value x, const Dims& dims) {
  if (dims.empty() || !x || !x.type().is_tensor()) return x;
  const ElementType et = x.tensor_type().element_type;
  return Reduce(b, x, Constant(b, Literal(TensorType(et, {}))), dims, Add);
}

std::vector<Value> Sort(OpBuilder& b, std::vector<Value> operands, int64_t dimension,
                        bool is_stable, std::unique_ptr<Region> comparator) {
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(std::move(comparator));
  return b.Create(
      "stablehlo.sort", std::move(operands),
      {{"dimension", Attribute::Int(dimension)}, {"is_stable", Attribute::Bool(is_stable)}},
      std::nullopt, std::move(regions));
}

Attribute DotDimensionsAttr(const DotDimensionNumbers& d) {
  return Attribute::Struct(
      "stablehlo.dot", {{"lhs_batching_dimensions", Attribute::IntArray(d.lhs_batch)},
                        {"rhs_batching_dimensions", Attribute::IntArray(d.rhs_batch)},
                        {"lhs_contracting_dimensions", Attribute::IntArray(d.lhs_contracting)},
                        {"rhs_contracting_dimensions", Attribute::IntArray(d.rhs_contracting)}});
}

Value DotGeneral(OpBuilder& b, Value lhs, Value rhs, const DotDimensionNumbers& d,
                 std::optional<TensorType> result) {
  std::optional<std::vector<Type>> types;
  if (result) types = Types(*result);
  return b.CreateOne("stablehlo.dot_general", {lhs, rhs},
                     {{"dot_dimension_numbers", DotDimensionsAttr(d)}}, std::move(types));
}

Attribute RaggedDotDimensionsAttr(const RaggedDotDimensionNumbers& d) {
  // Empty lists are left out, as MLIR prints the attribute.
  AttrDict fields;
  auto put = [&](const char* name, const Dims& v) {
    if (!v.empty()) fields[name] = Attribute::IntArray(v);
  };
  put("lhs_batching_dimensions", d.lhs_batch);
  put("rhs_batching_dimensions", d.rhs_batch);
  put("lhs_contracting_dimensions", d.lhs_contracting);
  put("rhs_contracting_dimensions", d.rhs_contracting);
  put("lhs_ragged_dimensions", d.lhs_ragged);
  put("rhs_group_dimensions", d.rhs_group);
  return Attribute::Struct("chlo.ragged_dot", std::move(fields));
}

Value RaggedDot(OpBuilder& b, Value lhs, Value rhs, Value group_sizes,
                const RaggedDotDimensionNumbers& d, std::optional<TensorType> result) {
  std::optional<std::vector<Type>> types;
  if (result) types = Types(*result);
  return b.CreateOne("chlo.ragged_dot", {lhs, rhs, group_sizes},
                     {{"ragged_dot_dimension_numbers", RaggedDotDimensionsAttr(d)}},
                     std::move(types));
}

Value Gather(OpBuilder& b, Value operand, Value indices, const GatherDimensionNumbers& d,
             const Dims& slice_sizes) {
  AttrDict fields{{"offset_dims", Attribute::IntArray(d.offset_dims)},
                  {"collapsed_slice_dims", Attribute::IntArray(d.collapsed_slice_dims)},
                  {"start_index_map", Attribute::IntArray(d.start_index_map)},
                  {"index_vector_dim", Attribute::Int(d.index_vector_dim)}};
  // Batching dimensions are written only when present, as StableHLO prints them.
  if (!d.operand_batching_dims.empty()) {
    fields["operand_batching_dims"] = Attribute::IntArray(d.operand_batching_dims);
    fields["start_indices_batching_dims"] = Attribute::IntArray(d.start_indices_batching_dims);
  }
  return b.CreateOne(
      "stablehlo.gather", {operand, indices},
      {{"dimension_numbers", Attribute::Struct("stablehlo.gather", std::move(fields))},
       {"slice_sizes", Attribute::IntArray(slice_sizes)}});
}

Attribute ScatterDimensionsAttr(const ScatterDimensionNumbers& d) {
  AttrDict fields{
      {"update_window_dims", Attribute::IntArray(d.update_window_dims)},
      {"inserted_window_dims", Attribute::IntArray(d.inserted_window_dims)},
      {"scatter_dims_to_operand_dims", Attribute::IntArray(d.scatter_dims_to_operand_dims)},
      {"index_vector_dim", Attribute::Int(d.index_vector_dim)}};
  if (!d.input_batching_dims.empty()) {
    fields["input_batching_dims"] = Attribute::IntArray(d.input_batching_dims);
    fields["scatter_indices_batching_dims"] = Attribute::IntArray(d.scatter_indices_batching_dims);
  }
  return Attribute::Struct("stablehlo.scatter", std::move(fields));
}

Value Scatter(OpBuilder& b, Value operand, Value indices, Value updates,
              const ScatterDimensionNumbers& d, std::unique_ptr<Region> update) {
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(std::move(update));
  return b.CreateOne("stablehlo.scatter", {operand, indices, updates},
                     {{"scatter_dimension_numbers", ScatterDimensionsAttr(d)}}, {},
                     std::move(regions));
}

}  // namespace tlaloc::hlo
