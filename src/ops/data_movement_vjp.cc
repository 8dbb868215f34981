#include "data_movement_vjp.h"

#include <algorithm>

#include "data_movement_kernels.h"
#include "op_helpers.h"
#include "tlaloc/ir/builder.h"

namespace tlaloc::ops {

namespace {

using Dims = std::vector<int64_t>;
using Values = std::vector<Value>;

Value ScalarZero(OpBuilder& b, ElementType et) {
  return b.CreateOne("stablehlo.constant", {},
                     {{"value", Attribute::Elements(Literal(TensorType(et, {})))}});
}

// Zeros of type t: a scalar constant broadcast, so no large constant is materialised.
Value Zeros(OpBuilder& b, const TensorType& t) {
  Value z = ScalarZero(b, t.element_type);
  if (t.rank() == 0) return z;
  return b.CreateOne("stablehlo.broadcast_in_dim", {z},
                     {{"broadcast_dimensions", Attribute::IntArray({})}},
                     std::vector<Type>{Type(t)});
}

// A region (a: tensor<et>, b: tensor<et>) -> a `op` b (or b when op is empty), for reduce and
// scatter.
std::unique_ptr<Region> BinaryRegion(ElementType et, const char* op) {
  auto region = std::make_unique<Region>();
  Block& body = region->AddBlock();
  Value a = body.AddArgument(Type(TensorType(et, {})));
  Value c = body.AddArgument(Type(TensorType(et, {})));
  OpBuilder rb(&body);
  Value r = *op ? rb.CreateOne(op, {a, c}) : c;
  rb.Create("stablehlo.return", {r});
  return region;
}
std::unique_ptr<Region> AddRegion(ElementType et) { return BinaryRegion(et, "stablehlo.add"); }

// Sum of x over `dims` (the other dims kept in order).
Value SumOver(OpBuilder& b, Value x, const Dims& dims) {
  if (dims.empty()) return x;
  ElementType et = x.tensor_type().element_type;
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(AddRegion(et));
  return b.CreateOne("stablehlo.reduce", {x, ScalarZero(b, et)},
                     {{"dimensions", Attribute::IntArray(dims)}}, {}, std::move(regions));
}

Value Reshape(OpBuilder& b, Value x, const TensorType& t) {
  if (x.tensor_type() == t) return x;
  return b.CreateOne("stablehlo.reshape", {x}, {}, std::vector<Type>{Type(t)});
}

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
  if (perm != AllDims(static_cast<int64_t>(perm.size())))
    z = b.CreateOne("stablehlo.transpose", {z}, {{"permutation", Attribute::IntArray(perm)}});
  return Done(b, {Reshape(b, z, in)});
}

StatusOr<Values> ReshapeVjp(OpBuilder& b, const Operation&, const Values& x, const Values&,
                            const Values& ct) {
  return Done(b, {Reshape(b, ct[0], x[0].tensor_type())});
}

StatusOr<Values> TransposeVjp(OpBuilder& b, const Operation& op, const Values&, const Values&,
                              const Values& ct) {
  Dims perm = IntList(op, "permutation"), inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return Done(b, {b.CreateOne("stablehlo.transpose", {ct[0]},
                              {{"permutation", Attribute::IntArray(inverse)}})});
}

StatusOr<Values> ReverseVjp(OpBuilder& b, const Operation& op, const Values&, const Values&,
                            const Values& ct) {
  return Done(b, {b.CreateOne("stablehlo.reverse", {ct[0]},
                              {{"dimensions", Attribute::IntArray(IntList(op, "dimensions"))}})});
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
  Value g = b.CreateOne("stablehlo.pad", {ct[0], ScalarZero(b, in.element_type)},
                        {{"edge_padding_low", Attribute::IntArray(low)},
                         {"edge_padding_high", Attribute::IntArray(high)},
                         {"interior_padding", Attribute::IntArray(interior)}});
  return Done(b, {g});
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
    grads.push_back(b.CreateOne("stablehlo.slice", {ct[0]},
                                {{"start_indices", Attribute::IntArray(start)},
                                 {"limit_indices", Attribute::IntArray(limit)},
                                 {"strides", Attribute::IntArray(Dims(out.rank(), 1))}}));
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
    full = b.CreateOne("stablehlo.pad", {ct[0], ScalarZero(b, in.element_type)},
                       {{"edge_padding_low", Attribute::IntArray(undo_low)},
                        {"edge_padding_high", Attribute::IntArray(undo_high)},
                        {"interior_padding", Attribute::IntArray(Dims(rank, 0))}});
  Value g = b.CreateOne("stablehlo.slice", {full},
                        {{"start_indices", Attribute::IntArray(start)},
                         {"limit_indices", Attribute::IntArray(limit)},
                         {"strides", Attribute::IntArray(strides)}});
  // The padding value received everything that did not come from the operand.
  Value total = SumOver(b, ct[0], AllDims(rank));
  Value from_operand = SumOver(b, g, AllDims(rank));
  Value gp = b.CreateOne("stablehlo.subtract", {total, from_operand});
  return Done(b, {g, gp});
}

StatusOr<Values> DynamicSliceVjp(OpBuilder& b, const Operation&, const Values& x, const Values&,
                                 const Values& ct) {
  // The update is clamped exactly as the slice was, so the cotangent lands where it came from.
  Values args = {Zeros(b, x[0].tensor_type()), ct[0]};
  args.insert(args.end(), x.begin() + 1, x.end());
  Values grads(x.size());
  grads[0] = b.CreateOne("stablehlo.dynamic_update_slice", args);
  return Done(b, grads);
}

StatusOr<Values> DynamicUpdateSliceVjp(OpBuilder& b, const Operation&, const Values& x,
                                       const Values&, const Values& ct) {
  const TensorType& upd = x[1].tensor_type();
  Values indices(x.begin() + 2, x.end());
  Values args = {ct[0], Zeros(b, upd)};
  args.insert(args.end(), indices.begin(), indices.end());
  Values grads(x.size());
  grads[0] = b.CreateOne("stablehlo.dynamic_update_slice", args);
  Values slice_args = {ct[0]};
  slice_args.insert(slice_args.end(), indices.begin(), indices.end());
  grads[1] = b.CreateOne("stablehlo.dynamic_slice", slice_args,
                         {{"slice_sizes", Attribute::IntArray(upd.dims)}});
  return Done(b, grads);
}

StatusOr<Values> GatherVjp(OpBuilder& b, const Operation& op, const Values& x, const Values&,
                           const Values& ct) {
  const Attribute& dn = op.attrs().at("dimension_numbers");
  TL_ASSIGN_OR_RETURN(Dims offset_dims, StructIntList(dn, "offset_dims"));
  TL_ASSIGN_OR_RETURN(Dims collapsed, StructIntList(dn, "collapsed_slice_dims"));
  TL_ASSIGN_OR_RETURN(Dims operand_batching, StructIntList(dn, "operand_batching_dims"));
  TL_ASSIGN_OR_RETURN(Dims indices_batching, StructIntList(dn, "start_indices_batching_dims"));
  TL_ASSIGN_OR_RETURN(Dims start_index_map, StructIntList(dn, "start_index_map"));
  TL_ASSIGN_OR_RETURN(int64_t ivd, StructInt(dn, "index_vector_dim", 0));
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
  Value lo_v = b.CreateOne("stablehlo.constant", {}, {{"value", Attribute::Elements(lo)}});
  Value hi_v = b.CreateOne("stablehlo.constant", {}, {{"value", Attribute::Elements(hi)}});
  Value clamped =
      b.CreateOne("stablehlo.minimum", {b.CreateOne("stablehlo.maximum", {x[1], lo_v}), hi_v});
  AttrDict fields{{"update_window_dims", Attribute::IntArray(offset_dims)},
                  {"inserted_window_dims", Attribute::IntArray(collapsed)},
                  {"scatter_dims_to_operand_dims", Attribute::IntArray(start_index_map)},
                  {"index_vector_dim", Attribute::Int(ivd)}};
  if (!operand_batching.empty()) {
    fields["input_batching_dims"] = Attribute::IntArray(operand_batching);
    fields["scatter_indices_batching_dims"] = Attribute::IntArray(indices_batching);
  }
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(AddRegion(operand.element_type));
  Values grads(2);
  grads[0] = b.CreateOne(
      "stablehlo.scatter", {Zeros(b, operand), clamped, ct[0]},
      {{"scatter_dimension_numbers", Attribute::Struct("stablehlo.scatter", std::move(fields))}},
      {}, std::move(regions));
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
  TL_ASSIGN_OR_RETURN(Dims window_dims, StructIntList(dn, "update_window_dims"));
  TL_ASSIGN_OR_RETURN(Dims inserted, StructIntList(dn, "inserted_window_dims"));
  TL_ASSIGN_OR_RETURN(Dims input_batching, StructIntList(dn, "input_batching_dims"));
  TL_ASSIGN_OR_RETURN(Dims indices_batching, StructIntList(dn, "scatter_indices_batching_dims"));
  TL_ASSIGN_OR_RETURN(Dims to_operand, StructIntList(dn, "scatter_dims_to_operand_dims"));
  TL_ASSIGN_OR_RETURN(int64_t ivd, StructInt(dn, "index_vector_dim", 0));
  const TensorType& operand = x[0].tensor_type();
  const TensorType& idx_type = x[1].tensor_type();
  const TensorType& upd = x[2].tensor_type();
  auto has = [](const Dims& v, int64_t d) { return std::find(v.begin(), v.end(), d) != v.end(); };
  // The update of each window is the cotangent's slice at that window (a gather with the mirrored
  // dimension numbers), and zero for windows the scatter skipped as out of bounds.
  Dims slice_sizes(operand.rank(), 1);
  for (int64_t d = 0, k = 0; d < operand.rank(); ++d)
    if (!has(inserted, d) && !has(input_batching, d)) slice_sizes[d] = upd.dims[window_dims[k++]];
  AttrDict g{{"offset_dims", Attribute::IntArray(window_dims)},
             {"collapsed_slice_dims", Attribute::IntArray(inserted)},
             {"start_index_map", Attribute::IntArray(to_operand)},
             {"index_vector_dim", Attribute::Int(ivd)}};
  if (!input_batching.empty()) {
    g["operand_batching_dims"] = Attribute::IntArray(input_batching);
    g["start_indices_batching_dims"] = Attribute::IntArray(indices_batching);
  }
  Value gathered =
      b.CreateOne("stablehlo.gather", {ct[0], x[1]},
                  {{"dimension_numbers", Attribute::Struct("stablehlo.gather", std::move(g))},
                   {"slice_sizes", Attribute::IntArray(slice_sizes)}});
  // In-bounds mask per index vector: 0 <= start <= dim - window, all components.
  Literal hi(idx_type);
  Dims istrides = RowMajorStrides(idx_type.dims);
  for (int64_t i = 0; i < hi.num_elements(); ++i) {
    int64_t k = ivd < idx_type.rank() ? (i / istrides[ivd]) % idx_type.dims[ivd] : 0;
    int64_t d = to_operand[k];
    hi.SetFromDouble(i, static_cast<double>(operand.dims[d] - slice_sizes[d]));
  }
  auto cmp = [&](Value l, Value r, const char* dir) {
    return b.CreateOne("stablehlo.compare", {l, r},
                       {{"comparison_direction", Attribute::Enum(dir, "comparison_direction")}});
  };
  Value lo_v =
      b.CreateOne("stablehlo.constant", {}, {{"value", Attribute::Elements(Literal(idx_type))}});
  Value hi_v = b.CreateOne("stablehlo.constant", {}, {{"value", Attribute::Elements(hi)}});
  Value ok = b.CreateOne("stablehlo.and", {cmp(x[1], lo_v, "GE"), cmp(x[1], hi_v, "LE")});
  if (ivd < idx_type.rank()) {
    std::vector<std::unique_ptr<Region>> regions;
    regions.push_back(BinaryRegion(ElementType::kPred, "stablehlo.and"));
    Literal yes(TensorType(ElementType::kPred, {}));
    yes.SetFromDouble(0, 1);
    Value init = b.CreateOne("stablehlo.constant", {}, {{"value", Attribute::Elements(yes)}});
    ok = b.CreateOne("stablehlo.reduce", {ok, init}, {{"dimensions", Attribute::IntArray({ivd})}},
                     {}, std::move(regions));
  }
  Dims scatter_dims;
  for (int64_t d = 0; d < upd.rank(); ++d)
    if (!has(window_dims, d)) scatter_dims.push_back(d);
  Value mask = b.CreateOne("stablehlo.broadcast_in_dim", {ok},
                           {{"broadcast_dimensions", Attribute::IntArray(scatter_dims)}},
                           std::vector<Type>{Type(TensorType(ElementType::kPred, upd.dims))});
  Values grads(3);
  grads[2] = b.CreateOne("stablehlo.select", {mask, gathered, Zeros(b, upd)});
  if (kind == "add") {
    grads[0] = ct[0];
  } else {
    // Overwritten positions got their value from the update, not the operand.
    std::vector<std::unique_ptr<Region>> regions;
    regions.push_back(BinaryRegion(operand.element_type, ""));
    grads[0] = b.CreateOne("stablehlo.scatter", {ct[0], x[1], Zeros(b, upd)},
                           {{"scatter_dimension_numbers", dn}}, {}, std::move(regions));
  }
  return Done(b, grads);
}

}  // namespace tlaloc::ops
