// Contractions: stablehlo.dot_general and the older stablehlo.dot: shape rule, syntax, gradient
// and the reference evaluation, a plain loop over operands packed in the accumulation type (f32
// for float operands, f64 when one is f64, wrapping u64 for integers; half types round once at
// the end). The CPU layer's kernel (cpu/dot_kernels.cc) reads f32/bf16 operands in place and runs
// the matrix-vector kernels, oneDNN and OpenBLAS instead.
#include "reduction_dot.h"

#include <algorithm>

#include "op_areas.h"
#include "op_helpers.h"
#include "reduction_kernels.h"
#include "tlaloc/ir/typed_builder.h"

namespace tlaloc::ops {

StatusOr<DotDims> ReadDotDims(const AttrDict& attrs) {
  const Attribute* a = FindAttr(attrs, "dot_dimension_numbers");
  if (!a || a->kind() != Attribute::Kind::kStruct)
    return InvalidArgument("expected a 'dot_dimension_numbers' #stablehlo.dot<...> attribute");
  DotDims d;
  auto field = [&](const char* name, std::vector<int64_t>& out) {
    return ReadIntListField(*a, "dot_dimension_numbers", name, out);
  };
  TL_RETURN_IF_ERROR(field("lhs_batching_dimensions", d.lhs_batch));
  TL_RETURN_IF_ERROR(field("rhs_batching_dimensions", d.rhs_batch));
  TL_RETURN_IF_ERROR(field("lhs_contracting_dimensions", d.lhs_contracting));
  TL_RETURN_IF_ERROR(field("rhs_contracting_dimensions", d.rhs_contracting));
  return d;
}

// Free dimensions of an operand: those neither batching nor contracting, in order.
std::vector<int64_t> FreeDims(int64_t rank, const std::vector<int64_t>& batch,
                              const std::vector<int64_t>& contract) {
  std::vector<int64_t> free;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(contract.begin(), contract.end(), d) == contract.end())
      free.push_back(d);
  return free;
}

namespace {

StatusOr<std::vector<int64_t>> DotResultDims(const TensorType& lhs, const TensorType& rhs,
                                             const DotDims& d) {
  if (d.lhs_batch.size() != d.rhs_batch.size())
    return InvalidArgument("lhs and rhs batching dimension lists differ in length");
  if (d.lhs_contracting.size() != d.rhs_contracting.size())
    return InvalidArgument("lhs and rhs contracting dimension lists differ in length");
  std::vector<int64_t> lhs_all = d.lhs_batch, rhs_all = d.rhs_batch;
  lhs_all.insert(lhs_all.end(), d.lhs_contracting.begin(), d.lhs_contracting.end());
  rhs_all.insert(rhs_all.end(), d.rhs_contracting.begin(), d.rhs_contracting.end());
  TL_RETURN_IF_ERROR(CheckDimensionList(lhs_all, lhs.rank(), "lhs batching+contracting dims"));
  TL_RETURN_IF_ERROR(CheckDimensionList(rhs_all, rhs.rank(), "rhs batching+contracting dims"));
  std::vector<int64_t> out;
  for (size_t i = 0; i < d.lhs_batch.size(); ++i) {
    int64_t a = lhs.dims[d.lhs_batch[i]], b = rhs.dims[d.rhs_batch[i]];
    if (a != b)
      return InvalidArgument("batching dimension " + std::to_string(i) + " has size " +
                             std::to_string(a) + " in lhs and " + std::to_string(b) + " in rhs");
    out.push_back(a);
  }
  for (size_t i = 0; i < d.lhs_contracting.size(); ++i) {
    int64_t a = lhs.dims[d.lhs_contracting[i]], b = rhs.dims[d.rhs_contracting[i]];
    if (a != b)
      return InvalidArgument("contracting dimension " + std::to_string(i) + " has size " +
                             std::to_string(a) + " in lhs and " + std::to_string(b) + " in rhs");
  }
  for (int64_t f : FreeDims(lhs.rank(), d.lhs_batch, d.lhs_contracting)) out.push_back(lhs.dims[f]);
  for (int64_t f : FreeDims(rhs.rank(), d.rhs_batch, d.rhs_contracting)) out.push_back(rhs.dims[f]);
  return out;
}

// Result: batch dims, lhs free dims, rhs free dims. The element type is the declared one when
// given (the "preferred element type"), else the lhs's.
StatusOr<std::vector<Type>> InferDotGeneralWith(const InferInput& in, const DotDims& d) {
  TL_RETURN_IF_ERROR(ExpectOperandCount(in, 2));
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  const TensorType& lhs = in.operand_types[0].tensor;
  const TensorType& rhs = in.operand_types[1].tensor;
  if (IsFloat(lhs.element_type) != IsFloat(rhs.element_type))
    return InvalidArgument("lhs " + lhs.ToString() + " and rhs " + rhs.ToString() +
                           " must both be floating-point or both integer");
  TL_ASSIGN_OR_RETURN(std::vector<int64_t> dims, DotResultDims(lhs, rhs, d));
  ElementType et = lhs.element_type;
  if (in.declared_results && in.declared_results->size() == 1 &&
      (*in.declared_results)[0].is_tensor())
    et = (*in.declared_results)[0].tensor.element_type;
  return std::vector<Type>{TensorType(et, dims)};
}

StatusOr<std::vector<Type>> InferDotGeneral(const InferInput& in) {
  TL_ASSIGN_OR_RETURN(DotDims d, ReadDotDims(in.attrs));
  return InferDotGeneralWith(in, d);
}

// stablehlo.dot: vector/matrix products, contracting lhs's last and rhs's first dimension.
StatusOr<DotDims> PlainDotDims(const TensorType& lhs, const TensorType& rhs) {
  if (lhs.rank() < 1 || lhs.rank() > 2 || rhs.rank() < 1 || rhs.rank() > 2)
    return InvalidArgument("stablehlo.dot takes rank-1 or rank-2 operands, got " + lhs.ToString() +
                           " and " + rhs.ToString());
  DotDims d;
  d.lhs_contracting = {lhs.rank() - 1};
  d.rhs_contracting = {0};
  return d;
}

StatusOr<std::vector<Type>> InferDot(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectOperandCount(in, 2));
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  TL_ASSIGN_OR_RETURN(DotDims d,
                      PlainDotDims(in.operand_types[0].tensor, in.operand_types[1].tensor));
  return InferDotGeneralWith(in, d);
}

// The reference contraction: both operands packed in the accumulation type A as [batch, m, k]
// and [batch, k, n], then each output row accumulated in index order of k, rows split over the
// pool. Integers wrap (A = uint64_t), as StableHLO's integer products do.
template <typename A>
void ReferenceMatmul(const std::vector<A>& a, const std::vector<A>& b, std::vector<A>& c,
                     int64_t batch, int64_t m, int64_t k, int64_t n, EvalContext& ctx) {
  c.assign(batch * m * n, A(0));
  if (batch * m * n == 0 || k == 0) return;
  int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(k * n, 1));
  ctx.ParallelFor(batch * m, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const A* arow = a.data() + row * k;
      const A* bmat = b.data() + (row / m) * k * n;
      A* crow = c.data() + row * n;
      for (int64_t kk = 0; kk < k; ++kk) {
        A av = arow[kk];
        const A* brow = bmat + kk * n;
        for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
      }
    }
  });
}

Status EvalDotReference(const DotDims& d, std::span<const Literal> operands, Literal& result,
                        EvalContext& ctx) {
  const Literal& lhs = operands[0];
  const Literal& rhs = operands[1];
  const DotShape s = ShapeOfDot(d, lhs, rhs);
  auto run = [&]<typename A>() {
    std::vector<A> a, b, c;
    PackOperand<A>(lhs, s.lhs_order, a);
    PackOperand<A>(rhs, s.rhs_order, b);
    ReferenceMatmul<A>(a, b, c, s.batch, s.m, s.k, s.n, ctx);
    StoreResult<A>(c, result);
  };
  switch (AccumulationOf(lhs, rhs, result.element_type())) {
    case DotAcc::kF32:
      run.template operator()<float>();
      break;
    case DotAcc::kF64:
      run.template operator()<double>();
      break;
    case DotAcc::kU64:
      run.template operator()<uint64_t>();
      break;
  }
  return OkStatus();
}

// "batching_dims = [0] x [0], contracting_dims = [2] x [1]"
void PrintDotDims(OpPrinter& p, const DotDims& d) {
  if (!d.lhs_batch.empty() || !d.rhs_batch.empty()) {
    p.Print(", batching_dims = ");
    p.PrintIntList(d.lhs_batch);
    p.Print(" x ");
    p.PrintIntList(d.rhs_batch);
  }
  p.Print(", contracting_dims = ");
  p.PrintIntList(d.lhs_contracting);
  p.Print(" x ");
  p.PrintIntList(d.rhs_contracting);
}

void PrintDotGeneral(const Operation& op, OpPrinter& p) {
  p.Print(" ");
  p.PrintOperands(op.operands());
  auto d = ReadDotDims(op.attrs());
  if (d.ok()) PrintDotDims(p, *d);
  std::vector<std::string> elided = {"dot_dimension_numbers"};
  const Attribute* prec = FindAttr(op.attrs(), "precision_config");
  if (prec && prec->kind() == Attribute::Kind::kArray) {
    p.Print(", precision = [");
    for (size_t i = 0; i < prec->as_array().size(); ++i) {
      if (i) p.Print(", ");
      p.Print(prec->as_array()[i].as_string());
    }
    p.Print("]");
    elided.push_back("precision_config");
  }
  p.PrintOptionalAttrDict(op.attrs(), elided);
  p.Print(" : ");
  p.PrintFunctionalType(op);
}

Status ParseDimPair(OpParser& p, std::vector<int64_t>& lhs, std::vector<int64_t>& rhs) {
  TL_RETURN_IF_ERROR(p.ParsePunct("="));
  TL_ASSIGN_OR_RETURN(lhs, p.ParseIntList());
  // "x" lexes as a keyword or as punctuation depending on the lexer; accept both.
  if (!p.ParseOptionalKeyword("x")) TL_RETURN_IF_ERROR(p.ParsePunct("x"));
  TL_ASSIGN_OR_RETURN(rhs, p.ParseIntList());
  return OkStatus();
}

Status ParseDotGeneral(OpParser& p, ParsedOp& op) {
  TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
  if (op.operands.size() != 2) return p.Error("expected two operands of stablehlo.dot_general");
  DotDims d;
  bool seen_contract = false;
  while (p.ParseOptionalPunct(",")) {
    if (p.ParseOptionalKeyword("batching_dims")) {
      TL_RETURN_IF_ERROR(ParseDimPair(p, d.lhs_batch, d.rhs_batch));
    } else if (p.ParseOptionalKeyword("contracting_dims")) {
      TL_RETURN_IF_ERROR(ParseDimPair(p, d.lhs_contracting, d.rhs_contracting));
      seen_contract = true;
    } else if (p.ParseOptionalKeyword("precision")) {
      TL_RETURN_IF_ERROR(p.ParsePunct("="));
      TL_RETURN_IF_ERROR(p.ParsePunct("["));
      std::vector<Attribute> prec;
      if (!p.ParseOptionalPunct("]")) {
        do {
          TL_ASSIGN_OR_RETURN(std::string v, p.ParseIdentifier());
          if (v != "DEFAULT" && v != "HIGH" && v != "HIGHEST")
            return p.Error("expected DEFAULT, HIGH or HIGHEST, found " + v);
          prec.push_back(Attribute::Enum(v, "precision"));
        } while (p.ParseOptionalPunct(","));
        TL_RETURN_IF_ERROR(p.ParsePunct("]"));
      }
      op.attrs["precision_config"] = Attribute::Array(std::move(prec));
    } else if (p.ParseOptionalKeyword("algorithm")) {
      TL_RETURN_IF_ERROR(p.ParsePunct("="));
      TL_ASSIGN_OR_RETURN(Attribute alg, p.ParseAttribute());
      op.attrs["algorithm"] = std::move(alg);
    } else {
      return p.Error("expected batching_dims, contracting_dims, precision or algorithm");
    }
  }
  if (!seen_contract) return p.Error("expected 'contracting_dims = [...] x [...]'");
  op.attrs["dot_dimension_numbers"] = hlo::DotDimensionsAttr(d);
  TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
  TL_RETURN_IF_ERROR(p.ParsePunct(":"));
  std::vector<Type> inputs;
  return p.ParseFunctionalType(inputs, op.result_types);
}

// Cotangent of one operand ("self") of a contraction: dot_general(ct, other) contracting
// ct's dimensions of the other operand's free dimensions, then transposed back to self's
// layout. The product's dimensions are self's batch, self's free, then self's contracting
// dimensions in the order of the other operand's contracting dimensions.
StatusOr<Value> OperandCotangent(OpBuilder& b, Value ct, Value self, Value other,
                                 const std::vector<int64_t>& self_batch,
                                 const std::vector<int64_t>& self_contract,
                                 const std::vector<int64_t>& other_batch,
                                 const std::vector<int64_t>& other_contract,
                                 const std::vector<int64_t>& ct_other_free) {
  const TensorType& st = self.tensor_type();
  const TensorType& ot = other.tensor_type();
  std::vector<int64_t> self_free = FreeDims(st.rank(), self_batch, self_contract);
  std::vector<int64_t> other_free = FreeDims(ot.rank(), other_batch, other_contract);
  std::vector<int64_t> ct_batch;
  for (size_t i = 0; i < self_batch.size(); ++i) ct_batch.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> order = self_batch;
  order.insert(order.end(), self_free.begin(), self_free.end());
  std::vector<std::pair<int64_t, int64_t>> rest;  // (other's dim, matching self dim)
  for (size_t j = 0; j < other_contract.size(); ++j)
    rest.emplace_back(other_contract[j], self_contract[j]);
  std::sort(rest.begin(), rest.end());
  for (const auto& [o, s] : rest) order.push_back(s);
  std::vector<int64_t> raw_dims;
  for (int64_t d : order) raw_dims.push_back(st.dims[d]);
  Value raw = hlo::DotGeneral(b, ct, other, {ct_batch, other_batch, ct_other_free, other_free},
                              TensorType(st.element_type, raw_dims));
  std::vector<int64_t> perm(st.rank());
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) {
    perm[order[i]] = static_cast<int64_t>(i);
    identity = identity && order[i] == static_cast<int64_t>(i);
  }
  if (identity) return raw;
  return hlo::Transpose(b, raw, perm);
}

StatusOr<std::vector<Value>> DotVjpWith(OpBuilder& b, const DotDims& d, const std::vector<Value>& x,
                                        const std::vector<Value>& cts) {
  if (!IsFloat(x[0].tensor_type().element_type)) return std::vector<Value>{Value(), Value()};
  int64_t nb = static_cast<int64_t>(d.lhs_batch.size());
  int64_t nlf = static_cast<int64_t>(
      FreeDims(x[0].tensor_type().rank(), d.lhs_batch, d.lhs_contracting).size());
  int64_t nrf = static_cast<int64_t>(
      FreeDims(x[1].tensor_type().rank(), d.rhs_batch, d.rhs_contracting).size());
  std::vector<int64_t> ct_lfree, ct_rfree;
  for (int64_t i = 0; i < nlf; ++i) ct_lfree.push_back(nb + i);
  for (int64_t i = 0; i < nrf; ++i) ct_rfree.push_back(nb + nlf + i);
  TL_ASSIGN_OR_RETURN(
      Value dl, OperandCotangent(b, cts[0], x[0], x[1], d.lhs_batch, d.lhs_contracting, d.rhs_batch,
                                 d.rhs_contracting, ct_rfree));
  TL_ASSIGN_OR_RETURN(
      Value dr, OperandCotangent(b, cts[0], x[1], x[0], d.rhs_batch, d.rhs_contracting, d.lhs_batch,
                                 d.lhs_contracting, ct_lfree));
  TL_RETURN_IF_ERROR(b.status());
  return std::vector<Value>{dl, dr};
}

}  // namespace

StatusOr<DotDims> DotDimsOf(const Operation& op, std::span<const Literal> operands) {
  if (op.name() == "stablehlo.dot") return PlainDotDims(operands[0].type(), operands[1].type());
  return ReadDotDims(op.attrs());
}

DotShape ShapeOfDot(const DotDims& d, const Literal& lhs, const Literal& rhs) {
  DotShape s;
  s.lhs_free = FreeDims(lhs.type().rank(), d.lhs_batch, d.lhs_contracting);
  s.rhs_free = FreeDims(rhs.type().rank(), d.rhs_batch, d.rhs_contracting);
  for (int64_t x : d.lhs_batch) s.batch *= lhs.dims()[x];
  for (int64_t x : s.lhs_free) s.m *= lhs.dims()[x];
  for (int64_t x : d.lhs_contracting) s.k *= lhs.dims()[x];
  for (int64_t x : s.rhs_free) s.n *= rhs.dims()[x];
  s.lhs_order = d.lhs_batch;
  s.rhs_order = d.rhs_batch;
  s.lhs_order.insert(s.lhs_order.end(), s.lhs_free.begin(), s.lhs_free.end());
  s.lhs_order.insert(s.lhs_order.end(), d.lhs_contracting.begin(), d.lhs_contracting.end());
  s.rhs_order.insert(s.rhs_order.end(), d.rhs_contracting.begin(), d.rhs_contracting.end());
  s.rhs_order.insert(s.rhs_order.end(), s.rhs_free.begin(), s.rhs_free.end());
  return s;
}

DotAcc AccumulationOf(const Literal& lhs, const Literal& rhs, ElementType result) {
  if (!IsFloat(result) && !IsFloat(lhs.element_type())) return DotAcc::kU64;
  if (result == ElementType::kF64 || lhs.element_type() == ElementType::kF64 ||
      rhs.element_type() == ElementType::kF64)
    return DotAcc::kF64;
  return DotAcc::kF32;
}

void RegisterDotOps(OpRegistry& r) {
  {
    OpDef d;
    d.name = "stablehlo.dot_general";
    d.traits.writes_all_results = true;  // C = A * B, never C +=
    d.infer = InferDotGeneral;
    d.eval = [](const Operation& op, std::span<const Literal> operands,
                std::vector<Literal>& results, EvalContext& ctx) -> Status {
      TL_ASSIGN_OR_RETURN(DotDims dd, ReadDotDims(op.attrs()));
      return EvalDotReference(dd, operands, results[0], ctx);
    };
    d.vjp = [](OpBuilder& b, const Operation& op, const std::vector<Value>& x,
               const std::vector<Value>&,
               const std::vector<Value>& cts) -> StatusOr<std::vector<Value>> {
      TL_ASSIGN_OR_RETURN(DotDims dd, ReadDotDims(op.attrs()));
      return DotVjpWith(b, dd, x, cts);
    };
    d.print = PrintDotGeneral;
    d.parse = ParseDotGeneral;
    r.Register(std::move(d));
  }
  {
    OpDef d;
    d.name = "stablehlo.dot";
    d.traits.writes_all_results = true;
    d.infer = InferDot;
    d.eval = [](const Operation&, std::span<const Literal> operands, std::vector<Literal>& results,
                EvalContext& ctx) -> Status {
      TL_ASSIGN_OR_RETURN(DotDims dd, PlainDotDims(operands[0].type(), operands[1].type()));
      return EvalDotReference(dd, operands, results[0], ctx);
    };
    d.vjp = [](OpBuilder& b, const Operation&, const std::vector<Value>& x,
               const std::vector<Value>&,
               const std::vector<Value>& cts) -> StatusOr<std::vector<Value>> {
      TL_ASSIGN_OR_RETURN(DotDims dd, PlainDotDims(x[0].tensor_type(), x[1].tensor_type()));
      return DotVjpWith(b, dd, x, cts);
    };
    d.print = [](const Operation& op, OpPrinter& p) { PrintFunctional(op, p); };
    d.parse = [](OpParser& p, ParsedOp& op) -> Status {
      TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
      TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
      TL_RETURN_IF_ERROR(p.ParsePunct(":"));
      std::vector<Type> inputs;
      return p.ParseFunctionalType(inputs, op.result_types);
    };
    r.Register(std::move(d));
  }
}

}  // namespace tlaloc::ops
