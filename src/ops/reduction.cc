// Reductions: stablehlo.reduce (here), reduce_window and select_and_scatter
// (reduction_window.cc), dot_general (reduction_dot.cc), sort and chlo.top_k
// (reduction_sort.cc), chlo.ragged_dot (reduction_ragged_dot.cc).
#include <algorithm>

#include "op_areas.h"
#include "op_helpers.h"
#include "reduction_kernels.h"
#include "tlaloc/ir/typed_builder.h"

namespace tlaloc::ops {

void RegisterWindowOps(OpRegistry& r);     // reduction_window.cc
void RegisterDotOps(OpRegistry& r);        // reduction_dot.cc
void RegisterSortOps(OpRegistry& r);       // reduction_sort.cc
void RegisterRaggedDotOps(OpRegistry& r);  // reduction_ragged_dot.cc

namespace {

// `dimensions` as an i64 array (also accepted as dense integer elements, the older form).
StatusOr<std::vector<int64_t>> DimensionsAttr(const AttrDict& attrs) {
  const Attribute* a = FindAttr(attrs, "dimensions");
  if (a && a->kind() == Attribute::Kind::kIntArray) return a->as_int_array();
  if (a && a->kind() == Attribute::Kind::kElements && IsInteger(a->as_elements().element_type()) &&
      a->as_elements().type().rank() <= 1) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < a->as_elements().num_elements(); ++i)
      v.push_back(a->as_elements().GetAsInt64(i));
    return v;
  }
  return InvalidArgument("expected a 'dimensions' integer array attribute");
}

// For ops already checked by the shape rule.
std::vector<int64_t> DimensionsOrEmpty(const AttrDict& attrs) {
  auto d = DimensionsAttr(attrs);
  return d.ok() ? *d : std::vector<int64_t>{};
}

// Shape rule of reduce: N inputs of one shape, N scalar inits, results with `dimensions`
// removed and the element types the body returns (the inits' when no body is given yet).
StatusOr<std::vector<Type>> InferReduce(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  TL_ASSIGN_OR_RETURN(const size_t n, CheckInputsThenInits(in));
  const TensorType& t0 = in.operand_types[0].tensor;
  TL_ASSIGN_OR_RETURN(std::vector<int64_t> dims, DimensionsAttr(in.attrs));
  TL_RETURN_IF_ERROR(CheckDimensionList(dims, t0.rank(), "'dimensions'"));
  std::vector<int64_t> out_dims;
  for (int64_t d = 0; d < t0.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) out_dims.push_back(t0.dims[d]);
  std::vector<ElementType> ets;
  for (size_t i = 0; i < n; ++i) ets.push_back(in.operand_types[n + i].tensor.element_type);
  if (!in.regions.empty()) {
    TL_ASSIGN_OR_RETURN(std::vector<ElementType> body_ets, ReductionBodyResults(*in.regions[0], n));
    if (!body_ets.empty()) ets = std::move(body_ets);
  }
  std::vector<Type> out;
  for (size_t i = 0; i < n; ++i) out.push_back(TensorType(ets[i], out_dims));
  return out;
}

// Pairwise reduction of [out_n][red_n] elements with a vectorisable body: each level combines
// neighbours (2j, 2j + 1) of every output in one run of the body; an odd last element moves up
// unchanged. The init value is folded in once, at the end.
template <typename BaseOffset>
Status ReduceTree(const Operation& op, std::span<const Literal> operands,
                  std::vector<Literal>& results, EvalContext& ctx, int64_t out_n,
                  const std::vector<int64_t>& red_off, const BaseOffset& base_offset) {
  const size_t n = operands.size() / 2;
  int64_t len = static_cast<int64_t>(red_off.size());
  std::vector<Literal> cur;
  for (size_t k = 0; k < n; ++k) {
    Literal v(TensorType(operands[k].element_type(), {out_n * len}));
    for (int64_t o = 0; o < out_n; ++o) {
      int64_t base = base_offset(o);
      for (int64_t r = 0; r < len; ++r) CopyElement(operands[k], base + red_off[r], v, o * len + r);
    }
    cur.push_back(std::move(v));
  }
  while (len > 1) {
    int64_t pairs = len / 2, next = (len + 1) / 2;
    std::vector<Literal> args;
    for (int side = 0; side < 2; ++side)
      for (size_t k = 0; k < n; ++k) {
        Literal v(TensorType(cur[k].element_type(), {out_n * pairs}));
        for (int64_t o = 0; o < out_n; ++o)
          for (int64_t j = 0; j < pairs; ++j)
            CopyElement(cur[k], o * len + 2 * j + side, v, o * pairs + j);
        args.push_back(std::move(v));
      }
    TL_ASSIGN_OR_RETURN(std::vector<Literal> combined,
                        RunRegionVectorized(op.region(0), std::move(args), out_n * pairs, ctx));
    std::vector<Literal> nxt;
    for (size_t k = 0; k < n; ++k) {
      Literal v(TensorType(cur[k].element_type(), {out_n * next}));
      for (int64_t o = 0; o < out_n; ++o) {
        for (int64_t j = 0; j < pairs; ++j)
          CopyElement(combined[k], o * pairs + j, v, o * next + j);
        if (next > pairs) CopyElement(cur[k], o * len + len - 1, v, o * next + pairs);
      }
      nxt.push_back(std::move(v));
    }
    cur = std::move(nxt);
    len = next;
  }
  std::vector<Literal> args;
  for (size_t k = 0; k < n; ++k) {
    Literal init(TensorType(operands[n + k].element_type(), {out_n}));
    for (int64_t o = 0; o < out_n; ++o) CopyElement(operands[n + k], 0, init, o);
    args.push_back(std::move(init));
  }
  for (size_t k = 0; k < n; ++k) args.push_back(std::move(cur[k]));
  TL_ASSIGN_OR_RETURN(std::vector<Literal> final_values,
                      RunRegionVectorized(op.region(0), std::move(args), out_n, ctx));
  for (size_t k = 0; k < n; ++k)
    for (int64_t o = 0; o < out_n; ++o) CopyElement(final_values[k], o, results[k], o);
  return OkStatus();
}

Status EvalReduce(const Operation& op, std::span<const Literal> operands,
                  std::vector<Literal>& results, EvalContext& ctx) {
  const size_t n = operands.size() / 2;
  const std::vector<int64_t>& in_dims = operands[0].dims();
  std::vector<int64_t> dims = DimensionsOrEmpty(op.attrs());
  std::vector<int64_t> strides = RowMajorStrides(in_dims);
  std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
  for (int64_t d = 0; d < static_cast<int64_t>(in_dims.size()); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    (reduced ? red_dims : kept_dims).push_back(in_dims[d]);
    (reduced ? red_strides : kept_strides).push_back(strides[d]);
  }
  bool in_order = true;
  auto kind = MatchBinaryBody(op.region(0), &in_order);
  ElementType et = operands[0].element_type();
  // Offsets (relative to an output's base) of the elements reduced into one output, in
  // row-major order of the reduced dimensions.
  int64_t red_n = NumElements(red_dims);
  std::vector<int64_t> red_off;
  red_off.reserve(red_n);
  if (red_n > 0) {
    std::vector<int64_t> idx(red_dims.size(), 0);
    do {
      int64_t off = 0;
      for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * red_strides[k];
      red_off.push_back(off);
    } while (NextIndex(idx, red_dims));
  }
  int64_t out_n = NumElements(kept_dims);
  auto base_offset = [&](int64_t o) {
    int64_t off = 0;
    for (int64_t k = static_cast<int64_t>(kept_dims.size()) - 1; k >= 0; --k) {
      off += (o % kept_dims[k]) * kept_strides[k];
      o /= kept_dims[k];
    }
    return off;
  };

  if (n == 1 && kind && operands[1].element_type() == et && results[0].element_type() == et) {
    return DispatchElementType(et, [&]<typename T>() -> Status {
      const T* in = operands[0].span<T>().data();
      const T init = operands[1].span<T>()[0];
      T* out = results[0].span<T>().data();
      int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(red_n, 1));
      ctx.ParallelFor(out_n, grain, [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) {
          const T* base = in + base_offset(o);
          T acc = init;
          for (int64_t off : red_off) acc = ApplyBinary<T>(*kind, acc, base[off]);
          out[o] = acc;
        }
      });
      return OkStatus();
    });
  }
  // A body of elementwise ops whose inputs, inits and results share element types: reduce
  // pairwise, all outputs and pairs of a tree level at once. The specification leaves the
  // reduction tree to the implementation; the in-order sequence of elements is kept.
  bool same_types = true;
  for (size_t i = 0; i < n; ++i)
    same_types = same_types && operands[i].element_type() == operands[n + i].element_type() &&
                 results[i].element_type() == operands[i].element_type();
  if (same_types && red_n > 1 && RegionIsVectorizable(op.region(0)))
    return ReduceTree(op, operands, results, ctx, out_n, red_off, base_offset);
  // General body: run the region once per reduced element, in row-major order.
  for (int64_t o = 0; o < out_n; ++o) {
    int64_t base = base_offset(o);
    std::vector<Literal> acc;
    for (size_t i = 0; i < n; ++i) acc.push_back(operands[n + i]);
    for (int64_t off : red_off) {
      std::vector<Literal> args = acc;
      for (size_t i = 0; i < n; ++i) args.push_back(ElementAsScalar(operands[i], base + off));
      TL_ASSIGN_OR_RETURN(acc, ctx.RunRegion(op.region(0), std::move(args)));
      if (acc.size() != n) return Internal("the reduce body returned the wrong number of values");
    }
    for (size_t i = 0; i < n; ++i) {
      if (acc[i].element_type() != results[i].element_type())
        return InvalidArgument("the body returned " + acc[i].type().ToString() +
                               ", expected element type " +
                               std::string(MlirName(results[i].element_type())));
      CopyElement(acc[i], 0, results[i], o);
    }
  }
  return OkStatus();
}

// Compact form "applies stablehlo.add" is used when the body is exactly that op on (a0, a1)
// with the block arguments of the init's type; otherwise the "reducer(...) {...}" form.
bool ReducePrintsCompact(const Operation& op) {
  if (op.num_operands() != 2) return false;
  bool in_order = false;
  auto kind = MatchBinaryBody(op.region(0), &in_order);
  if (!kind || !in_order) return false;
  const Block& b = op.region(0).front();
  return b.argument(0).type() == op.operand(1).type();
}

void PrintReduce(const Operation& op, OpPrinter& p) {
  int n = op.num_operands() / 2;
  for (int i = 0; i < n; ++i) {
    p.Print(i ? ", (" : "(");
    p.PrintOperand(op.operand(i));
    p.Print(" init: ");
    p.PrintOperand(op.operand(n + i));
    p.Print(")");
  }
  bool compact = ReducePrintsCompact(op);
  if (compact) {
    p.Print(" applies ");
    p.Print(op.region(0).front().operations()[0]->name());
  }
  p.Print(" across dimensions = ");
  p.PrintIntList(DimensionsOrEmpty(op.attrs()));
  p.PrintOptionalAttrDict(op.attrs(), {"dimensions"});
  p.Print(" : ");
  p.PrintFunctionalType(op);
  if (compact) return;
  // Unverified ops may lack a well-formed body; print it as is rather than index past it.
  if (op.region(0).blocks().size() != 1 || op.region(0).front().num_arguments() != 2 * n) {
    p.Print(" reducer ");
    p.PrintRegion(op.region(0), /*print_arguments=*/true);
    return;
  }
  const Block& b = op.region(0).front();
  p.Print(" reducer");
  for (int i = 0; i < n; ++i) {
    p.Print("(");
    p.PrintOperand(b.argument(i));
    p.Print(": ");
    p.PrintType(b.argument(i).type());
    p.Print(", ");
    p.PrintOperand(b.argument(n + i));
    p.Print(": ");
    p.PrintType(b.argument(n + i).type());
    p.Print(") ");
  }
  p.PrintRegion(op.region(0), /*print_arguments=*/false);
}

Status ParseReduce(OpParser& p, ParsedOp& op) {
  std::vector<Value> inputs, inits;
  do {
    TL_RETURN_IF_ERROR(p.ParsePunct("("));
    TL_ASSIGN_OR_RETURN(Value input, p.ParseOperand());
    TL_RETURN_IF_ERROR(p.ParseKeyword("init"));
    TL_RETURN_IF_ERROR(p.ParsePunct(":"));
    TL_ASSIGN_OR_RETURN(Value init, p.ParseOperand());
    TL_RETURN_IF_ERROR(p.ParsePunct(")"));
    inputs.push_back(input);
    inits.push_back(init);
  } while (p.ParseOptionalPunct(","));
  op.operands = inputs;
  op.operands.insert(op.operands.end(), inits.begin(), inits.end());
  std::string applies;
  if (p.ParseOptionalKeyword("applies")) {
    TL_ASSIGN_OR_RETURN(applies, p.ParseIdentifier());
    // Accept the dialect-qualified name whether or not the lexer keeps '.' inside identifiers.
    while (applies.find('.') == std::string::npos && p.ParseOptionalPunct(".")) {
      TL_ASSIGN_OR_RETURN(std::string rest, p.ParseIdentifier());
      applies += "." + rest;
    }
  }
  TL_RETURN_IF_ERROR(p.ParseKeyword("across"));
  TL_RETURN_IF_ERROR(p.ParseKeyword("dimensions"));
  TL_RETURN_IF_ERROR(p.ParsePunct("="));
  TL_ASSIGN_OR_RETURN(std::vector<int64_t> dims, p.ParseIntList());
  op.attrs["dimensions"] = Attribute::IntArray(dims);
  TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
  TL_RETURN_IF_ERROR(p.ParsePunct(":"));
  std::vector<Type> in_types;
  TL_RETURN_IF_ERROR(p.ParseFunctionalType(in_types, op.result_types));
  if (in_types.size() != op.operands.size())
    return p.Error("expected " + std::to_string(op.operands.size()) +
                   " operand types in the functional type of stablehlo.reduce");
  if (!applies.empty()) {
    if (inputs.size() != 1)
      return p.Error("'applies' needs exactly one input; use the reducer form");
    // Build the body `%r = <applies> %a0, %a1; stablehlo.return %r` over the init's type.
    auto region = std::make_unique<Region>();
    Block& block = region->AddBlock();
    Type t = inits[0].type();
    Value a0 = block.AddArgument(t), a1 = block.AddArgument(t);
    OpBuilder b(&block);
    Value r = b.CreateOne(applies, {a0, a1});
    hlo::Return(b, {r});
    if (!b.ok())
      return p.Error("cannot build the body 'applies " + applies + "': " + b.status().message());
    op.regions.push_back(std::move(region));
    return OkStatus();
  }
  TL_RETURN_IF_ERROR(p.ParseKeyword("reducer"));
  const size_t n = inputs.size();
  std::vector<std::pair<std::string, Type>> accs, elems;
  for (size_t i = 0; i < n; ++i) {
    TL_RETURN_IF_ERROR(p.ParsePunct("("));
    for (int k = 0; k < 2; ++k) {
      if (k) TL_RETURN_IF_ERROR(p.ParsePunct(","));
      TL_ASSIGN_OR_RETURN(std::string name, p.ParseIdentifier());
      TL_RETURN_IF_ERROR(p.ParsePunct(":"));
      TL_ASSIGN_OR_RETURN(Type t, p.ParseType());
      (k ? elems : accs).emplace_back(std::move(name), std::move(t));
    }
    TL_RETURN_IF_ERROR(p.ParsePunct(")"));
  }
  // Block arguments: all accumulators first, then all elements.
  accs.insert(accs.end(), elems.begin(), elems.end());
  TL_ASSIGN_OR_RETURN(auto region, p.ParseRegion(&accs));
  op.regions.push_back(std::move(region));
  return OkStatus();
}

// ---- Gradient -------------------------------------------------------------------------------

// Single-input float reductions with an add, max or min body. add: every input element gets
// its output's cotangent (the init gets their sum). max/min: the cotangent is shared equally
// by the elements equal to the result, as JAX does; the init gets none.
StatusOr<std::vector<Value>> ReduceVjp(OpBuilder& b, const Operation& op,
                                       const std::vector<Value>& x, const std::vector<Value>& y,
                                       const std::vector<Value>& cts) {
  const TensorType& in = x[0].tensor_type();
  if (!IsFloat(in.element_type)) return std::vector<Value>(x.size());
  auto kind = MatchBinaryBody(op.region(0));
  if (x.size() != 2 || !kind ||
      (*kind != BinaryKind::kAdd && *kind != BinaryKind::kMax && *kind != BinaryKind::kMin))
    return Unimplemented(
        "stablehlo.reduce is differentiable only with a single input and an add, maximum or "
        "minimum body");
  std::vector<int64_t> dims = DimensionsOrEmpty(op.attrs());
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < in.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) kept.push_back(d);
  auto broadcast = [&](Value v) {
    return hlo::BroadcastInDim(b, v, TensorType(v.tensor_type().element_type, in.dims), kept);
  };
  Value ctb = broadcast(cts[0]);
  if (*kind == BinaryKind::kAdd) {
    std::vector<int64_t> all;
    for (int64_t d = 0; d < cts[0].tensor_type().rank(); ++d) all.push_back(d);
    Value dinit = hlo::SumOver(b, cts[0], all);
    TL_RETURN_IF_ERROR(b.status());
    return std::vector<Value>{ctb, dinit};
  }
  Value eq = hlo::Compare(b, x[0], broadcast(y[0]), hlo::CompareDirection::kEq);
  Value mask = hlo::Convert(b, eq, in.element_type);
  Value counts = broadcast(hlo::SumOver(b, mask, dims));
  Value share = hlo::Div(b, hlo::Mul(b, ctb, mask), counts);
  TL_RETURN_IF_ERROR(b.status());
  return std::vector<Value>{share, Value()};
}

void RegisterReduce(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.reduce";
  d.traits.writes_all_results = true;
  d.num_regions = 1;
  d.infer = InferReduce;
  d.eval = EvalReduce;
  d.print = PrintReduce;
  d.parse = ParseReduce;
  d.vjp = ReduceVjp;
  r.Register(std::move(d));
}

}  // namespace

std::vector<int64_t> ReduceDimensions(const Operation& op) { return DimensionsOrEmpty(op.attrs()); }

void RegisterReductionOps(OpRegistry& r) {
  RegisterReduce(r);
  RegisterWindowOps(r);
  RegisterDotOps(r);
  RegisterSortOps(r);
  RegisterRaggedDotOps(r);
}

}  // namespace tlaloc::ops
