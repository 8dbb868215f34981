// Windowed reductions: stablehlo.reduce_window and stablehlo.select_and_scatter. Both use the
// generic op syntax (JAX prints them that way); attributes window_dimensions, window_strides,
// base_dilations, window_dilations (IntArray) and padding (dense<[[lo, hi], ...]> : i64).
#include <algorithm>
#include <cstring>
#include <optional>

#include "op_areas.h"
#include "op_helpers.h"
#include "reduction_kernels.h"

namespace tlaloc::ops {

namespace {

struct Window {
  std::vector<int64_t> dims, strides, base_dil, win_dil, lo, hi;
};

// Reads an optional per-dimension list, defaulting to `fallback`, checking its length and that
// every entry is at least `min`.
StatusOr<std::vector<int64_t>> WindowList(const AttrDict& attrs, const std::string& name,
                                          int64_t rank, int64_t fallback, int64_t min) {
  const Attribute* a = FindAttr(attrs, name);
  std::vector<int64_t> v;
  if (!a) {
    v.assign(rank, fallback);
  } else if (a->kind() == Attribute::Kind::kIntArray) {
    v = a->as_int_array();
  } else if (a->kind() == Attribute::Kind::kElements &&
             IsInteger(a->as_elements().element_type())) {
    for (int64_t i = 0; i < a->as_elements().num_elements(); ++i)
      v.push_back(a->as_elements().GetAsInt64(i));
  } else {
    return InvalidArgument("'" + name + "' must be an integer array");
  }
  if (static_cast<int64_t>(v.size()) != rank)
    return InvalidArgument("'" + name + "' has " + std::to_string(v.size()) +
                           " entries, expected one per dimension (" + std::to_string(rank) + ")");
  for (int64_t x : v)
    if (x < min)
      return InvalidArgument("'" + name + "' entries must be at least " + std::to_string(min) +
                             ", got " + std::to_string(x));
  return v;
}

StatusOr<Window> ReadWindow(const AttrDict& attrs, int64_t rank, bool dilations) {
  Window w;
  if (!FindAttr(attrs, "window_dimensions"))
    return InvalidArgument("expected a 'window_dimensions' attribute");
  TL_ASSIGN_OR_RETURN(w.dims, WindowList(attrs, "window_dimensions", rank, 1, 1));
  TL_ASSIGN_OR_RETURN(w.strides, WindowList(attrs, "window_strides", rank, 1, 1));
  if (dilations) {
    TL_ASSIGN_OR_RETURN(w.base_dil, WindowList(attrs, "base_dilations", rank, 1, 1));
    TL_ASSIGN_OR_RETURN(w.win_dil, WindowList(attrs, "window_dilations", rank, 1, 1));
  } else {
    w.base_dil.assign(rank, 1);
    w.win_dil.assign(rank, 1);
  }
  w.lo.assign(rank, 0);
  w.hi.assign(rank, 0);
  if (const Attribute* pad = FindAttr(attrs, "padding")) {
    std::vector<int64_t> flat;
    if (pad->kind() == Attribute::Kind::kElements && IsInteger(pad->as_elements().element_type())) {
      for (int64_t i = 0; i < pad->as_elements().num_elements(); ++i)
        flat.push_back(pad->as_elements().GetAsInt64(i));
    } else if (pad->kind() == Attribute::Kind::kIntArray) {
      flat = pad->as_int_array();
    } else {
      return InvalidArgument("'padding' must be dense integer elements of shape [rank, 2]");
    }
    if (static_cast<int64_t>(flat.size()) != 2 * rank)
      return InvalidArgument("'padding' has " + std::to_string(flat.size()) +
                             " entries, expected " + std::to_string(2 * rank));
    for (int64_t d = 0; d < rank; ++d) {
      w.lo[d] = flat[2 * d];
      w.hi[d] = flat[2 * d + 1];
    }
  }
  return w;
}

std::vector<int64_t> WindowOutputDims(const std::vector<int64_t>& in, const Window& w) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t dilated = in[d] == 0 ? 0 : (in[d] - 1) * w.base_dil[d] + 1;
    int64_t padded = dilated + w.lo[d] + w.hi[d];
    int64_t span = (w.dims[d] - 1) * w.win_dil[d] + 1;
    out.push_back(padded < span ? 0 : (padded - span) / w.strides[d] + 1);
  }
  return out;
}

// For output index `out`, the input offsets of each window position in row-major window order;
// -1 marks a position in the padding (or a hole of the base dilation).
void WindowOffsets(const std::vector<int64_t>& out, const std::vector<int64_t>& in_dims,
                   const std::vector<int64_t>& in_strides, const Window& w,
                   std::vector<int64_t>& offsets) {
  offsets.clear();
  size_t rank = in_dims.size();
  std::vector<int64_t> idx(rank, 0);
  if (NumElements(w.dims) == 0) return;
  do {
    int64_t off = 0;
    for (size_t d = 0; d < rank && off >= 0; ++d) {
      int64_t pos = out[d] * w.strides[d] + idx[d] * w.win_dil[d] - w.lo[d];
      if (pos < 0 || pos % w.base_dil[d] != 0 || pos / w.base_dil[d] >= in_dims[d]) {
        off = -1;
      } else {
        off += (pos / w.base_dil[d]) * in_strides[d];
      }
    }
    offsets.push_back(off);
  } while (NextIndex(idx, w.dims));
}

// The axis of a window that is an inclusive prefix scan (how jnp.cumsum & co. lower): along one
// axis the window spans the whole dimension with size-1 low padding; every other dimension has
// a window of 1; no strides, dilations or high padding.
std::optional<int64_t> PrefixScanAxis(const Window& w, const std::vector<int64_t>& in_dims) {
  std::optional<int64_t> axis;
  for (size_t d = 0; d < in_dims.size(); ++d) {
    if (w.strides[d] != 1 || w.base_dil[d] != 1 || w.win_dil[d] != 1 || w.hi[d] != 0)
      return std::nullopt;
    if (w.dims[d] == 1 && w.lo[d] == 0) continue;
    if (axis || in_dims[d] < 2 || w.dims[d] != in_dims[d] || w.lo[d] != in_dims[d] - 1)
      return std::nullopt;
    axis = static_cast<int64_t>(d);
  }
  return axis;
}

// ---- reduce_window ---------------------------------------------------------------------------

StatusOr<std::vector<Type>> InferReduceWindow(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  TL_ASSIGN_OR_RETURN(const size_t n, CheckInputsThenInits(in));
  const TensorType& t0 = in.operand_types[0].tensor;
  TL_ASSIGN_OR_RETURN(Window w, ReadWindow(in.attrs, t0.rank(), true));
  std::vector<int64_t> out_dims = WindowOutputDims(t0.dims, w);
  std::vector<Type> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(TensorType(in.operand_types[n + i].tensor.element_type, out_dims));
  if (!in.regions.empty()) {
    TL_ASSIGN_OR_RETURN(std::vector<ElementType> ets, ReductionBodyResults(*in.regions[0], n));
    for (size_t i = 0; i < ets.size(); ++i) out[i] = TensorType(ets[i], out_dims);
  }
  return out;
}

Status EvalReduceWindow(const Operation& op, std::span<const Literal> operands,
                        std::vector<Literal>& results, EvalContext& ctx) {
  const size_t n = operands.size() / 2;
  const std::vector<int64_t>& in_dims = operands[0].dims();
  TL_ASSIGN_OR_RETURN(Window w, ReadWindow(op.attrs(), static_cast<int64_t>(in_dims.size()), true));
  std::vector<int64_t> in_strides = RowMajorStrides(in_dims);
  const std::vector<int64_t>& out_dims = results[0].dims();
  int64_t out_n = NumElements(out_dims);
  auto out_index = [&](int64_t o) {
    std::vector<int64_t> idx(out_dims.size());
    for (int64_t d = static_cast<int64_t>(out_dims.size()) - 1; d >= 0; --d) {
      idx[d] = o % out_dims[d];
      o /= out_dims[d];
    }
    return idx;
  };
  ElementType et = operands[0].element_type();
  auto kind = MatchBinaryBody(op.region(0));
  if (n == 1 && kind && operands[1].element_type() == et && results[0].element_type() == et) {
    return DispatchElementType(et, [&]<typename T>() -> Status {
      const T* in = operands[0].span<T>().data();
      const T init = operands[1].span<T>()[0];
      T* out = results[0].span<T>().data();
      // A prefix scan runs in linear time. Each output then folds init, the init-valued
      // padding, and the prefix, in that order; when init (+) init == init the padding drops
      // out and the running fold gives bit-identical results.
      T twice = ApplyBinary<T>(*kind, init, init);
      auto scan_axis = PrefixScanAxis(w, in_dims);
      if (scan_axis && std::memcmp(&twice, &init, sizeof(T)) == 0) {
        int64_t n_axis = in_dims[*scan_axis];
        int64_t stride = in_strides[*scan_axis];
        int64_t lines = NumElements(in_dims) / n_axis;
        ctx.ParallelFor(lines, std::max<int64_t>(1, 16384 / n_axis),
                        [&](int64_t begin, int64_t end) {
                          for (int64_t l = begin; l < end; ++l) {
                            int64_t base = (l / stride) * stride * n_axis + (l % stride);
                            T acc = init;
                            for (int64_t i = 0; i < n_axis; ++i) {
                              acc = ApplyBinary<T>(*kind, acc, in[base + i * stride]);
                              out[base + i * stride] = acc;
                            }
                          }
                        });
        return OkStatus();
      }
      int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(NumElements(w.dims), 1));
      ctx.ParallelFor(out_n, grain, [&](int64_t begin, int64_t end) {
        std::vector<int64_t> offsets;
        for (int64_t o = begin; o < end; ++o) {
          WindowOffsets(out_index(o), in_dims, in_strides, w, offsets);
          T acc = init;
          // Padding positions hold the init value (the specification pads with it).
          for (int64_t off : offsets) acc = ApplyBinary<T>(*kind, acc, off < 0 ? init : in[off]);
          out[o] = acc;
        }
      });
      return OkStatus();
    });
  }
  // A body of elementwise ops runs once per window position on the vectors of all outputs
  // (the same left-to-right fold per output as below, without a region run per element).
  int64_t wn = NumElements(w.dims);
  bool same_types = true;
  for (size_t i = 0; i < n; ++i)
    same_types = same_types && results[i].element_type() == operands[n + i].element_type();
  if (same_types && out_n > 1 && out_n * wn <= (int64_t{1} << 26) &&
      RegionIsVectorizable(op.region(0))) {
    std::vector<int64_t> all(out_n * wn);
    std::vector<int64_t> offs;
    for (int64_t o = 0; o < out_n; ++o) {
      WindowOffsets(out_index(o), in_dims, in_strides, w, offs);
      std::copy(offs.begin(), offs.end(), all.begin() + o * wn);
    }
    std::vector<Literal> acc;
    for (size_t i = 0; i < n; ++i) {
      Literal a(TensorType(operands[n + i].element_type(), {out_n}));
      for (int64_t o = 0; o < out_n; ++o) CopyElement(operands[n + i], 0, a, o);
      acc.push_back(std::move(a));
    }
    for (int64_t p = 0; p < wn; ++p) {
      std::vector<Literal> args = acc;
      for (size_t i = 0; i < n; ++i) {
        Literal x(TensorType(operands[i].element_type(), {out_n}));
        for (int64_t o = 0; o < out_n; ++o) {
          int64_t off = all[o * wn + p];
          if (off < 0) {
            CopyElement(operands[n + i], 0, x, o);
          } else {
            CopyElement(operands[i], off, x, o);
          }
        }
        args.push_back(std::move(x));
      }
      TL_ASSIGN_OR_RETURN(acc, RunRegionVectorized(op.region(0), std::move(args), out_n, ctx));
    }
    for (size_t i = 0; i < n; ++i)
      for (int64_t o = 0; o < out_n; ++o) CopyElement(acc[i], o, results[i], o);
    return OkStatus();
  }
  std::vector<int64_t> offsets;
  for (int64_t o = 0; o < out_n; ++o) {
    WindowOffsets(out_index(o), in_dims, in_strides, w, offsets);
    std::vector<Literal> acc(operands.begin() + n, operands.end());
    for (int64_t off : offsets) {
      std::vector<Literal> args = acc;
      for (size_t i = 0; i < n; ++i)
        args.push_back(off < 0 ? operands[n + i] : ElementAsScalar(operands[i], off));
      TL_ASSIGN_OR_RETURN(acc, ctx.RunRegion(op.region(0), std::move(args)));
      if (acc.size() != n) return Internal("the body returned the wrong number of values");
    }
    for (size_t i = 0; i < n; ++i) {
      if (acc[i].element_type() != results[i].element_type())
        return InvalidArgument("the body returned " + acc[i].type().ToString());
      CopyElement(acc[i], 0, results[i], o);
    }
  }
  return OkStatus();
}

// ---- select_and_scatter ----------------------------------------------------------------------

StatusOr<std::vector<Type>> InferSelectAndScatter(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectOperandCount(in, 3));
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  const TensorType& operand = in.operand_types[0].tensor;
  const TensorType& source = in.operand_types[1].tensor;
  const TensorType& init = in.operand_types[2].tensor;
  if (init.rank() != 0 || init.element_type != operand.element_type)
    return InvalidArgument("init_value must be a scalar of the operand's element type, got " +
                           init.ToString());
  if (source.element_type != operand.element_type)
    return InvalidArgument("source element type must match the operand's, got " +
                           source.ToString());
  TL_ASSIGN_OR_RETURN(Window w, ReadWindow(in.attrs, operand.rank(), false));
  std::vector<int64_t> expect = WindowOutputDims(operand.dims, w);
  if (expect != source.dims)
    return InvalidArgument("source has shape " + source.ToString() + ", expected " +
                           TensorType(source.element_type, expect).ToString() +
                           " (one element per window)");
  return std::vector<Type>{in.operand_types[0]};
}

Status EvalSelectAndScatter(const Operation& op, std::span<const Literal> operands,
                            std::vector<Literal>& results, EvalContext& ctx) {
  const Literal& operand = operands[0];
  const Literal& source = operands[1];
  const std::vector<int64_t>& in_dims = operand.dims();
  TL_ASSIGN_OR_RETURN(Window w, ReadWindow(op.attrs(), operand.type().rank(), false));
  std::vector<int64_t> in_strides = RowMajorStrides(in_dims);
  Literal& result = results[0];
  for (int64_t i = 0; i < result.num_elements(); ++i) CopyElement(operands[2], 0, result, i);
  auto select = MatchCompareBody(op.region(0));
  bool scatter_in_order = true;
  auto scatter = MatchBinaryBody(op.region(1), &scatter_in_order);
  const std::vector<int64_t>& src_dims = source.dims();
  std::vector<int64_t> sidx(src_dims.size(), 0);
  std::vector<int64_t> offsets;
  if (source.num_elements() == 0) return OkStatus();
  int64_t s = 0;
  do {
    WindowOffsets(sidx, in_dims, in_strides, w, offsets);
    int64_t selected = -1;
    for (int64_t off : offsets) {
      if (off < 0) continue;  // padding never gets selected
      if (selected < 0) {
        selected = off;
        continue;
      }
      bool keep;
      if (select) {
        keep = DispatchElementType(operand.element_type(), [&]<typename T>() {
          auto v = operand.span<T>();
          return ApplyCompare<T>(*select, v[selected], v[off]);
        });
      } else {
        TL_ASSIGN_OR_RETURN(std::vector<Literal> r,
                            ctx.RunRegion(op.region(0), {ElementAsScalar(operand, selected),
                                                         ElementAsScalar(operand, off)}));
        if (r.size() != 1 || r[0].element_type() != ElementType::kPred)
          return InvalidArgument("the select region must return one i1");
        keep = r[0].span<bool>()[0];
      }
      if (!keep) selected = off;
    }
    if (selected >= 0) {
      if (scatter) {
        DispatchElementType(result.element_type(), [&]<typename T>() {
          T* out = result.span<T>().data();
          out[selected] = ApplyBinary<T>(*scatter, out[selected], source.span<T>()[s]);
        });
      } else {
        TL_ASSIGN_OR_RETURN(std::vector<Literal> r,
                            ctx.RunRegion(op.region(1), {ElementAsScalar(result, selected),
                                                         ElementAsScalar(source, s)}));
        if (r.size() != 1 || r[0].element_type() != result.element_type())
          return InvalidArgument("the scatter region must return one value of the operand type");
        CopyElement(r[0], 0, result, selected);
      }
    }
    ++s;
  } while (NextIndex(sidx, src_dims));
  return OkStatus();
}

}  // namespace

void RegisterWindowOps(OpRegistry& r) {
  {
    OpDef d;
    d.name = "stablehlo.reduce_window";
    d.num_regions = 1;
    d.infer = InferReduceWindow;
    d.eval = EvalReduceWindow;
    r.Register(std::move(d));
  }
  {
    OpDef d;
    d.name = "stablehlo.select_and_scatter";
    d.num_regions = 2;
    d.infer = InferSelectAndScatter;
    d.eval = EvalSelectAndScatter;
    r.Register(std::move(d));
  }
}

}  // namespace tlaloc::ops
