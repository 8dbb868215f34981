#include "data_movement_kernels.h"

#include <algorithm>

namespace tlaloc::ops {

namespace {

constexpr int64_t kGrainElements = 16 * 1024;

constexpr int64_t kTile = 32;

// Copies a box tile by tile over dims k and the last one (k: where the source is contiguous).
template <typename U>
void CopyTiled(U* d, const StridedView& dv, const U* s, const StridedView& sv,
               const std::vector<int64_t>& dims, int k, EvalContext* ctx) {
  const int last = static_cast<int>(dims.size()) - 1;
  // The other dims give base offsets; dims k and last are walked in tiles.
  std::vector<int64_t> outer = dims;
  outer[k] = 1;
  outer[last] = 1;
  std::vector<std::pair<int64_t, int64_t>> bases;
  ForEachBoxRow(outer, dv, sv, 0, BoxRows(outer),
                [&](int64_t di, int64_t si) { bases.emplace_back(di, si); });
  const int64_t nk = dims[k], nl = dims[last];
  const int64_t tiles_k = (nk + kTile - 1) / kTile;
  const int64_t dsk = dv.strides[k], dsl = dv.strides[last];
  const int64_t ssk = sv.strides[k], ssl = sv.strides[last];
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      const auto [db, sb] = bases[w / tiles_k];
      const int64_t k0 = (w % tiles_k) * kTile, k1 = std::min(nk, k0 + kTile);
      for (int64_t l0 = 0; l0 < nl; l0 += kTile) {
        const int64_t l1 = std::min(nl, l0 + kTile);
        for (int64_t i = k0; i < k1; ++i)
          for (int64_t j = l0; j < l1; ++j) d[db + i * dsk + j * dsl] = s[sb + i * ssk + j * ssl];
      }
    }
  };
  const int64_t work = static_cast<int64_t>(bases.size()) * tiles_k;
  const int64_t per_item = kTile * nl;
  if (ctx && work * per_item >= 2 * kGrainElements && work > 1)
    ctx->ParallelFor(work, std::max<int64_t>(1, kGrainElements / per_item), run);
  else
    run(0, work);
}

template <typename U>
void CopyBoxTyped(std::byte* dst, const StridedView& dv, const std::byte* src,
                  const StridedView& sv, const std::vector<int64_t>& dims, EvalContext* ctx) {
  U* d = reinterpret_cast<U*>(dst);
  const U* s = reinterpret_cast<const U*>(src);
  const int64_t rows = BoxRows(dims);
  const int64_t inner = dims.empty() ? 1 : dims.back();
  const bool contiguous = !dims.empty() && dv.strides.back() == 1 && sv.strides.back() == 1;
  auto run = [&](int64_t begin, int64_t end) {
    if (contiguous) {
      // Whole rows are contiguous on both sides: one memcpy per row.
      std::vector<int64_t> outer(dims.begin(), dims.end() - 1);
      outer.push_back(1);
      StridedView dv1 = dv, sv1 = sv;
      ForEachBoxRow(outer, dv1, sv1, begin, end, [&](int64_t di, int64_t si) {
        std::memcpy(d + di, s + si, static_cast<size_t>(inner) * sizeof(U));
      });
    } else {
      ForEachBoxRow(dims, dv, sv, begin, end, [&](int64_t di, int64_t si) { d[di] = s[si]; });
    }
  };
  // The source repeats one element along the last dim (broadcasting a scalar, or a reduced
  // value back over its row): fill each destination row, a vectorised store loop.
  if (!dims.empty() && sv.strides.back() == 0 && dv.strides.back() == 1 && inner > 1) {
    std::vector<int64_t> outer(dims.begin(), dims.end() - 1);
    outer.push_back(1);
    auto fill_rows = [&](int64_t begin, int64_t end) {
      ForEachBoxRow(outer, dv, sv, begin, end,
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
  if (!dims.empty() && sv.strides.back() != 1 && dv.strides.back() == 1)
    for (size_t d = 0; d + 1 < dims.size(); ++d)
      if (sv.strides[d] == 1 && dims[d] > 1) k = static_cast<int>(d);
  if (k >= 0 && inner >= kTile) {
    CopyTiled(d, dv, s, sv, dims, k, ctx);
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
void MergeContiguousDims(std::vector<int64_t>& dims, StridedView& dv, StridedView& sv) {
  std::vector<int64_t> d, ds, ss;
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
  dims = std::move(d);
  dv.strides = std::move(ds);
  sv.strides = std::move(ss);
}

}  // namespace

void CopyBox(std::byte* dst, const StridedView& dst_view, const std::byte* src,
             const StridedView& src_view, const std::vector<int64_t>& dims, int esize,
             EvalContext* ctx) {
  if (NumElements(dims) == 0) return;
  std::vector<int64_t> box = dims;
  StridedView dv = dst_view, sv = src_view;
  MergeContiguousDims(box, dv, sv);
  switch (esize) {
    case 1:
      return CopyBoxTyped<uint8_t>(dst, dv, src, sv, box, ctx);
    case 2:
      return CopyBoxTyped<uint16_t>(dst, dv, src, sv, box, ctx);
    case 4:
      return CopyBoxTyped<uint32_t>(dst, dv, src, sv, box, ctx);
    default:
      return CopyBoxTyped<uint64_t>(dst, dv, src, sv, box, ctx);
  }
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
