// The prepared kernels (prepared_ops.h): each works out at plan time what its op's evaluation
// works out per call, then runs the same copy or product.
#include "prepared_ops.h"

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cpu/reduction_matmul.h"
#include "ops/data_movement_boxes.h"
#include "ops/reduction_dot.h"
#include "tlaloc/ir/serial_eval_context.h"

namespace tlaloc::interp {

namespace {

using ops::BoxCopy;

const TensorType& OperandType(const Operation& op, int i) { return op.operand(i).type().tensor; }
const TensorType& ResultType(const Operation& op) { return op.result(0).type().tensor; }

// Every operand and the one result are tensors (not tokens or tuples).
bool AllTensors(const Operation& op) {
  if (op.num_results() != 1 || !op.result(0).type().is_tensor()) return false;
  for (int i = 0; i < op.num_operands(); ++i)
    if (!op.operand(i).type().is_tensor()) return false;
  return true;
}

PreparedFn OneCopy(BoxCopy copy) {
  return [copy = std::move(copy)](std::span<const Literal> operands, std::vector<Literal>& results,
                                  EvalContext& ctx) -> Status {
    ops::RunBoxCopy(copy, results[0].data(), 0, operands[0].data(), 0, &ctx);
    return OkStatus();
  };
}

PreparedFn PrepareBroadcast(const Operation& op) {
  std::optional<BoxCopy> copy = ops::BroadcastBox(op, OperandType(op, 0), ResultType(op));
  return [copy = std::move(copy)](std::span<const Literal> operands, std::vector<Literal>& results,
                                  EvalContext& ctx) -> Status {
    if (!copy) {
      results[0] = operands[0];  // same shape, same order: share the bytes
      return OkStatus();
    }
    ops::RunBoxCopy(*copy, results[0].data(), 0, operands[0].data(), 0, &ctx);
    return OkStatus();
  };
}

PreparedFn PrepareConcatenate(const Operation& op) {
  std::vector<const TensorType*> types;
  for (int i = 0; i < op.num_operands(); ++i) types.push_back(&OperandType(op, i));
  std::vector<BoxCopy> copies = ops::ConcatenateBoxes(op, types, ResultType(op));
  return [copies = std::move(copies)](std::span<const Literal> operands,
                                      std::vector<Literal>& results, EvalContext& ctx) -> Status {
    for (size_t i = 0; i < copies.size(); ++i)
      ops::RunBoxCopy(copies[i], results[0].data(), 0, operands[i].data(), 0, &ctx);
    return OkStatus();
  };
}

PreparedFn PrepareDynamicSlice(const Operation& op) {
  ops::DynamicBox box = ops::DynamicSliceBox(OperandType(op, 0), ResultType(op));
  return [box = std::move(box)](std::span<const Literal> operands, std::vector<Literal>& results,
                                EvalContext& ctx) -> Status {
    ops::RunBoxCopy(box.copy, results[0].data(), 0, operands[0].data(), box.Offset(operands, 1),
                    &ctx);
    return OkStatus();
  };
}

PreparedFn PrepareDynamicUpdateSlice(const Operation& op) {
  ops::DynamicBox box = ops::DynamicUpdateBox(OperandType(op, 0), OperandType(op, 1));
  BoxCopy whole = ops::WholeCopy(OperandType(op, 0));
  return [box = std::move(box), whole = std::move(whole)](std::span<const Literal> operands,
                                                          std::vector<Literal>& results,
                                                          EvalContext& ctx) -> Status {
    Literal& out = results[0];
    if (ctx.CanReuseOperand(0))
      out = operands[0];  // the operand dies here: write the update into its buffer
    else
      ops::RunBoxCopy(whole, out.data(), 0, operands[0].data(), 0, &ctx);
    ops::RunBoxCopy(box.copy, out.data(), box.Offset(operands, 2), operands[1].data(), 0, &ctx);
    return OkStatus();
  };
}

// ---- constant and iota ------------------------------------------------------------------------

// The result shares `value`'s bytes, which the kernel keeps: a later op never writes them in place
// (an operand still shared elsewhere is not reusable), as with a constant's attribute.
PreparedFn ShareValue(Literal value) {
  return [value = std::move(value)](std::span<const Literal>, std::vector<Literal>& results,
                                    EvalContext&) -> Status {
    results[0] = value;
    return OkStatus();
  };
}

PreparedFn PrepareConstant(const Operation& op) {
  const Attribute* value = FindAttr(op.attrs(), "value");
  if (!value || value->kind() != Attribute::Kind::kElements) return nullptr;
  return ShareValue(value->as_elements());
}

// An iota's values depend on its type and dimension only: evaluated once, by its own evaluation,
// and shared by every call (a decode step's iotas span the vocabulary, 151,936 ids each). Larger
// ones are left to run each call rather than held for the program's life.
constexpr int64_t kMaxSharedIotaBytes = int64_t{4} << 20;

PreparedFn PrepareIota(const Operation& op) {
  if (op.num_operands() != 0 || !op.def().eval) return nullptr;
  const TensorType& type = ResultType(op);
  if (type.byte_size() > kMaxSharedIotaBytes) return nullptr;
  std::vector<Literal> results{Literal(type)};
  SerialEvalContext ctx;  // defaults: an iota has no operand to reuse, and one call fills it all
  if (!op.def().eval(op, {}, results, ctx).ok()) return nullptr;
  return ShareValue(std::move(results[0]));
}

// ---- dot_general / dot ----------------------------------------------------------------------

// How an operand of the product is read in place as a batch of [rows, cols] matrices: its batch
// dimensions lead (in order), then its row dimensions and its column dimensions, or the reverse
// (a transposed matrix). The CPU kernel (cpu/dot_kernels.cc, ViewOrPack) reads such operands in
// place and packs the others; the prepared kernel takes only the in-place case.
std::optional<cpu::MatrixView> InPlaceView(const TensorType& x, const std::vector<int64_t>& batch,
                                           const std::vector<int64_t>& row_dims,
                                           const std::vector<int64_t>& col_dims, int64_t rows,
                                           int64_t cols) {
  if (x.element_type != ElementType::kF32 && x.element_type != ElementType::kBF16)
    return std::nullopt;
  for (size_t i = 0; i < batch.size(); ++i)
    if (batch[i] != static_cast<int64_t>(i)) return std::nullopt;
  std::vector<int64_t> straight = row_dims, transposed = col_dims;
  straight.insert(straight.end(), col_dims.begin(), col_dims.end());
  transposed.insert(transposed.end(), row_dims.begin(), row_dims.end());
  std::vector<int64_t> rest;
  for (int64_t dim = static_cast<int64_t>(batch.size()); dim < x.rank(); ++dim) rest.push_back(dim);
  cpu::MatrixView v;
  v.type = x.element_type;
  v.batch_stride = rows * cols;
  if (rest == straight) {
    v.row_stride = cols;
    v.col_stride = 1;
  } else if (rest == transposed) {
    v.row_stride = 1;
    v.col_stride = rows;
  } else {
    return std::nullopt;
  }
  return v;
}

// The f32-accumulated product of f32/bf16 operands read in place, as the CPU kernel runs it
// (ViewMatmul into the f32 result, or into an f32 buffer rounded once into a half result).
PreparedFn PrepareDot(const Operation& op) {
  if (op.num_operands() != 2) return nullptr;
  const Literal lhs = Literal::TypeOnly(OperandType(op, 0));
  const Literal rhs = Literal::TypeOnly(OperandType(op, 1));
  const ElementType result_type = ResultType(op).element_type;
  const std::vector<Literal> types{lhs, rhs};
  auto dims = ops::DotDimsOf(op, types);
  if (!dims.ok()) return nullptr;
  const ops::DotDims& d = *dims;
  const ops::DotShape s = ops::ShapeOfDot(d, lhs, rhs);
  if (ops::AccumulationOf(lhs, rhs, result_type) != ops::DotAcc::kF32) return nullptr;
  if (s.batch * s.m * s.n <= 0 || s.k <= 0) return nullptr;
  std::optional<cpu::MatrixView> a =
      InPlaceView(lhs.type(), d.lhs_batch, s.lhs_free, d.lhs_contracting, s.m, s.k);
  std::optional<cpu::MatrixView> b =
      InPlaceView(rhs.type(), d.rhs_batch, d.rhs_contracting, s.rhs_free, s.k, s.n);
  if (!a || !b) return nullptr;
  const bool f32_result = result_type == ElementType::kF32;
  return [a = *a, b = *b, batch = s.batch, m = s.m, k = s.k, n = s.n, f32_result](
             std::span<const Literal> operands, std::vector<Literal>& results,
             EvalContext& ctx) -> Status {
    cpu::MatrixView av = a, bv = b;
    av.data = operands[0].data();
    bv.data = operands[1].data();
    Literal& result = results[0];
    if (f32_result) {
      cpu::ViewMatmul(av, bv, batch, m, k, n, result.span<float>().data(), ctx);
      return OkStatus();
    }
    // A half result: accumulated in f32, rounded once (the buffer is reused from call to call).
    thread_local std::vector<float> c;
    c.resize(static_cast<size_t>(batch * m * n));
    cpu::ViewMatmul(av, bv, batch, m, k, n, c.data(), ctx);
    ops::StoreResult<float>(c, result);
    return OkStatus();
  };
}

}  // namespace

bool PreparedOpsDisabledByEnvironment() {
  const char* env = std::getenv("TLALOC_PREPARED_OPS");
  return env != nullptr && std::string(env) == "0";
}

PreparedFn PrepareOp(const Operation& op) {
  if (!AllTensors(op)) return nullptr;
  const std::string& name = op.name();
  if (name == "stablehlo.dot_general" || name == "stablehlo.dot") return PrepareDot(op);
  if (name == "stablehlo.slice")
    return OneCopy(ops::SliceBox(op, OperandType(op, 0), ResultType(op)));
  if (name == "stablehlo.transpose")
    return OneCopy(ops::TransposeBox(op, OperandType(op, 0), ResultType(op)));
  if (name == "stablehlo.broadcast_in_dim") return PrepareBroadcast(op);
  if (name == "stablehlo.concatenate") return PrepareConcatenate(op);
  if (name == "stablehlo.dynamic_slice") return PrepareDynamicSlice(op);
  if (name == "stablehlo.dynamic_update_slice") return PrepareDynamicUpdateSlice(op);
  if (name == "stablehlo.constant") return PrepareConstant(op);
  if (name == "stablehlo.iota") return PrepareIota(op);
  return nullptr;
}

}  // namespace tlaloc::interp
