// Data-movement ops: broadcast_in_dim, reshape, transpose, reverse, slice, concatenate, pad,
// dynamic_slice, dynamic_update_slice. Gather and scatter live in data_movement_gather.cc.
// Every evaluation is a strided box copy (data_movement_kernels.h), so all element types share
// one byte-size-generic kernel.
#include <algorithm>
#include <numeric>

#include "data_movement_boxes.h"
#include "data_movement_kernels.h"
#include "data_movement_vjp.h"
#include "op_areas.h"
#include "op_helpers.h"

namespace tlaloc::ops {

void RegisterGatherScatterOps(OpRegistry& r);  // data_movement_gather.cc

// ---- the hot ops' box copies (data_movement_boxes.h) ------------------------------------------

BoxCopy SliceBox(const Operation& op, const TensorType& in, const TensorType& out) {
  const std::vector<int64_t> start = IntList(op, "start_indices");
  const std::vector<int64_t> strides = IntList(op, "strides");
  StridedView src = DenseView(in.dims);
  for (size_t i = 0; i < start.size(); ++i) {
    src.offset += start[i] * src.strides[i];
    if (!strides.empty()) src.strides[i] *= strides[i];
  }
  return PrepareBoxCopy(DenseView(out.dims), src, out.dims, ElementSize(in.element_type));
}

BoxCopy TransposeBox(const Operation& op, const TensorType& in, const TensorType& out) {
  const std::vector<int64_t> perm = IntList(op, "permutation");
  const std::vector<int64_t> in_strides = RowMajorStrides(in.dims);
  StridedView src{0, {}};
  for (int64_t p : perm) src.strides.push_back(in_strides[p]);
  return PrepareBoxCopy(DenseView(out.dims), src, out.dims, ElementSize(in.element_type));
}

std::optional<BoxCopy> BroadcastBox(const Operation& op, const TensorType& in,
                                    const TensorType& out) {
  const std::vector<int64_t> bdims = IntList(op, "broadcast_dimensions");
  if (in.dims == out.dims) {
    bool identity = true;
    for (size_t i = 0; i < bdims.size(); ++i) identity = identity && bdims[i] == int64_t(i);
    if (identity) return std::nullopt;  // same shape, same order: share the bytes
  }
  const std::vector<int64_t> in_strides = RowMajorStrides(in.dims);
  StridedView src{0, std::vector<int64_t>(out.dims.size(), 0)};
  for (size_t i = 0; i < bdims.size(); ++i)
    if (in.dims[i] != 1) src.strides[bdims[i]] = in_strides[i];
  return PrepareBoxCopy(DenseView(out.dims), src, out.dims, ElementSize(out.element_type));
}

std::vector<BoxCopy> ConcatenateBoxes(const Operation& op, std::span<const TensorType* const> ins,
                                      const TensorType& out) {
  const int64_t dim = GetIntAttr(op.attrs(), "dimension", 0);
  StridedView dst = DenseView(out.dims);
  std::vector<BoxCopy> copies;
  for (const TensorType* in : ins) {
    copies.push_back(
        PrepareBoxCopy(dst, DenseView(in->dims), in->dims, ElementSize(in->element_type)));
    dst.offset += in->dims[dim] * dst.strides[dim];
  }
  return copies;
}

int64_t DynamicBox::Offset(std::span<const Literal> operands, size_t first) const {
  int64_t offset = 0;
  for (size_t i = 0; i < max_start.size(); ++i)
    offset +=
        std::clamp<int64_t>(ScalarIndex(operands[first + i]), 0, max_start[i]) * operand_strides[i];
  return offset;
}

namespace {
DynamicBox MakeDynamicBox(const TensorType& operand, const std::vector<int64_t>& box) {
  DynamicBox b;
  b.operand_strides = RowMajorStrides(operand.dims);
  for (size_t i = 0; i < operand.dims.size(); ++i) b.max_start.push_back(operand.dims[i] - box[i]);
  return b;
}
}  // namespace

DynamicBox DynamicSliceBox(const TensorType& in, const TensorType& out) {
  DynamicBox b = MakeDynamicBox(in, out.dims);
  b.copy = PrepareBoxCopy(DenseView(out.dims), DenseView(in.dims), out.dims,
                          ElementSize(in.element_type));
  return b;
}

DynamicBox DynamicUpdateBox(const TensorType& in, const TensorType& update) {
  DynamicBox b = MakeDynamicBox(in, update.dims);
  b.copy = PrepareBoxCopy(DenseView(in.dims), DenseView(update.dims), update.dims,
                          ElementSize(in.element_type));
  return b;
}

BoxCopy WholeCopy(const TensorType& type) {
  return PrepareBoxCopy(DenseView(type.dims), DenseView(type.dims), type.dims,
                        ElementSize(type.element_type));
}

namespace {

using Dims = std::vector<int64_t>;

std::string Str(int64_t v) { return std::to_string(v); }

// Operand i as a tensor type, or an error naming it.
StatusOr<TensorType> TensorOperand(const InferInput& in, size_t i, const char* what) {
  if (i >= in.operand_types.size()) return InvalidArgument(std::string("missing ") + what);
  if (!in.operand_types[i].is_tensor())
    return InvalidArgument(std::string(what) + " must be a tensor, got " +
                           in.operand_types[i].ToString());
  return in.operand_types[i].tensor;
}

// The single declared result, which must be a tensor of `et`.
StatusOr<TensorType> DeclaredTensor(const InferInput& in, ElementType et) {
  TL_ASSIGN_OR_RETURN(std::vector<Type> declared, DeclaredResults(in, 1));
  if (!declared[0].is_tensor()) return InvalidArgument("the result must be a tensor");
  if (declared[0].tensor.element_type != et)
    return InvalidArgument("expected the result element type " + std::string(MlirName(et)) +
                           ", got " + declared[0].ToString());
  return declared[0].tensor;
}

// Checks the result against the declared one when given, and returns it.
StatusOr<std::vector<Type>> Result(const InferInput& in, TensorType t) {
  if (in.declared_results && in.declared_results->size() == 1 &&
      !((*in.declared_results)[0] == Type(t)))
    return InvalidArgument("expected result type " + t.ToString() + ", got " +
                           (*in.declared_results)[0].ToString());
  return std::vector<Type>{Type(std::move(t))};
}

Status AttrLength(const Dims& v, int64_t rank, const char* name) {
  if (static_cast<int64_t>(v.size()) != rank)
    return InvalidArgument(std::string("expected ") + Str(rank) + " entries in '" + name +
                           "', got " + Str(static_cast<int64_t>(v.size())));
  return OkStatus();
}

// ---- shared pretty syntax pieces ---------------------------------------------------------------

// ", name = [a, b]"
void PrintNamedList(OpPrinter& p, const char* name, const Dims& v) {
  p.Print(std::string(", ") + name + " = ");
  p.PrintIntList(v);
}

Status ParseNamedList(OpParser& p, const char* keyword, const char* attr, ParsedOp& op) {
  TL_RETURN_IF_ERROR(p.ParseKeyword(keyword));
  TL_RETURN_IF_ERROR(p.ParsePunct("="));
  TL_ASSIGN_OR_RETURN(Dims v, p.ParseIntList());
  op.attrs[attr] = Attribute::IntArray(std::move(v));
  return OkStatus();
}

// "{attrs} : (t, ...) -> t" tail shared by most forms.
Status ParseFunctionalTail(OpParser& p, ParsedOp& op) {
  TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
  TL_RETURN_IF_ERROR(p.ParsePunct(":"));
  std::vector<Type> inputs;
  TL_RETURN_IF_ERROR(p.ParseFunctionalType(inputs, op.result_types));
  if (inputs.size() != op.operands.size())
    return p.Error("expected " + Str(static_cast<int64_t>(op.operands.size())) +
                   " operand types in the functional type, got " +
                   Str(static_cast<int64_t>(inputs.size())));
  return OkStatus();
}

// "%a, %b, ..., <keyword>": operands up to a keyword that follows a comma.
Status ParseOperandsUntilKeyword(OpParser& p, const char* keyword, ParsedOp& op) {
  TL_ASSIGN_OR_RETURN(Value first, p.ParseOperand());
  op.operands.push_back(first);
  while (true) {
    TL_RETURN_IF_ERROR(p.ParsePunct(","));
    if (p.ParseOptionalKeyword(keyword)) return OkStatus();
    TL_ASSIGN_OR_RETURN(Value v, p.ParseOperand());
    op.operands.push_back(v);
  }
}

const Literal& Operand(std::span<const Literal> operands, int i) { return operands[i]; }

// Pretty form "op %x, KEYWORD = [..] {attrs} : (t) -> t", the list being attribute `attr`
// (broadcast_in_dim, transpose, reverse).
void UseOperandListSyntax(OpDef& d, std::string keyword, std::string attr) {
  d.print = [keyword, attr](const Operation& op, OpPrinter& p) {
    p.Print(" ");
    p.PrintOperand(op.operand(0));
    PrintNamedList(p, keyword.c_str(), IntList(op, attr));
    p.PrintOptionalAttrDict(op.attrs(), {attr});
    p.Print(" : ");
    p.PrintFunctionalType(op);
  };
  d.parse = [keyword, attr](OpParser& p, ParsedOp& op) -> Status {
    TL_ASSIGN_OR_RETURN(Value v, p.ParseOperand());
    op.operands = {v};
    TL_RETURN_IF_ERROR(p.ParsePunct(","));
    TL_RETURN_IF_ERROR(ParseNamedList(p, keyword.c_str(), attr.c_str(), op));
    return ParseFunctionalTail(p, op);
  };
}

// ---- broadcast_in_dim ------------------------------------------------------------------------

void RegisterBroadcastInDim(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.broadcast_in_dim";
  d.traits.writes_all_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
    TL_ASSIGN_OR_RETURN(TensorType operand, TensorOperand(in, 0, "operand"));
    TL_ASSIGN_OR_RETURN(TensorType result, DeclaredTensor(in, operand.element_type));
    Dims dims = GetIntArrayAttr(in.attrs, "broadcast_dimensions");
    TL_RETURN_IF_ERROR(AttrLength(dims, operand.rank(), "broadcast_dimensions"));
    std::vector<bool> seen(result.rank(), false);
    for (int64_t i = 0; i < operand.rank(); ++i) {
      int64_t rd = dims[i];
      if (rd < 0 || rd >= result.rank() || seen[rd])
        return InvalidArgument("broadcast_dimensions " + ListToString(dims) +
                               " must be distinct result dimensions below " + Str(result.rank()));
      seen[rd] = true;
      if (operand.dims[i] != 1 && operand.dims[i] != result.dims[rd])
        return InvalidArgument("operand dimension " + Str(i) + " of size " + Str(operand.dims[i]) +
                               " cannot broadcast to result dimension " + Str(rd) + " of size " +
                               Str(result.dims[rd]));
    }
    return std::vector<Type>{Type(result)};
  };
  d.eval = [](const Operation& op, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext& ctx) -> Status {
    const Literal& in = Operand(operands, 0);
    Literal& out = results[0];
    const std::optional<BoxCopy> box = BroadcastBox(op, in.type(), out.type());
    if (!box) {
      out = in;  // same shape, same order: share the bytes
      return OkStatus();
    }
    RunBoxCopy(*box, out.data(), 0, in.data(), 0, &ctx);
    return OkStatus();
  };
  UseOperandListSyntax(d, "dims", "broadcast_dimensions");
  d.vjp = BroadcastInDimVjp;
  r.Register(std::move(d));
}

// ---- reshape ---------------------------------------------------------------------------------

void RegisterReshape(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.reshape";
  d.traits.writes_all_results = true;  // a view of the operand
  d.traits.replaces_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
    TL_ASSIGN_OR_RETURN(TensorType operand, TensorOperand(in, 0, "operand"));
    TL_ASSIGN_OR_RETURN(TensorType result, DeclaredTensor(in, operand.element_type));
    if (result.num_elements() != operand.num_elements())
      return InvalidArgument("cannot reshape " + operand.ToString() + " (" +
                             Str(operand.num_elements()) + " elements) to " + result.ToString());
    return std::vector<Type>{Type(result)};
  };
  d.eval = [](const Operation&, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext&) -> Status {
    // Row-major order is unchanged: a view of the operand's bytes.
    TL_ASSIGN_OR_RETURN(results[0], operands[0].Reshaped(results[0].dims()));
    return OkStatus();
  };
  d.print = [](const Operation& op, OpPrinter& p) { PrintFunctional(op, p); };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_ASSIGN_OR_RETURN(Value v, p.ParseOperand());
    op.operands = {v};
    return ParseFunctionalTail(p, op);
  };
  d.vjp = ReshapeVjp;
  r.Register(std::move(d));
}

// ---- transpose -------------------------------------------------------------------------------

void RegisterTranspose(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.transpose";
  d.traits.writes_all_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
    TL_ASSIGN_OR_RETURN(TensorType operand, TensorOperand(in, 0, "operand"));
    Dims perm = GetIntArrayAttr(in.attrs, "permutation");
    TL_RETURN_IF_ERROR(AttrLength(perm, operand.rank(), "permutation"));
    std::vector<bool> seen(operand.rank(), false);
    TensorType result(operand.element_type, {});
    for (int64_t p : perm) {
      if (p < 0 || p >= operand.rank() || seen[p])
        return InvalidArgument("expected 'permutation' to be a permutation of [0, " +
                               Str(operand.rank()) + "), got " + ListToString(perm));
      seen[p] = true;
      result.dims.push_back(operand.dims[p]);
    }
    return Result(in, std::move(result));
  };
  d.eval = [](const Operation& op, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext& ctx) -> Status {
    const Literal& in = operands[0];
    RunBoxCopy(TransposeBox(op, in.type(), results[0].type()), results[0].data(), 0, in.data(), 0,
               &ctx);
    return OkStatus();
  };
  UseOperandListSyntax(d, "dims", "permutation");
  d.vjp = TransposeVjp;
  r.Register(std::move(d));
}

// ---- reverse ---------------------------------------------------------------------------------

void RegisterReverse(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.reverse";
  d.traits.writes_all_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
    TL_ASSIGN_OR_RETURN(TensorType operand, TensorOperand(in, 0, "operand"));
    Dims dims = GetIntArrayAttr(in.attrs, "dimensions");
    std::vector<bool> seen(operand.rank(), false);
    for (int64_t v : dims) {
      if (v < 0 || v >= operand.rank() || seen[v])
        return InvalidArgument("expected 'dimensions' to be distinct dimensions below " +
                               Str(operand.rank()) + ", got " + ListToString(dims));
      seen[v] = true;
    }
    return Result(in, operand);
  };
  d.eval = [](const Operation& op, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext& ctx) -> Status {
    const Literal& in = operands[0];
    StridedView src = DenseView(in.dims());
    for (int64_t v : IntList(op, "dimensions")) {
      if (in.dims()[v] == 0) return OkStatus();
      src.offset += (in.dims()[v] - 1) * src.strides[v];
      src.strides[v] = -src.strides[v];
    }
    CopyBox(results[0].data(), DenseView(in.dims()), in.data(), src, in.dims(),
            ElementSize(in.element_type()), &ctx);
    return OkStatus();
  };
  d.print = [](const Operation& op, OpPrinter& p) {
    p.Print(" ");
    p.PrintOperand(op.operand(0));
    PrintNamedList(p, "dims", IntList(op, "dimensions"));
    p.PrintOptionalAttrDict(op.attrs(), {"dimensions"});
    p.Print(" : ");
    p.PrintType(op.result(0).type());
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_ASSIGN_OR_RETURN(Value v, p.ParseOperand());
    op.operands = {v};
    TL_RETURN_IF_ERROR(p.ParsePunct(","));
    TL_RETURN_IF_ERROR(ParseNamedList(p, "dims", "dimensions", op));
    TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
    TL_RETURN_IF_ERROR(p.ParsePunct(":"));
    if (p.Peek("(")) {
      std::vector<Type> inputs;
      return p.ParseFunctionalType(inputs, op.result_types);
    }
    TL_ASSIGN_OR_RETURN(Type t, p.ParseType());
    op.result_types = {t};
    return OkStatus();
  };
  d.vjp = ReverseVjp;
  r.Register(std::move(d));
}

// ---- slice -----------------------------------------------------------------------------------

void RegisterSlice(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.slice";
  d.traits.writes_all_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
    TL_ASSIGN_OR_RETURN(TensorType operand, TensorOperand(in, 0, "operand"));
    Dims start = GetIntArrayAttr(in.attrs, "start_indices");
    Dims limit = GetIntArrayAttr(in.attrs, "limit_indices");
    Dims strides = GetIntArrayAttr(in.attrs, "strides");
    if (strides.empty()) strides.assign(operand.rank(), 1);
    TL_RETURN_IF_ERROR(AttrLength(start, operand.rank(), "start_indices"));
    TL_RETURN_IF_ERROR(AttrLength(limit, operand.rank(), "limit_indices"));
    TL_RETURN_IF_ERROR(AttrLength(strides, operand.rank(), "strides"));
    TensorType result(operand.element_type, {});
    for (int64_t i = 0; i < operand.rank(); ++i) {
      if (start[i] < 0 || start[i] > limit[i] || limit[i] > operand.dims[i] || strides[i] <= 0)
        return InvalidArgument("dimension " + Str(i) + ": expected 0 <= start <= limit <= " +
                               Str(operand.dims[i]) + " and stride > 0, got [" + Str(start[i]) +
                               ":" + Str(limit[i]) + ":" + Str(strides[i]) + "]");
      result.dims.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
    }
    return Result(in, std::move(result));
  };
  d.eval = [](const Operation& op, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext& ctx) -> Status {
    const Literal& in = operands[0];
    RunBoxCopy(SliceBox(op, in.type(), results[0].type()), results[0].data(), 0, in.data(), 0,
               &ctx);
    return OkStatus();
  };
  // stablehlo.slice %0 [0:2, 1:7:2] : (t) -> t   (":stride" only when not 1)
  d.print = [](const Operation& op, OpPrinter& p) {
    Dims start = IntList(op, "start_indices");
    Dims limit = IntList(op, "limit_indices");
    Dims strides = IntList(op, "strides");
    p.Print(" ");
    p.PrintOperand(op.operand(0));
    std::string s = " [";
    for (size_t i = 0; i < start.size(); ++i) {
      if (i) s += ", ";
      s += Str(start[i]) + ":" + Str(limit[i]);
      if (i < strides.size() && strides[i] != 1) s += ":" + Str(strides[i]);
    }
    p.Print(s + "]");
    p.PrintOptionalAttrDict(op.attrs(), {"start_indices", "limit_indices", "strides"});
    p.Print(" : ");
    p.PrintFunctionalType(op);
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_ASSIGN_OR_RETURN(Value v, p.ParseOperand());
    op.operands = {v};
    Dims start, limit, strides;
    TL_RETURN_IF_ERROR(p.ParsePunct("["));
    if (!p.ParseOptionalPunct("]")) {
      do {
        TL_ASSIGN_OR_RETURN(int64_t s, p.ParseInteger());
        TL_RETURN_IF_ERROR(p.ParsePunct(":"));
        TL_ASSIGN_OR_RETURN(int64_t l, p.ParseInteger());
        int64_t st = 1;
        if (p.ParseOptionalPunct(":")) {
          TL_ASSIGN_OR_RETURN(st, p.ParseInteger());
        }
        start.push_back(s);
        limit.push_back(l);
        strides.push_back(st);
      } while (p.ParseOptionalPunct(","));
      TL_RETURN_IF_ERROR(p.ParsePunct("]"));
    }
    op.attrs["start_indices"] = Attribute::IntArray(start);
    op.attrs["limit_indices"] = Attribute::IntArray(limit);
    op.attrs["strides"] = Attribute::IntArray(strides);
    return ParseFunctionalTail(p, op);
  };
  d.vjp = SliceVjp;
  r.Register(std::move(d));
}

// ---- concatenate -----------------------------------------------------------------------------

void RegisterConcatenate(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.concatenate";
  d.traits.writes_all_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    if (in.operand_types.empty()) return InvalidArgument("expected at least one operand");
    TL_ASSIGN_OR_RETURN(TensorType first, TensorOperand(in, 0, "operand 0"));
    const Attribute* a = FindAttr(in.attrs, "dimension");
    if (!a || a->kind() != Attribute::Kind::kInt)
      return InvalidArgument("expected an integer 'dimension' attribute");
    int64_t dim = a->as_int();
    if (dim < 0 || dim >= first.rank())
      return InvalidArgument("expected 'dimension' in [0, " + Str(first.rank()) + "), got " +
                             Str(dim));
    TensorType result = first;
    for (size_t i = 1; i < in.operand_types.size(); ++i) {
      TL_ASSIGN_OR_RETURN(TensorType t, TensorOperand(in, i, "operand"));
      bool ok = t.element_type == first.element_type && t.rank() == first.rank();
      for (int64_t k = 0; ok && k < t.rank(); ++k) ok = k == dim || t.dims[k] == first.dims[k];
      if (!ok)
        return InvalidArgument("operand " + Str(static_cast<int64_t>(i)) + " of type " +
                               t.ToString() + " does not match " + first.ToString() +
                               " outside dimension " + Str(dim));
      result.dims[dim] += t.dims[dim];
    }
    return Result(in, std::move(result));
  };
  d.eval = [](const Operation& op, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext& ctx) -> Status {
    Literal& out = results[0];
    std::vector<const TensorType*> types;
    for (const Literal& in : operands) types.push_back(&in.type());
    const std::vector<BoxCopy> copies = ConcatenateBoxes(op, types, out.type());
    for (size_t i = 0; i < copies.size(); ++i)
      RunBoxCopy(copies[i], out.data(), 0, operands[i].data(), 0, &ctx);
    return OkStatus();
  };
  d.print = [](const Operation& op, OpPrinter& p) {
    p.Print(" ");
    p.PrintOperands(op.operands());
    p.Print(", dim = " + Str(GetIntAttr(op.attrs(), "dimension", 0)));
    p.PrintOptionalAttrDict(op.attrs(), {"dimension"});
    p.Print(" : ");
    p.PrintFunctionalType(op);
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_RETURN_IF_ERROR(ParseOperandsUntilKeyword(p, "dim", op));
    TL_RETURN_IF_ERROR(p.ParsePunct("="));
    TL_ASSIGN_OR_RETURN(int64_t dim, p.ParseInteger());
    op.attrs["dimension"] = Attribute::Int(dim, ElementType::kS64);
    return ParseFunctionalTail(p, op);
  };
  d.vjp = ConcatenateVjp;
  r.Register(std::move(d));
}

// ---- pad -------------------------------------------------------------------------------------

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

void RegisterPad(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.pad";
  d.traits.writes_all_results = true;  // filled with the padding value first
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 2));
    TL_ASSIGN_OR_RETURN(TensorType operand, TensorOperand(in, 0, "operand"));
    TL_ASSIGN_OR_RETURN(TensorType value, TensorOperand(in, 1, "padding value"));
    if (value.rank() != 0 || value.element_type != operand.element_type)
      return InvalidArgument("expected the padding value to be a tensor<" +
                             std::string(MlirName(operand.element_type)) + ">, got " +
                             value.ToString());
    Dims low = GetIntArrayAttr(in.attrs, "edge_padding_low");
    Dims high = GetIntArrayAttr(in.attrs, "edge_padding_high");
    Dims interior = GetIntArrayAttr(in.attrs, "interior_padding");
    TL_RETURN_IF_ERROR(AttrLength(low, operand.rank(), "edge_padding_low"));
    TL_RETURN_IF_ERROR(AttrLength(high, operand.rank(), "edge_padding_high"));
    TL_RETURN_IF_ERROR(AttrLength(interior, operand.rank(), "interior_padding"));
    TensorType result(operand.element_type, {});
    for (int64_t i = 0; i < operand.rank(); ++i) {
      if (interior[i] < 0)
        return InvalidArgument("expected interior_padding >= 0, got " + ListToString(interior));
      int64_t n = operand.dims[i];
      int64_t size = low[i] + high[i] + n + std::max<int64_t>(n - 1, 0) * interior[i];
      if (size < 0)
        return InvalidArgument("dimension " + Str(i) + " would have negative size " + Str(size));
      result.dims.push_back(size);
    }
    return Result(in, std::move(result));
  };
  d.eval = [](const Operation& op, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext& ctx) -> Status {
    const Literal& in = operands[0];
    Literal& out = results[0];
    const int esize = ElementSize(in.element_type());
    FillElements(out.data(), out.num_elements(), operands[1].data(), esize, &ctx);
    Dims low = IntList(op, "edge_padding_low");
    Dims interior = IntList(op, "interior_padding");
    StridedView src = DenseView(in.dims()), dst = DenseView(out.dims());
    Dims box(in.dims().size());
    for (size_t i = 0; i < box.size(); ++i) {
      // Input element j lands at low + j * step; keep the j whose position is inside the result.
      const int64_t step = interior[i] + 1, n = in.dims()[i], size = out.dims()[i];
      int64_t first = low[i] >= 0 ? 0 : (-low[i] + step - 1) / step;
      int64_t last = std::min(n - 1, FloorDiv(size - 1 - low[i], step));
      box[i] = std::max<int64_t>(0, last - first + 1);
      src.offset += first * src.strides[i];
      if (box[i] > 0) dst.offset += (low[i] + first * step) * dst.strides[i];
      dst.strides[i] *= step;
    }
    CopyBox(out.data(), dst, in.data(), src, box, esize, &ctx);
    return OkStatus();
  };
  d.print = [](const Operation& op, OpPrinter& p) {
    p.Print(" ");
    p.PrintOperands(op.operands());
    PrintNamedList(p, "low", IntList(op, "edge_padding_low"));
    PrintNamedList(p, "high", IntList(op, "edge_padding_high"));
    PrintNamedList(p, "interior", IntList(op, "interior_padding"));
    p.PrintOptionalAttrDict(op.attrs(),
                            {"edge_padding_low", "edge_padding_high", "interior_padding"});
    p.Print(" : ");
    p.PrintFunctionalType(op);
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_RETURN_IF_ERROR(ParseOperandsUntilKeyword(p, "low", op));
    TL_RETURN_IF_ERROR(p.ParsePunct("="));
    TL_ASSIGN_OR_RETURN(Dims low, p.ParseIntList());
    op.attrs["edge_padding_low"] = Attribute::IntArray(std::move(low));
    TL_RETURN_IF_ERROR(p.ParsePunct(","));
    TL_RETURN_IF_ERROR(ParseNamedList(p, "high", "edge_padding_high", op));
    TL_RETURN_IF_ERROR(p.ParsePunct(","));
    TL_RETURN_IF_ERROR(ParseNamedList(p, "interior", "interior_padding", op));
    return ParseFunctionalTail(p, op);
  };
  d.vjp = PadVjp;
  r.Register(std::move(d));
}

// ---- dynamic_slice / dynamic_update_slice ----------------------------------------------------

Status CheckScalarIndices(const InferInput& in, size_t first, int64_t rank) {
  if (static_cast<int64_t>(in.operand_types.size() - first) != rank)
    return InvalidArgument("expected " + Str(rank) + " start index operands, got " +
                           Str(static_cast<int64_t>(in.operand_types.size() - first)));
  for (size_t i = first; i < in.operand_types.size(); ++i) {
    const Type& t = in.operand_types[i];
    if (!t.is_tensor() || t.tensor.rank() != 0 || !IsInteger(t.tensor.element_type))
      return InvalidArgument("expected start index operand " + Str(static_cast<int64_t>(i)) +
                             " to be an integer scalar tensor, got " + t.ToString());
  }
  return OkStatus();
}

void RegisterDynamicSlice(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.dynamic_slice";
  d.traits.writes_all_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_ASSIGN_OR_RETURN(TensorType operand, TensorOperand(in, 0, "operand"));
    TL_RETURN_IF_ERROR(CheckScalarIndices(in, 1, operand.rank()));
    Dims sizes = GetIntArrayAttr(in.attrs, "slice_sizes");
    TL_RETURN_IF_ERROR(AttrLength(sizes, operand.rank(), "slice_sizes"));
    for (int64_t i = 0; i < operand.rank(); ++i)
      if (sizes[i] < 0 || sizes[i] > operand.dims[i])
        return InvalidArgument("expected slice_sizes within " + operand.ToString() + ", got " +
                               ListToString(sizes));
    return Result(in, TensorType(operand.element_type, sizes));
  };
  d.eval = [](const Operation&, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext& ctx) -> Status {
    const Literal& in = operands[0];
    const DynamicBox box = DynamicSliceBox(in.type(), results[0].type());
    RunBoxCopy(box.copy, results[0].data(), 0, in.data(), box.Offset(operands, 1), &ctx);
    return OkStatus();
  };
  d.print = [](const Operation& op, OpPrinter& p) {
    p.Print(" ");
    p.PrintOperands(op.operands());
    PrintNamedList(p, "sizes", IntList(op, "slice_sizes"));
    p.PrintOptionalAttrDict(op.attrs(), {"slice_sizes"});
    p.Print(" : ");
    p.PrintFunctionalType(op);
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_RETURN_IF_ERROR(ParseOperandsUntilKeyword(p, "sizes", op));
    TL_RETURN_IF_ERROR(p.ParsePunct("="));
    TL_ASSIGN_OR_RETURN(Dims sizes, p.ParseIntList());
    op.attrs["slice_sizes"] = Attribute::IntArray(std::move(sizes));
    return ParseFunctionalTail(p, op);
  };
  d.vjp = DynamicSliceVjp;
  r.Register(std::move(d));
}

void RegisterDynamicUpdateSlice(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.dynamic_update_slice";
  d.traits.writes_all_results = true;  // the operand copied (or reused) first
  d.traits.in_place = OpTraits::InPlace::kSameIndex;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_ASSIGN_OR_RETURN(TensorType operand, TensorOperand(in, 0, "operand"));
    TL_ASSIGN_OR_RETURN(TensorType update, TensorOperand(in, 1, "update"));
    if (update.element_type != operand.element_type || update.rank() != operand.rank())
      return InvalidArgument(
          "expected the update to have the operand's rank and element type, "
          "got " +
          update.ToString() + " for " + operand.ToString());
    for (int64_t i = 0; i < operand.rank(); ++i)
      if (update.dims[i] > operand.dims[i])
        return InvalidArgument("update " + update.ToString() + " does not fit in " +
                               operand.ToString());
    TL_RETURN_IF_ERROR(CheckScalarIndices(in, 2, operand.rank()));
    return Result(in, operand);
  };
  d.eval = [](const Operation&, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext& ctx) -> Status {
    const Literal& in = operands[0];
    const Literal& update = operands[1];
    Literal& out = results[0];
    if (ctx.CanReuseOperand(0))
      out = in;  // the operand dies here: write the update into its buffer (KV cache updates)
    else
      RunBoxCopy(WholeCopy(in.type()), out.data(), 0, in.data(), 0, &ctx);
    const DynamicBox box = DynamicUpdateBox(in.type(), update.type());
    RunBoxCopy(box.copy, out.data(), box.Offset(operands, 2), update.data(), 0, &ctx);
    return OkStatus();
  };
  d.print = [](const Operation& op, OpPrinter& p) { PrintFunctional(op, p); };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
    return ParseFunctionalTail(p, op);
  };
  d.vjp = DynamicUpdateSliceVjp;
  r.Register(std::move(d));
}

}  // namespace

void RegisterDataMovementOps(OpRegistry& r) {
  RegisterBroadcastInDim(r);
  RegisterReshape(r);
  RegisterTranspose(r);
  RegisterReverse(r);
  RegisterSlice(r);
  RegisterConcatenate(r);
  RegisterPad(r);
  RegisterDynamicSlice(r);
  RegisterDynamicUpdateSlice(r);
  RegisterGatherScatterOps(r);
}

}  // namespace tlaloc::ops
