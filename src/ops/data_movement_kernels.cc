#include "data_movement_kernels.h"

#include <algorithm>

namespace tlaloc::ops {

namespace {

constexpr int64_t kGrainElements = 16 * 1024;

constexpr int64_t kTile = 32;

// Copies a box tile by tile over dims k and the last one (k: where the source is contiguous).
// d and s point at the box's first elements (the views' offsets are already added). Each work
// item is one tile row of one outer position (the dims other than k and the last), whose base
// offsets it works out from its index, so nothing is allocated.
template <typename U>
void CopyTiled(U* d, const std::vector<int64_t>& ds, const U* s, const std::vector<int64_t>& ss,
               const std::vector<int64_t>& dims, int k, EvalContext* ctx) {
  const int last = static_cast<int>(dims.size()) - 1;
  int64_t outer = 1;
  for (int i = 0; i < last; ++i)
    if (i != k) outer *= dims[i];
  const int64_t nk = dims[k], nl = dims[last];
  const int64_t tiles_k = (nk + kTile - 1) / kTile;
  const int64_t dsk = ds[k], dsl = ds[last];
  const int64_t ssk = ss[k], ssl = ss[last];
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      // The outer position, row-major over the dims other than k and the last.
      int64_t o = w / tiles_k, db = 0, sb = 0;
      for (int i = last - 1; i >= 0; --i) {
        if (i == k) continue;
        const int64_t idx = o % dims[i];
        o /= dims[i];
        db += idx * ds[i];
        sb += idx * ss[i];
      }
      const int64_t k0 = (w % tiles_k) * kTile, k1 = std::min(nk, k0 + kTile);
      for (int64_t l0 = 0; l0 < nl; l0 += kTile) {
        const int64_t l1 = std::min(nl, l0 + kTile);
        for (int64_t i = k0; i < k1; ++i)
          for (int64_t j = l0; j < l1; ++j) d[db + i * dsk + j * dsl] = s[sb + i * ssk + j * ssl];
      }
    }
  };
  const int64_t work = outer * tiles_k;
  const int64_t per_item = kTile * nl;
  if (ctx && work * per_item >= 2 * kGrainElements && work > 1)
    ctx->ParallelFor(work, std::max<int64_t>(1, kGrainElements / per_item), run);
  else
    run(0, work);
}

// Copies a merged box (BoxCopy) from s to d, both pointing at the box's first element.
template <typename U>
void CopyBoxTyped(std::byte* dst, const std::byte* src, const BoxCopy& c, EvalContext* ctx) {
  U* d = reinterpret_cast<U*>(dst);
  const U* s = reinterpret_cast<const U*>(src);
  const std::vector<int64_t>& dims = c.dims;
  const std::vector<int64_t>& ds = c.dst.strides;
  const std::vector<int64_t>& ss = c.src.strides;
  const int64_t rows = BoxRows(dims);
  const int64_t inner = dims.empty() ? 1 : dims.back();
  const bool contiguous = !dims.empty() && ds.back() == 1 && ss.back() == 1;
  const int64_t inner_ds = dims.empty() ? 0 : ds.back(), inner_ss = dims.empty() ? 0 : ss.back();
  auto run = [&](int64_t begin, int64_t end) {
    if (contiguous) {
      // Whole rows are contiguous on both sides: one memcpy per row.
      ForEachRowStart(dims, 0, ds, 0, ss, begin, end, [&](int64_t di, int64_t si) {
        std::memcpy(d + di, s + si, static_cast<size_t>(inner) * sizeof(U));
      });
    } else {
      ForEachRowStart(dims, 0, ds, 0, ss, begin, end, [&](int64_t di, int64_t si) {
        for (int64_t i = 0; i < inner; ++i) d[di + i * inner_ds] = s[si + i * inner_ss];
      });
    }
  };
  // The source repeats one element along the last dim (broadcasting a scalar, or a reduced
  // value back over its row): fill each destination row, a vectorised store loop.
  if (!dims.empty() && ss.back() == 0 && ds.back() == 1 && inner > 1) {
    auto fill_rows = [&](int64_t begin, int64_t end) {
      ForEachRowStart(dims, 0, ds, 0, ss, begin, end,
                      [&](int64_t di, int64_t si) { std::fill(d + di, d + di + inner, s[si]); });
    };
    if (ctx && rows * inner >= 2 * kGrainElements && rows > 1)
      ctx->ParallelFor(rows, std::max<int64_t>(1, kGrainElements / inner), fill_rows);
    else
      fill_rows(0, rows);
    return;
  }
  // A transposing copy (source contiguous along another dim than the last) walks one side with a
  // large stride; copy it in square tiles so both sides stay in cache.
  int k = -1;
  if (!dims.empty() && ss.back() != 1 && ds.back() == 1)
    for (size_t i = 0; i + 1 < dims.size(); ++i)
      if (ss[i] == 1 && dims[i] > 1) k = static_cast<int>(i);
  if (k >= 0 && inner >= kTile) {
    CopyTiled(d, ds, s, ss, dims, k, ctx);
    return;
  }
  if (ctx && rows * inner >= 2 * kGrainElements && rows > 1) {
    ctx->ParallelFor(rows, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(inner, 1)), run);
  } else {
    run(0, rows);
  }
}

// The same box with each dim that continues the next one on both sides (stride = next stride
// times next size, in the destination and the source) merged into it, and dims of size 1
// dropped: the same elements in the same order, in fewer and longer rows. A decode step's paged
// KV gather and its transposes copy [pages, heads, 16, 128] boxes whose last two dims are one
// contiguous run of 2,048; copied as rows of 128 they cost twice as long.
void MergeContiguousDims(const std::vector<int64_t>& dims, const StridedView& dv,
                         const StridedView& sv, BoxCopy& c) {
  std::vector<int64_t>&d = c.dims, &ds = c.dst.strides, &ss = c.src.strides;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1 && i + 1 < dims.size()) continue;
    if (!d.empty() && ds.back() == dv.strides[i] * dims[i] &&
        ss.back() == sv.strides[i] * dims[i]) {
      d.back() *= dims[i];
      ds.back() = dv.strides[i];
      ss.back() = sv.strides[i];
      continue;
    }
    d.push_back(dims[i]);
    ds.push_back(dv.strides[i]);
    ss.push_back(sv.strides[i]);
  }
}

}  // namespace

BoxCopy PrepareBoxCopy(const StridedView& dst_view, const StridedView& src_view,
                       const std::vector<int64_t>& dims, int esize) {
  BoxCopy c;
  c.esize = esize;
  c.dst.offset = dst_view.offset;
  c.src.offset = src_view.offset;
  c.empty = NumElements(dims) == 0;
  if (!c.empty) MergeContiguousDims(dims, dst_view, src_view, c);
  return c;
}

void RunBoxCopy(const BoxCopy& c, std::byte* dst, int64_t dst_offset, const std::byte* src,
                int64_t src_offset, EvalContext* ctx) {
  if (c.empty) return;
  std::byte* d = dst + (c.dst.offset + dst_offset) * c.esize;
  const std::byte* s = src + (c.src.offset + src_offset) * c.esize;
  switch (c.esize) {
    case 1:
      return CopyBoxTyped<uint8_t>(d, s, c, ctx);
    case 2:
      return CopyBoxTyped<uint16_t>(d, s, c, ctx);
    case 4:
      return CopyBoxTyped<uint32_t>(d, s, c, ctx);
    default:
      return CopyBoxTyped<uint64_t>(d, s, c, ctx);
  }
}

void CopyBox(std::byte* dst, const StridedView& dst_view, const std::byte* src,
             const StridedView& src_view, const std::vector<int64_t>& dims, int esize,
             EvalContext* ctx) {
  RunBoxCopy(PrepareBoxCopy(dst_view, src_view, dims, esize), dst, 0, src, 0, ctx);
}

void FillElements(std::byte* dst, int64_t n, const std::byte* value, int esize, EvalContext* ctx) {
  auto fill = [&]<typename U>() {
    U v;
    std::memcpy(&v, value, sizeof(U));
    U* d = reinterpret_cast<U*>(dst);
    auto run = [&](int64_t b, int64_t e) { std::fill(d + b, d + e, v); };
    if (ctx && n >= 2 * kGrainElements)
      ctx->ParallelFor(n, kGrainElements, run);
    else
      run(0, n);
  };
  switch (esize) {
    case 1:
      return fill.operator()<uint8_t>();
    case 2:
      return fill.operator()<uint16_t>();
    case 4:
      return fill.operator()<uint32_t>();
    default:
      return fill.operator()<uint64_t>();
  }
}

int64_t ScalarIndex(const Literal& l) { return l.GetAsInt64(0); }

StridedView DenseView(const std::vector<int64_t>& dims) { return {0, RowMajorStrides(dims)}; }

StatusOr<std::vector<int64_t>> StructIntList(const Attribute& s, const std::string& field) {
  const Attribute* a = FindAttr(s.as_dict(), field);
  if (!a) return std::vector<int64_t>{};
  if (a->kind() == Attribute::Kind::kIntArray) return a->as_int_array();
  if (a->kind() == Attribute::Kind::kArray) {
    std::vector<int64_t> out;
    for (const Attribute& e : a->as_array()) {
      if (e.kind() != Attribute::Kind::kInt)
        return InvalidArgument("expected '" + field + "' to be a list of integers, got " +
                               a->DebugString());
      out.push_back(e.as_int());
    }
    return out;
  }
  return InvalidArgument("expected '" + field + "' to be a list of integers, got " +
                         a->DebugString());
}

StatusOr<int64_t> StructInt(const Attribute& s, const std::string& field, int64_t fallback) {
  const Attribute* a = FindAttr(s.as_dict(), field);
  if (!a) return fallback;
  if (a->kind() == Attribute::Kind::kInt) return a->as_int();
  return InvalidArgument("expected '" + field + "' to be an integer, got " + a->DebugString());
}

std::string ListToString(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace tlaloc::ops
