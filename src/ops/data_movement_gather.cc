// gather and scatter with the full StableHLO dimension numbers (batching dimensions included).
// Both are printed in the generic form (`"stablehlo.scatter"(...) <{...}> ({...})`), as JAX
// emits them, so they have no pretty print/parse hooks.
//
// A gather is, per batch index, one box copy of the slice into the result. A scatter visits
// its update windows in order and combines each with the result through the update region;
// the common regions (return the update; add/multiply/max/min/or/and of the two arguments) are
// recognised and applied directly instead of running the region per element.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "data_movement_kernels.h"
#include "data_movement_vjp.h"
#include "op_areas.h"
#include "op_helpers.h"

namespace tlaloc::ops {

namespace {

using Dims = std::vector<int64_t>;

std::string Str(int64_t v) { return std::to_string(v); }

bool Contains(const Dims& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Checks that `v` holds distinct values in [0, bound), sorted when `sorted`.
Status CheckDims(const Dims& v, int64_t bound, const char* name, bool sorted) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= bound)
      return InvalidArgument(std::string("expected '") + name + "' entries in [0, " + Str(bound) +
                             "), got " + ListToString(v));
    for (size_t j = 0; j < i; ++j)
      if (v[j] == v[i] || (sorted && v[j] > v[i]))
        return InvalidArgument(std::string("expected '") + name + "' to be distinct" +
                               (sorted ? " and sorted" : "") + ", got " + ListToString(v));
  }
  return OkStatus();
}

// Where the index vector of batch position b starts in the indices tensor, and the stride
// between its entries. Batch positions index the indices' dimensions without index_vector_dim.
struct IndexLayout {
  Dims batch_shape;         // indices dims without index_vector_dim
  Dims batch_strides;       // indices strides of those dims
  int64_t vector_size = 1;  // entries of one index vector
  int64_t vector_stride = 0;
};

IndexLayout LayoutIndices(const Dims& dims, int64_t ivd) {
  IndexLayout l;
  Dims strides = RowMajorStrides(dims);
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    if (d == ivd) {
      l.vector_size = dims[d];
      l.vector_stride = strides[d];
    } else {
      l.batch_shape.push_back(dims[d]);
      l.batch_strides.push_back(strides[d]);
    }
  }
  return l;
}

// Multi-index of linear position `linear` in `shape` (row-major).
void Unravel(int64_t linear, const Dims& shape, Dims& idx) {
  idx.resize(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] ? linear % shape[d] : 0;
    linear = shape[d] ? linear / shape[d] : 0;
  }
}

// ---- gather ------------------------------------------------------------------------------------

struct GatherDims {
  Dims offset_dims, collapsed_slice_dims, operand_batching_dims, start_indices_batching_dims,
      start_index_map, slice_sizes;
  int64_t index_vector_dim = 0;
};

StatusOr<GatherDims> ReadGatherDims(const AttrDict& attrs) {
  const Attribute* a = FindAttr(attrs, "dimension_numbers");
  if (!a || a->kind() != Attribute::Kind::kStruct)
    return InvalidArgument("expected a 'dimension_numbers' #stablehlo.gather<...> attribute");
  GatherDims g;
  TL_ASSIGN_OR_RETURN(g.offset_dims, StructIntList(*a, "offset_dims"));
  TL_ASSIGN_OR_RETURN(g.collapsed_slice_dims, StructIntList(*a, "collapsed_slice_dims"));
  TL_ASSIGN_OR_RETURN(g.operand_batching_dims, StructIntList(*a, "operand_batching_dims"));
  TL_ASSIGN_OR_RETURN(g.start_indices_batching_dims,
                      StructIntList(*a, "start_indices_batching_dims"));
  TL_ASSIGN_OR_RETURN(g.start_index_map, StructIntList(*a, "start_index_map"));
  TL_ASSIGN_OR_RETURN(g.index_vector_dim, StructInt(*a, "index_vector_dim", 0));
  g.slice_sizes = GetIntArrayAttr(attrs, "slice_sizes");
  return g;
}

StatusOr<std::vector<Type>> InferGather(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectOperandCount(in, 2));
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  const TensorType& operand = in.operand_types[0].tensor;
  const TensorType& indices = in.operand_types[1].tensor;
  if (!IsInteger(indices.element_type))
    return InvalidArgument("expected integer start indices, got " + indices.ToString());
  TL_ASSIGN_OR_RETURN(GatherDims g, ReadGatherDims(in.attrs));
  const int64_t rank = operand.rank();
  if (static_cast<int64_t>(g.slice_sizes.size()) != rank)
    return InvalidArgument("expected " + Str(rank) + " slice_sizes, got " +
                           ListToString(g.slice_sizes));
  if (g.index_vector_dim < 0 || g.index_vector_dim > indices.rank())
    return InvalidArgument("expected index_vector_dim in [0, " + Str(indices.rank()) + "], got " +
                           Str(g.index_vector_dim));
  TL_RETURN_IF_ERROR(CheckDims(g.collapsed_slice_dims, rank, "collapsed_slice_dims", true));
  TL_RETURN_IF_ERROR(CheckDims(g.operand_batching_dims, rank, "operand_batching_dims", true));
  TL_RETURN_IF_ERROR(CheckDims(g.start_index_map, rank, "start_index_map", false));
  TL_RETURN_IF_ERROR(CheckDims(g.start_indices_batching_dims, indices.rank(),
                               "start_indices_batching_dims", false));
  if (g.operand_batching_dims.size() != g.start_indices_batching_dims.size())
    return InvalidArgument("operand_batching_dims and start_indices_batching_dims differ in size");
  IndexLayout layout = LayoutIndices(indices.dims, g.index_vector_dim);
  if (layout.vector_size != static_cast<int64_t>(g.start_index_map.size()))
    return InvalidArgument("expected index vectors of " +
                           Str(static_cast<int64_t>(g.start_index_map.size())) +
                           " entries (start_index_map), got " + Str(layout.vector_size));
  Dims offset_sizes;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t s = g.slice_sizes[d];
    if (s < 0 || s > operand.dims[d])
      return InvalidArgument("slice_sizes " + ListToString(g.slice_sizes) + " exceed operand " +
                             operand.ToString());
    bool collapsed = Contains(g.collapsed_slice_dims, d);
    bool batching = Contains(g.operand_batching_dims, d);
    if (collapsed && batching)
      return InvalidArgument("dimension " + Str(d) + " is both collapsed and batching");
    if ((collapsed || batching) && s > 1)
      return InvalidArgument("collapsed or batching dimension " + Str(d) +
                             " must have slice size <= 1, got " + Str(s));
    if (!collapsed && !batching) offset_sizes.push_back(s);
  }
  for (size_t i = 0; i < g.operand_batching_dims.size(); ++i) {
    int64_t od = g.operand_batching_dims[i], id = g.start_indices_batching_dims[i];
    if (id == g.index_vector_dim || operand.dims[od] != indices.dims[id])
      return InvalidArgument("batching dimension pair " + Str(od) + "/" + Str(id) +
                             " has mismatched sizes or names index_vector_dim");
  }
  const int64_t result_rank = static_cast<int64_t>(layout.batch_shape.size() + offset_sizes.size());
  if (g.offset_dims.size() != offset_sizes.size())
    return InvalidArgument("expected " + Str(static_cast<int64_t>(offset_sizes.size())) +
                           " offset_dims, got " + ListToString(g.offset_dims));
  TL_RETURN_IF_ERROR(CheckDims(g.offset_dims, result_rank, "offset_dims", true));
  TensorType result(operand.element_type, {});
  size_t next_batch = 0, next_offset = 0;
  for (int64_t r = 0; r < result_rank; ++r)
    result.dims.push_back(Contains(g.offset_dims, r) ? offset_sizes[next_offset++]
                                                     : layout.batch_shape[next_batch++]);
  if (in.declared_results && in.declared_results->size() == 1 &&
      !((*in.declared_results)[0] == Type(result)))
    return InvalidArgument("expected result type " + result.ToString() + ", got " +
                           (*in.declared_results)[0].ToString());
  return std::vector<Type>{Type(result)};
}

Status EvalGather(const Operation& op, std::span<const Literal> operands,
                  std::vector<Literal>& results, EvalContext& ctx) {
  TL_ASSIGN_OR_RETURN(GatherDims g, ReadGatherDims(op.attrs()));
  const Literal& operand = operands[0];
  const Literal& indices = operands[1];
  Literal& out = results[0];
  const int esize = ElementSize(operand.element_type());
  const Dims& odims = operand.dims();
  const Dims ostrides = RowMajorStrides(odims);
  const Dims rstrides = RowMajorStrides(out.dims());
  IndexLayout layout = LayoutIndices(indices.dims(), g.index_vector_dim);

  // The slice box: operand dims that are neither collapsed nor batching, in order.
  Dims box;
  StridedView src_box{0, {}}, dst_box{0, {}};
  for (int64_t d = 0, k = 0; d < static_cast<int64_t>(odims.size()); ++d) {
    if (Contains(g.collapsed_slice_dims, d) || Contains(g.operand_batching_dims, d)) continue;
    box.push_back(g.slice_sizes[d]);
    src_box.strides.push_back(ostrides[d]);
    dst_box.strides.push_back(rstrides[g.offset_dims[k++]]);
  }
  Dims batch_result_strides;  // result strides of the batch dims, in order
  for (int64_t r = 0; r < out.type().rank(); ++r)
    if (!Contains(g.offset_dims, r)) batch_result_strides.push_back(rstrides[r]);
  // Batch position of each start_indices_batching_dims entry.
  Dims batch_pos;
  for (int64_t id : g.start_indices_batching_dims)
    batch_pos.push_back(id < g.index_vector_dim ? id : id - 1);

  const int64_t batches = NumElements(layout.batch_shape);
  const int64_t window = std::max<int64_t>(1, NumElements(box));
  auto run = [&](int64_t begin, int64_t end) {
    Dims b;
    StridedView src = src_box, dst = dst_box;
    for (int64_t i = begin; i < end; ++i) {
      Unravel(i, layout.batch_shape, b);
      int64_t ipos = 0;
      dst.offset = 0;
      for (size_t j = 0; j < b.size(); ++j) {
        ipos += b[j] * layout.batch_strides[j];
        dst.offset += b[j] * batch_result_strides[j];
      }
      src.offset = 0;
      for (size_t k = 0; k < g.start_index_map.size(); ++k) {
        int64_t d = g.start_index_map[k];
        int64_t start = indices.GetAsInt64(ipos + static_cast<int64_t>(k) * layout.vector_stride);
        src.offset += std::clamp<int64_t>(start, 0, odims[d] - g.slice_sizes[d]) * ostrides[d];
      }
      for (size_t k = 0; k < batch_pos.size(); ++k)
        src.offset += b[batch_pos[k]] * ostrides[g.operand_batching_dims[k]];
      CopyBox(out.data(), dst, operand.data(), src, box, esize, nullptr);
    }
  };
  ctx.ParallelFor(batches, std::max<int64_t>(1, 16384 / window), run);
  return OkStatus();
}

// ---- scatter -----------------------------------------------------------------------------------

struct ScatterDims {
  Dims update_window_dims, inserted_window_dims, input_batching_dims, scatter_indices_batching_dims,
      scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
};

StatusOr<ScatterDims> ReadScatterDims(const AttrDict& attrs) {
  const Attribute* a = FindAttr(attrs, "scatter_dimension_numbers");
  if (!a || a->kind() != Attribute::Kind::kStruct)
    return InvalidArgument(
        "expected a 'scatter_dimension_numbers' #stablehlo.scatter<...> attribute");
  ScatterDims s;
  TL_ASSIGN_OR_RETURN(s.update_window_dims, StructIntList(*a, "update_window_dims"));
  TL_ASSIGN_OR_RETURN(s.inserted_window_dims, StructIntList(*a, "inserted_window_dims"));
  TL_ASSIGN_OR_RETURN(s.input_batching_dims, StructIntList(*a, "input_batching_dims"));
  TL_ASSIGN_OR_RETURN(s.scatter_indices_batching_dims,
                      StructIntList(*a, "scatter_indices_batching_dims"));
  TL_ASSIGN_OR_RETURN(s.scatter_dims_to_operand_dims,
                      StructIntList(*a, "scatter_dims_to_operand_dims"));
  TL_ASSIGN_OR_RETURN(s.index_vector_dim, StructInt(*a, "index_vector_dim", 0));
  return s;
}

StatusOr<std::vector<Type>> InferScatter(const InferInput& in) {
  const size_t n_ops = in.operand_types.size();
  if (n_ops < 3 || n_ops % 2 == 0)
    return InvalidArgument("expected N inputs, the scatter indices and N updates, got " +
                           Str(static_cast<int64_t>(n_ops)) + " operands");
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  const size_t n = (n_ops - 1) / 2;
  const TensorType& input = in.operand_types[0].tensor;
  const TensorType& indices = in.operand_types[n].tensor;
  const TensorType& update = in.operand_types[n + 1].tensor;
  for (size_t i = 0; i < n; ++i) {
    if (in.operand_types[i].tensor.dims != input.dims)
      return InvalidArgument("all inputs must have the shape of " + input.ToString() + ", got " +
                             in.operand_types[i].ToString());
    const TensorType& u = in.operand_types[n + 1 + i].tensor;
    if (u.dims != update.dims || u.element_type != in.operand_types[i].tensor.element_type)
      return InvalidArgument("update " + Str(static_cast<int64_t>(i)) + " " + u.ToString() +
                             " must have the shape of " + update.ToString() +
                             " and the element type of input " + Str(static_cast<int64_t>(i)));
  }
  if (!IsInteger(indices.element_type))
    return InvalidArgument("expected integer scatter indices, got " + indices.ToString());
  TL_ASSIGN_OR_RETURN(ScatterDims s, ReadScatterDims(in.attrs));
  const int64_t rank = input.rank();
  if (s.index_vector_dim < 0 || s.index_vector_dim > indices.rank())
    return InvalidArgument("expected index_vector_dim in [0, " + Str(indices.rank()) + "], got " +
                           Str(s.index_vector_dim));
  TL_RETURN_IF_ERROR(CheckDims(s.update_window_dims, update.rank(), "update_window_dims", true));
  TL_RETURN_IF_ERROR(CheckDims(s.inserted_window_dims, rank, "inserted_window_dims", true));
  TL_RETURN_IF_ERROR(CheckDims(s.input_batching_dims, rank, "input_batching_dims", true));
  TL_RETURN_IF_ERROR(
      CheckDims(s.scatter_dims_to_operand_dims, rank, "scatter_dims_to_operand_dims", false));
  TL_RETURN_IF_ERROR(CheckDims(s.scatter_indices_batching_dims, indices.rank(),
                               "scatter_indices_batching_dims", false));
  if (s.input_batching_dims.size() != s.scatter_indices_batching_dims.size())
    return InvalidArgument("input_batching_dims and scatter_indices_batching_dims differ in size");
  IndexLayout layout = LayoutIndices(indices.dims, s.index_vector_dim);
  if (layout.vector_size != static_cast<int64_t>(s.scatter_dims_to_operand_dims.size()))
    return InvalidArgument("expected index vectors of " +
                           Str(static_cast<int64_t>(s.scatter_dims_to_operand_dims.size())) +
                           " entries (scatter_dims_to_operand_dims), got " +
                           Str(layout.vector_size));
  if (static_cast<int64_t>(s.update_window_dims.size() + s.inserted_window_dims.size() +
                           s.input_batching_dims.size()) != rank)
    return InvalidArgument(
        "update_window_dims, inserted_window_dims and input_batching_dims "
        "must together cover the " +
        Str(rank) + " input dimensions");
  // Update scatter dims must match the indices' batch shape; window dims must fit the input.
  Dims scatter_shape;
  for (int64_t d = 0; d < update.rank(); ++d)
    if (!Contains(s.update_window_dims, d)) scatter_shape.push_back(update.dims[d]);
  if (scatter_shape != layout.batch_shape)
    return InvalidArgument("update scatter dimensions " + ListToString(scatter_shape) +
                           " do not match the scatter indices' batch shape " +
                           ListToString(layout.batch_shape));
  for (int64_t d = 0, k = 0; d < rank; ++d) {
    bool inserted = Contains(s.inserted_window_dims, d);
    bool batching = Contains(s.input_batching_dims, d);
    if (inserted && batching)
      return InvalidArgument("dimension " + Str(d) + " is both inserted and batching");
    if (inserted || batching) continue;
    int64_t w = update.dims[s.update_window_dims[k++]];
    if (w > input.dims[d])
      return InvalidArgument("update window size " + Str(w) + " exceeds input dimension " + Str(d) +
                             " of " + input.ToString());
  }
  if (!in.regions.empty() && !in.regions[0]->empty()) {
    const Block& body = in.regions[0]->front();
    if (body.num_arguments() != static_cast<int>(2 * n))
      return InvalidArgument("expected the update computation to take " +
                             Str(static_cast<int64_t>(2 * n)) + " arguments, got " +
                             Str(body.num_arguments()));
  }
  std::vector<Type> results(in.operand_types.begin(), in.operand_types.begin() + n);
  if (in.declared_results && *in.declared_results != results)
    return InvalidArgument("expected the result types to be the input types");
  return results;
}

// How the update computation combines the current value with the update.
enum class Combiner { kGeneral, kReplace, kAdd, kMultiply, kMax, kMin, kOr, kAnd };

// Recognises update computations that are a single known op of the two arguments, or that just
// return the updates; anything else runs through the region per element.
Combiner ClassifyRegion(const Region& region, size_t n, ElementType et) {
  if (region.empty()) return Combiner::kGeneral;
  const Block& body = region.front();
  const auto& ops = body.operations();
  if (ops.empty() || body.num_arguments() != static_cast<int>(2 * n)) return Combiner::kGeneral;
  const Operation& ret = *ops.back();
  if (ret.num_operands() != static_cast<int>(n)) return Combiner::kGeneral;
  if (ops.size() == 1) {
    for (size_t i = 0; i < n; ++i)
      if (!(ret.operand(static_cast<int>(i)) == body.argument(static_cast<int>(n + i))))
        return Combiner::kGeneral;
    return Combiner::kReplace;
  }
  if (n != 1 || ops.size() != 2) return Combiner::kGeneral;
  const Operation& f = *ops[0];
  if (f.num_operands() != 2 || f.num_results() != 1 || !(ret.operand(0) == f.result(0)))
    return Combiner::kGeneral;
  Value a = body.argument(0), b = body.argument(1);
  bool args = (f.operand(0) == a && f.operand(1) == b) || (f.operand(0) == b && f.operand(1) == a);
  if (!args || !(f.result(0).type() == a.type())) return Combiner::kGeneral;
  const std::string& name = f.name();
  if (name == "stablehlo.add") return Combiner::kAdd;
  if (name == "stablehlo.multiply") return Combiner::kMultiply;
  if (name == "stablehlo.maximum") return Combiner::kMax;
  if (name == "stablehlo.minimum") return Combiner::kMin;
  if (IsFloat(et)) return Combiner::kGeneral;  // or/and are integer-only
  if (name == "stablehlo.or") return Combiner::kOr;
  if (name == "stablehlo.and") return Combiner::kAnd;
  return Combiner::kGeneral;
}

template <typename T>
T Combine(Combiner c, T x, T y) {
  if constexpr (std::is_same_v<T, bool>) {
    // pred arithmetic: add/or/max are logical or, multiply/and/min logical and.
    bool any = c == Combiner::kAdd || c == Combiner::kOr || c == Combiner::kMax;
    return any ? (x || y) : (x && y);
  } else if constexpr (kIsFloatLike<T>) {
    using F = std::conditional_t<kIsHalfLike<T>, float, T>;
    F a = static_cast<F>(x), b = static_cast<F>(y), r{};
    switch (c) {
      case Combiner::kAdd:
        r = a + b;
        break;
      case Combiner::kMultiply:
        r = a * b;
        break;
      // NaN propagates; max(-0, +0) = +0 and min(-0, +0) = -0, as stablehlo.maximum/minimum.
      case Combiner::kMax:
        r = std::isnan(a)   ? a
            : std::isnan(b) ? b
            : a == b        ? (std::signbit(a) ? b : a)
            : a > b         ? a
                            : b;
        break;
      case Combiner::kMin:
        r = std::isnan(a)   ? a
            : std::isnan(b) ? b
            : a == b        ? (std::signbit(a) ? a : b)
            : a < b         ? a
                            : b;
        break;
      default:
        r = b;
        break;
    }
    // float -> half rounds once to nearest even; exact for a single + or * of halves.
    if constexpr (kIsHalfLike<T>)
      return T(r);
    else
      return r;
  } else {
    // Integer ops wrap: compute in the unsigned 64-bit type and truncate.
    using U = std::make_unsigned_t<T>;
    uint64_t a = static_cast<U>(x), b = static_cast<U>(y);
    switch (c) {
      case Combiner::kAdd:
        return static_cast<T>(static_cast<U>(a + b));
      case Combiner::kMultiply:
        return static_cast<T>(static_cast<U>(a * b));
      case Combiner::kMax:
        return x > y ? x : y;
      case Combiner::kMin:
        return x < y ? x : y;
      case Combiner::kOr:
        return static_cast<T>(static_cast<U>(a | b));
      case Combiner::kAnd:
        return static_cast<T>(static_cast<U>(a & b));
      default:
        return y;
    }
  }
}

// Runs the update computation on one element of each result/update pair.
Status CombineGeneral(const Region& region, std::vector<Literal>& results,
                      std::span<const Literal> updates, int64_t ri, int64_t ui, EvalContext& ctx) {
  const size_t n = results.size();
  std::vector<Literal> args;
  args.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    Literal a(TensorType(results[i].element_type(), {}));
    int esize = ElementSize(a.element_type());
    std::memcpy(a.data(), results[i].data() + ri * esize, esize);
    args.push_back(std::move(a));
  }
  for (size_t i = 0; i < n; ++i) {
    Literal b(TensorType(updates[i].element_type(), {}));
    int esize = ElementSize(b.element_type());
    std::memcpy(b.data(), updates[i].data() + ui * esize, esize);
    args.push_back(std::move(b));
  }
  TL_ASSIGN_OR_RETURN(std::vector<Literal> out, ctx.RunRegion(region, std::move(args)));
  if (out.size() != n)
    return InvalidArgument("the update computation returned " +
                           Str(static_cast<int64_t>(out.size())) + " values, expected " +
                           Str(static_cast<int64_t>(n)));
  for (size_t i = 0; i < n; ++i) {
    if (!(out[i].type() == TensorType(results[i].element_type(), {})))
      return InvalidArgument("the update computation returned " + out[i].type().ToString() +
                             " for result " + Str(static_cast<int64_t>(i)));
    int esize = ElementSize(results[i].element_type());
    std::memcpy(results[i].data() + ri * esize, out[i].data(), esize);
  }
  return OkStatus();
}

Status EvalScatter(const Operation& op, std::span<const Literal> operands,
                   std::vector<Literal>& results, EvalContext& ctx) {
  TL_ASSIGN_OR_RETURN(ScatterDims s, ReadScatterDims(op.attrs()));
  const size_t n = (operands.size() - 1) / 2;
  const Literal& indices = operands[n];
  std::span<const Literal> updates = operands.subspan(n + 1, n);
  for (size_t i = 0; i < n; ++i) {
    if (ctx.CanReuseOperand(static_cast<int>(i))) {
      results[i] = operands[i];  // the input dies here: scatter into its buffer
    } else {
      std::memcpy(results[i].data(), operands[i].data(),
                  static_cast<size_t>(operands[i].byte_size()));
    }
  }
  const Dims& rdims = results[0].dims();
  const Dims rstrides = RowMajorStrides(rdims);
  const Dims& udims = updates[0].dims();
  const Dims ustrides = RowMajorStrides(udims);
  const int64_t rank = static_cast<int64_t>(rdims.size());
  IndexLayout layout = LayoutIndices(indices.dims(), s.index_vector_dim);

  // The update window box, its strides in the updates and in the result, and its extent in
  // each result dimension (1 for inserted and batching dims).
  Dims box, window_extent(rank, 1);
  StridedView src_box{0, {}}, dst_box{0, {}};
  for (int64_t d = 0, k = 0; d < rank; ++d) {
    if (Contains(s.inserted_window_dims, d) || Contains(s.input_batching_dims, d)) continue;
    int64_t ud = s.update_window_dims[k++];
    box.push_back(udims[ud]);
    window_extent[d] = udims[ud];
    src_box.strides.push_back(ustrides[ud]);
    dst_box.strides.push_back(rstrides[d]);
  }
  Dims scatter_update_strides;  // updates strides of the update scatter dims, in order
  for (int64_t d = 0; d < static_cast<int64_t>(udims.size()); ++d)
    if (!Contains(s.update_window_dims, d)) scatter_update_strides.push_back(ustrides[d]);
  Dims batch_pos;
  for (int64_t id : s.scatter_indices_batching_dims)
    batch_pos.push_back(id < s.index_vector_dim ? id : id - 1);

  const Combiner combiner = op.num_regions()
                                ? ClassifyRegion(op.region(0), n, results[0].element_type())
                                : Combiner::kReplace;
  const int64_t batches = NumElements(layout.batch_shape);
  if (NumElements(box) == 0) return OkStatus();
  const bool add_rows_f32 = combiner == Combiner::kAdd && n == 1 &&
                            results[0].element_type() == ElementType::kF32 &&
                            updates[0].element_type() == ElementType::kF32 && box.size() == 1 &&
                            src_box.strides[0] == 1 && dst_box.strides[0] == 1;
  Dims b, full(rank);
  StridedView src = src_box, dst = dst_box;
  for (int64_t u = 0; u < batches; ++u) {
    Unravel(u, layout.batch_shape, b);
    int64_t ipos = 0;
    src.offset = 0;
    for (size_t j = 0; j < b.size(); ++j) {
      ipos += b[j] * layout.batch_strides[j];
      src.offset += b[j] * scatter_update_strides[j];
    }
    std::fill(full.begin(), full.end(), 0);
    for (size_t k = 0; k < s.scatter_dims_to_operand_dims.size(); ++k)
      full[s.scatter_dims_to_operand_dims[k]] +=
          indices.GetAsInt64(ipos + static_cast<int64_t>(k) * layout.vector_stride);
    for (size_t k = 0; k < batch_pos.size(); ++k) full[s.input_batching_dims[k]] += b[batch_pos[k]];
    // A window that does not fit entirely inside the result is skipped (as XLA does).
    bool in_bounds = true;
    dst.offset = 0;
    for (int64_t d = 0; d < rank; ++d) {
      in_bounds = in_bounds && full[d] >= 0 && full[d] <= rdims[d] - window_extent[d];
      dst.offset += full[d] * rstrides[d];
    }
    if (!in_bounds) continue;
    if (combiner == Combiner::kReplace) {
      for (size_t i = 0; i < n; ++i)
        CopyBox(results[i].data(), dst, updates[i].data(), src, box,
                ElementSize(results[i].element_type()), &ctx);
    } else if (combiner == Combiner::kGeneral) {
      Status st;
      ForEachBoxRow(box, dst, src, 0, BoxRows(box), [&](int64_t ri, int64_t ui) {
        if (st.ok()) st = CombineGeneral(op.region(0), results, updates, ri, ui, ctx);
      });
      TL_RETURN_IF_ERROR(st);
    } else if (add_rows_f32) {
      // One contiguous f32 row per window (the MoE combine's scatter-add of [pairs, hidden]):
      // the same float additions in the same order, without the per-element combiner switch.
      float* out = results[0].span<float>().data() + dst.offset;
      const float* upd = updates[0].span<float>().data() + src.offset;
      for (int64_t e = 0; e < box[0]; ++e) out[e] += upd[e];
    } else {
      DispatchElementType(results[0].element_type(), [&]<typename T>() {
        T* out = reinterpret_cast<T*>(results[0].data());
        const T* upd = reinterpret_cast<const T*>(updates[0].data());
        ForEachBoxRow(box, dst, src, 0, BoxRows(box), [&](int64_t ri, int64_t ui) {
          out[ri] = Combine<T>(combiner, out[ri], upd[ui]);
        });
      });
    }
  }
  return OkStatus();
}

}  // namespace

std::string ScatterCombinerName(const Operation& scatter) {
  const size_t n = static_cast<size_t>(scatter.num_results());
  if (scatter.num_regions() != 1 || n == 0) return "";
  switch (ClassifyRegion(scatter.region(0), n, scatter.result(0).tensor_type().element_type)) {
    case Combiner::kReplace:
      return "replace";
    case Combiner::kAdd:
      return "add";
    case Combiner::kMultiply:
      return "multiply";
    case Combiner::kMax:
      return "maximum";
    case Combiner::kMin:
      return "minimum";
    case Combiner::kOr:
      return "or";
    case Combiner::kAnd:
      return "and";
    default:
      return "";
  }
}

void RegisterGatherScatterOps(OpRegistry& r) {
  OpDef g;
  g.name = "stablehlo.gather";
  g.traits.writes_all_results = true;  // one window per batch index
  g.infer = InferGather;
  g.eval = EvalGather;
  g.vjp = GatherVjp;
  r.Register(std::move(g));

  OpDef s;
  s.name = "stablehlo.scatter";
  s.traits.writes_all_results = true;  // the inputs copied (or reused) first
  s.traits.in_place = OpTraits::InPlace::kSameIndex;
  s.num_regions = 1;
  s.infer = InferScatter;
  s.eval = EvalScatter;
  s.vjp = ScatterVjp;
  r.Register(std::move(s));
}

}  // namespace tlaloc::ops
