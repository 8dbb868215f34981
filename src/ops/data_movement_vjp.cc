#include "data_movement_vjp.h"

#include <algorithm>

#include "data_movement_kernels.h"
#include "op_helpers.h"
#include "tlaloc/ir/typed_builder.h"

namespace tlaloc::ops {

namespace {

using Dims = std::vector<int64_t>;
using Values = std::vector<Value>;

using hlo::SumOver;

Dims AllDims(int64_t rank) {
  Dims d(rank);
  for (int64_t i = 0; i < rank; ++i) d[i] = i;
  return d;
}

StatusOr<Values> Done(OpBuilder& b, Values v) {
  if (!b.ok()) return b.status();
  return v;
}

}  // namespace

StatusOr<Values> BroadcastInDimVjp(OpBuilder& b, const Operation& op, const Values& x,
                                   const Values&, const Values& ct) {
  const TensorType& in = x[0].tensor_type();
  const TensorType& out = op.result(0).tensor_type();
  Dims bdims = IntList(op, "broadcast_dimensions");
  // Sum over the new dims and the size-1 dims that were stretched.
  Dims summed;
  for (int64_t r = 0; r < out.rank(); ++r) {
    auto it = std::find(bdims.begin(), bdims.end(), r);
    if (it == bdims.end() || (in.dims[it - bdims.begin()] == 1 && out.dims[r] != 1))
      summed.push_back(r);
  }
  Value z = SumOver(b, ct[0], summed);
  // The kept result dims, in increasing order; put them in operand order, then reshape in the
  // summed size-1 dims.
  Dims kept;
  for (int64_t r = 0; r < out.rank(); ++r)
    if (std::find(summed.begin(), summed.end(), r) == summed.end()) kept.push_back(r);
  Dims perm;
  for (int64_t r : bdims) {
    auto it = std::find(kept.begin(), kept.end(), r);
    if (it != kept.end()) perm.push_back(it - kept.begin());
  }
  if (perm != AllDims(static_cast<int64_t>(perm.size()))) z = hlo::Transpose(b, z, perm);
  return Done(b, {hlo::Reshape(b, z, in)});
}

StatusOr<Values> ReshapeVjp(OpBuilder& b, const Operation&, const Values& x, const Values&,
                            const Values& ct) {
  return Done(b, {hlo::Reshape(b, ct[0], x[0].tensor_type())});
}

StatusOr<Values> TransposeVjp(OpBuilder& b, const Operation& op, const Values&, const Values&,
                              const Values& ct) {
  Dims perm = IntList(op, "permutation"), inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return Done(b, {hlo::Transpose(b, ct[0], inverse)});
}

StatusOr<Values> ReverseVjp(OpBuilder& b, const Operation& op, const Values&, const Values&,
                            const Values& ct) {
  return Done(b, {hlo::Reverse(b, ct[0], IntList(op, "dimensions"))});
}

StatusOr<Values> SliceVjp(OpBuilder& b, const Operation& op, const Values& x, const Values&,
                          const Values& ct) {
  const TensorType& in = x[0].tensor_type();
  const TensorType& out = op.result(0).tensor_type();
  Dims start = IntList(op, "start_indices"), strides = IntList(op, "strides");
  if (strides.empty()) strides.assign(in.rank(), 1);
  // Pad the cotangent back to the operand's shape: the taken elements sit `stride` apart.
  Dims low = start, high(in.rank()), interior(in.rank());
  for (int64_t d = 0; d < in.rank(); ++d) {
    int64_t span = out.dims[d] > 0 ? (out.dims[d] - 1) * strides[d] + 1 : 0;
    high[d] = in.dims[d] - start[d] - span;
    interior[d] = out.dims[d] > 0 ? strides[d] - 1 : 0;
  }
  return Done(
      b, {hlo::Pad(b, ct[0], hlo::Zeros(b, TensorType(in.element_type, {})), low, high, interior)});
}

StatusOr<Values> ConcatenateVjp(OpBuilder& b, const Operation& op, const Values& x, const Values&,
                                const Values& ct) {
  const int64_t dim = GetIntAttr(op.attrs(), "dimension", 0);
  const TensorType& out = op.result(0).tensor_type();
  Values grads;
  int64_t offset = 0;
  for (const Value& v : x) {
    Dims start(out.rank(), 0), limit = out.dims;
    start[dim] = offset;
    offset += v.tensor_type().dims[dim];
    limit[dim] = offset;
    grads.push_back(hlo::Slice(b, ct[0], start, limit, Dims(out.rank(), 1)));
  }
  return Done(b, grads);
}

StatusOr<Values> PadVjp(OpBuilder& b, const Operation& op, const Values& x, const Values&,
                        const Values& ct) {
  const TensorType& in = x[0].tensor_type();
  Dims low = IntList(op, "edge_padding_low"), high = IntList(op, "edge_padding_high");
  Dims interior = IntList(op, "interior_padding");
  const int64_t rank = in.rank();
  // Undo cropping first (negative edges): pad the cotangent with zeros there, so every operand
  // element has a position; then take every (interior + 1)-th element from the low edge.
  Dims undo_low(rank), undo_high(rank), start(rank), limit(rank), strides(rank);
  bool cropped = false;
  for (int64_t d = 0; d < rank; ++d) {
    undo_low[d] = std::max<int64_t>(-low[d], 0);
    undo_high[d] = std::max<int64_t>(-high[d], 0);
    cropped = cropped || undo_low[d] > 0 || undo_high[d] > 0;
    start[d] = std::max<int64_t>(low[d], 0);
    int64_t n = in.dims[d];
    limit[d] = start[d] + (n > 0 ? (n - 1) * (interior[d] + 1) + 1 : 0);
    strides[d] = interior[d] + 1;
  }
  Value full = ct[0];
  if (cropped)
    full = hlo::Pad(b, ct[0], hlo::Zeros(b, TensorType(in.element_type, {})), undo_low, undo_high,
                    Dims(rank, 0));
  Value g = hlo::Slice(b, full, start, limit, strides);
  // The padding value received everything that did not come from the operand.
  Value total = SumOver(b, ct[0], AllDims(rank));
  Value from_operand = SumOver(b, g, AllDims(rank));
  Value gp = hlo::Sub(b, total, from_operand);
  return Done(b, {g, gp});
}

StatusOr<Values> DynamicSliceVjp(OpBuilder& b, const Operation&, const Values& x, const Values&,
                                 const Values& ct) {
  // The update is clamped exactly as the slice was, so the cotangent lands where it came from.
  Values grads(x.size());
  grads[0] =
      hlo::DynamicUpdateSlice(b, hlo::ZerosLike(b, x[0]), ct[0], Values(x.begin() + 1, x.end()));
  return Done(b, grads);
}

StatusOr<Values> DynamicUpdateSliceVjp(OpBuilder& b, const Operation&, const Values& x,
                                       const Values&, const Values& ct) {
  const TensorType& upd = x[1].tensor_type();
  Values indices(x.begin() + 2, x.end());
  Values grads(x.size());
  grads[0] = hlo::DynamicUpdateSlice(b, ct[0], hlo::Zeros(b, upd), indices);
  grads[1] = hlo::DynamicSlice(b, ct[0], indices, upd.dims);
  return Done(b, grads);
}

StatusOr<Values> GatherVjp(OpBuilder& b, const Operation& op, const Values& x, const Values&,
                           const Values& ct) {
  const Attribute& dn = op.attrs().at("dimension_numbers");
  // The scatter that returns each window's cotangent mirrors the gather's dimension numbers.
  hlo::ScatterDimensionNumbers sd;
  TL_ASSIGN_OR_RETURN(sd.update_window_dims, StructIntList(dn, "offset_dims"));
  TL_ASSIGN_OR_RETURN(sd.inserted_window_dims, StructIntList(dn, "collapsed_slice_dims"));
  TL_ASSIGN_OR_RETURN(sd.input_batching_dims, StructIntList(dn, "operand_batching_dims"));
  TL_ASSIGN_OR_RETURN(sd.scatter_indices_batching_dims,
                      StructIntList(dn, "start_indices_batching_dims"));
  TL_ASSIGN_OR_RETURN(sd.scatter_dims_to_operand_dims, StructIntList(dn, "start_index_map"));
  TL_ASSIGN_OR_RETURN(sd.index_vector_dim, StructInt(dn, "index_vector_dim", 0));
  const Dims& start_index_map = sd.scatter_dims_to_operand_dims;
  const int64_t ivd = sd.index_vector_dim;
  Dims slice_sizes = IntList(op, "slice_sizes");
  const TensorType& operand = x[0].tensor_type();
  const TensorType& idx_type = x[1].tensor_type();
  // gather clamps its starts while scatter skips windows that do not fit: clamp the indices
  // first so each cotangent window goes back to the slice it came from.
  Literal lo(idx_type), hi(idx_type);
  Dims istrides = RowMajorStrides(idx_type.dims);
  for (int64_t i = 0; i < hi.num_elements(); ++i) {
    int64_t k = ivd < idx_type.rank() ? (i / istrides[ivd]) % idx_type.dims[ivd] : 0;
    int64_t d = start_index_map[k];
    hi.SetFromDouble(i, static_cast<double>(operand.dims[d] - slice_sizes[d]));
  }
  Value lo_v = hlo::Constant(b, std::move(lo));
  Value hi_v = hlo::Constant(b, std::move(hi));
  Value clamped = hlo::Min(b, hlo::Max(b, x[1], lo_v), hi_v);
  Values grads(2);
  grads[0] = hlo::Scatter(b, hlo::Zeros(b, operand), clamped, ct[0], sd,
                          hlo::ScalarBinaryRegion(operand.element_type, hlo::Add));
  return Done(b, grads);
}

StatusOr<Values> ScatterVjp(OpBuilder& b, const Operation& op, const Values& x, const Values&,
                            const Values& ct) {
  const std::string kind = ScatterCombinerName(op);
  const bool unique = GetBoolAttr(op.attrs(), "unique_indices", false);
  if (x.size() != 3 || !(kind == "add" || (kind == "replace" && unique)))
    return Unimplemented(
        "the scatter VJP supports one input with an add update computation, "
        "or a plain replacement with unique_indices = true; got " +
        (kind.empty() ? std::string("another computation") : kind));
  const Attribute& dn = op.attrs().at("scatter_dimension_numbers");
  hlo::ScatterDimensionNumbers sd;
  TL_ASSIGN_OR_RETURN(sd.update_window_dims, StructIntList(dn, "update_window_dims"));
  TL_ASSIGN_OR_RETURN(sd.inserted_window_dims, StructIntList(dn, "inserted_window_dims"));
  TL_ASSIGN_OR_RETURN(sd.input_batching_dims, StructIntList(dn, "input_batching_dims"));
  TL_ASSIGN_OR_RETURN(sd.scatter_indices_batching_dims,
                      StructIntList(dn, "scatter_indices_batching_dims"));
  TL_ASSIGN_OR_RETURN(sd.scatter_dims_to_operand_dims,
                      StructIntList(dn, "scatter_dims_to_operand_dims"));
  TL_ASSIGN_OR_RETURN(sd.index_vector_dim, StructInt(dn, "index_vector_dim", 0));
  const Dims& window_dims = sd.update_window_dims;
  const Dims& inserted = sd.inserted_window_dims;
  const Dims& input_batching = sd.input_batching_dims;
  const Dims& to_operand = sd.scatter_dims_to_operand_dims;
  const int64_t ivd = sd.index_vector_dim;
  const TensorType& operand = x[0].tensor_type();
  const TensorType& idx_type = x[1].tensor_type();
  const TensorType& upd = x[2].tensor_type();
  auto has = [](const Dims& v, int64_t d) { return std::find(v.begin(), v.end(), d) != v.end(); };
  // The update of each window is the cotangent's slice at that window (a gather with the mirrored
  // dimension numbers), and zero for windows the scatter skipped as out of bounds.
  Dims slice_sizes(operand.rank(), 1);
  for (int64_t d = 0, k = 0; d < operand.rank(); ++d)
    if (!has(inserted, d) && !has(input_batching, d)) slice_sizes[d] = upd.dims[window_dims[k++]];
  const hlo::GatherDimensionNumbers gd{
      .offset_dims = window_dims,
      .collapsed_slice_dims = inserted,
      .operand_batching_dims = input_batching,
      .start_indices_batching_dims = sd.scatter_indices_batching_dims,
      .start_index_map = to_operand,
      .index_vector_dim = ivd};
  Value gathered = hlo::Gather(b, ct[0], x[1], gd, slice_sizes);
  // In-bounds mask per index vector: 0 <= start <= dim - window, all components.
  Literal hi(idx_type);
  Dims istrides = RowMajorStrides(idx_type.dims);
  for (int64_t i = 0; i < hi.num_elements(); ++i) {
    int64_t k = ivd < idx_type.rank() ? (i / istrides[ivd]) % idx_type.dims[ivd] : 0;
    int64_t d = to_operand[k];
    hi.SetFromDouble(i, static_cast<double>(operand.dims[d] - slice_sizes[d]));
  }
  using hlo::CompareDirection;
  Value lo_v = hlo::Constant(b, Literal(idx_type));
  Value hi_v = hlo::Constant(b, std::move(hi));
  Value ok = hlo::And(b, hlo::Compare(b, x[1], lo_v, CompareDirection::kGe),
                      hlo::Compare(b, x[1], hi_v, CompareDirection::kLe));
  if (ivd < idx_type.rank())  // all components of each index vector
    ok = hlo::Reduce(b, ok, hlo::Splat(b, TensorType(ElementType::kPred, {}), 1), {ivd}, hlo::And);
  Dims scatter_dims;
  for (int64_t d = 0; d < upd.rank(); ++d)
    if (!has(window_dims, d)) scatter_dims.push_back(d);
  Value mask = hlo::BroadcastInDim(b, ok, TensorType(ElementType::kPred, upd.dims), scatter_dims);
  Values grads(3);
  grads[2] = hlo::Select(b, mask, gathered, hlo::Zeros(b, upd));
  if (kind == "add") {
    grads[0] = ct[0];
  } else {
    // Overwritten positions got their value from the update, not the operand.
    auto replace = [](OpBuilder&, Value, Value update) { return update; };
    grads[0] = hlo::Scatter(b, ct[0], x[1], hlo::Zeros(b, upd), sd,
                            hlo::ScalarBinaryRegion(operand.element_type, replace));
  }
  return Done(b, grads);
}

}  // namespace tlaloc::ops
