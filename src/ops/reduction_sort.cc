// Sorting: stablehlo.sort (variadic, comparator region; always stable, which also satisfies
// is_stable = false) and chlo.top_k (largest k along the last dimension, ties by index).
#include <algorithm>
#include <functional>
#include <limits>
#include <map>

#include "op_areas.h"
#include "op_helpers.h"
#include "reduction_kernels.h"
#include "tlaloc/ir/typed_builder.h"

namespace tlaloc::ops {

namespace {

// Stable bottom-up merge sort of `idx` under `less`. Unlike std::stable_sort it stays in bounds
// for comparators that are not strict weak orders (a comparator region may be anything).
template <typename Less>
void MergeSort(std::vector<int64_t>& idx, Less&& less) {
  size_t n = idx.size();
  std::vector<int64_t> tmp(n);
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      size_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
      size_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi) tmp[o++] = less(idx[j], idx[i]) ? idx[j++] : idx[i++];
      while (i < mid) tmp[o++] = idx[i++];
      while (j < hi) tmp[o++] = idx[j++];
    }
    idx.swap(tmp);
  }
}

int64_t NormalizeDim(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }

StatusOr<std::vector<Type>> InferSort(const InferInput& in) {
  if (in.operand_types.empty()) return InvalidArgument("expected at least one operand");
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  const TensorType& t0 = in.operand_types[0].tensor;
  for (size_t i = 1; i < in.operand_types.size(); ++i)
    if (in.operand_types[i].tensor.dims != t0.dims)
      return InvalidArgument("operand " + std::to_string(i) + " has shape " +
                             in.operand_types[i].ToString() +
                             ", expected the shape of operand 0, " + t0.ToString());
  int64_t d = GetIntAttr(in.attrs, "dimension", -1);
  if (d < -t0.rank() || d >= t0.rank() || t0.rank() == 0)
    return InvalidArgument("'dimension' is " + std::to_string(d) + ", expected one in [" +
                           std::to_string(-t0.rank()) + ", " + std::to_string(t0.rank()) + ")");
  if (!in.regions.empty() && !in.regions[0]->empty()) {
    int args = in.regions[0]->front().num_arguments();
    if (args != static_cast<int>(2 * in.operand_types.size()))
      return InvalidArgument("the comparator takes " + std::to_string(args) +
                             " arguments, expected " + std::to_string(2 * in.operand_types.size()));
  }
  return in.operand_types;
}

Status EvalSort(const Operation& op, std::span<const Literal> operands,
                std::vector<Literal>& results, EvalContext& ctx) {
  const std::vector<int64_t>& dims = operands[0].dims();
  int64_t rank = static_cast<int64_t>(dims.size());
  int64_t dim = NormalizeDim(GetIntAttr(op.attrs(), "dimension", -1), rank);
  int64_t len = dims[dim];
  int64_t stride = RowMajorStrides(dims)[dim];
  int64_t total = operands[0].num_elements();
  if (total == 0) return OkStatus();
  int64_t slices = total / len;
  auto fast = MatchCompareBody(op.region(0));
  Status error;
  std::vector<int64_t> idx(len);
  for (int64_t s = 0; s < slices; ++s) {
    // Slice s: all indices but `dim` fixed; base is its element at position 0 along `dim`.
    int64_t base = (s / stride) * stride * len + (s % stride);
    for (int64_t i = 0; i < len; ++i) idx[i] = base + i * stride;
    if (fast) {
      DispatchElementType(operands[0].element_type(), [&]<typename T>() {
        const T* v = operands[0].span<T>().data();
        MergeSort(idx, [&](int64_t a, int64_t b) { return ApplyCompare<T>(*fast, v[a], v[b]); });
      });
    } else {
      MergeSort(idx, [&](int64_t a, int64_t b) {
        if (!error.ok()) return false;
        std::vector<Literal> args;
        for (const Literal& l : operands) {
          args.push_back(ElementAsScalar(l, a));
          args.push_back(ElementAsScalar(l, b));
        }
        auto r = ctx.RunRegion(op.region(0), std::move(args));
        if (!r.ok()) {
          error = r.status();
          return false;
        }
        if (r->size() != 1 || (*r)[0].element_type() != ElementType::kPred ||
            (*r)[0].num_elements() != 1) {
          error = InvalidArgument("the comparator must return one i1 scalar");
          return false;
        }
        return (*r)[0].span<bool>()[0];
      });
      TL_RETURN_IF_ERROR(error);
    }
    for (size_t k = 0; k < operands.size(); ++k)
      for (int64_t i = 0; i < len; ++i)
        CopyElement(operands[k], idx[i], results[k], base + i * stride);
  }
  return OkStatus();
}

// ---- chlo.top_k ------------------------------------------------------------------------------

StatusOr<std::vector<Type>> InferTopK(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  const TensorType& t = in.operand_types[0].tensor;
  const Attribute* ka = FindAttr(in.attrs, "k");
  if (!ka || ka->kind() != Attribute::Kind::kInt) return InvalidArgument("expected an integer 'k'");
  int64_t k = ka->as_int();
  if (t.rank() < 1) return InvalidArgument("operand must have rank >= 1, got " + t.ToString());
  if (k < 0 || k > t.dims.back())
    return InvalidArgument("k = " + std::to_string(k) + " must be in [0, " +
                           std::to_string(t.dims.back()) + "] (the last dimension)");
  std::vector<int64_t> dims = t.dims;
  dims.back() = k;
  return std::vector<Type>{TensorType(t.element_type, dims), TensorType(ElementType::kS32, dims)};
}

// The largest k of a float row in top_k's order, by one u64 per element: its total-order key
// (TotalOrderKey, shifted to unsigned) above the complement of its index, so that the larger key
// comes first and, among equal values, the lower index. The keys are distinct, so selecting the
// k largest and sorting those k gives exactly the order the comparator below gives. The
// selection first counts the keys' top 16 bits (a value's sign, exponent and 7 mantissa bits):
// the buckets above the one holding the k-th largest are in whole, and only the keys of that
// bucket and above are kept for nth_element. Sampling's [B, 151936] -> k = 4,096 took 2.6 ms a
// row through the comparator with partial_sort, 1.2 ms with nth_element over every key.
// `keys` and `counts` are scratch.
template <typename T>
void TopKFloatRow(const T* v, int64_t len, int64_t k, std::vector<uint64_t>& keys,
                  std::vector<uint32_t>& counts, int32_t* out_idx) {
  constexpr int kBucketBits = 16;
  auto key_of = [&](int64_t i) {
    return static_cast<uint32_t>(TotalOrderKey(v[i]) + (int64_t{1} << 31));
  };
  counts.assign(size_t{1} << kBucketBits, 0);
  for (int64_t i = 0; i < len; ++i) ++counts[key_of(i) >> (32 - kBucketBits)];
  // The bucket holding the k-th largest key: every key in a bucket above it is in the top k.
  uint32_t bucket = static_cast<uint32_t>(counts.size());
  uint64_t above = 0;
  while (bucket > 1 && above + counts[bucket - 1] < static_cast<uint64_t>(k))
    above += counts[--bucket];
  const uint32_t lowest = (bucket - 1) << (32 - kBucketBits);
  keys.clear();
  for (int64_t i = 0; i < len; ++i)
    if (const uint32_t key = key_of(i); key >= lowest)
      keys.push_back((uint64_t{key} << 32) | (0xffffffffu - static_cast<uint32_t>(i)));
  const auto end = keys.begin() + k;
  if (k < static_cast<int64_t>(keys.size()))
    std::nth_element(keys.begin(), end, keys.end(), std::greater<>());
  std::sort(keys.begin(), end, std::greater<>());
  for (int64_t i = 0; i < k; ++i)
    out_idx[i] = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(keys[i]));
}

Status EvalTopK(const Operation& op, std::span<const Literal> operands,
                std::vector<Literal>& results, EvalContext& ctx) {
  const Literal& x = operands[0];
  int64_t len = x.dims().back();
  int64_t k = GetIntAttr(op.attrs(), "k", 0);
  int64_t rows = len == 0 ? 0 : x.num_elements() / len;
  // Descending in the total order (so NaN sorts first, as XLA's TOTALORDER comparator does),
  // ties keep the lower index first.
  CompareSpec gt{CompareDir::kGT,
                 IsFloat(x.element_type()) ? CompareKind::kTotalOrder : CompareKind::kDefault,
                 false};
  const ElementType et = x.element_type();
  // f32, bf16 and f16 keys fit 32 bits; indices of rows up to 2^31 fit the rest.
  const bool by_keys =
      (et == ElementType::kF32 || et == ElementType::kBF16 || et == ElementType::kF16) &&
      len <= std::numeric_limits<int32_t>::max();
  auto out_idx = results[1].span<int32_t>();
  // Rows are independent: each thread sorts its own (one row of 151,936 is enough work to share).
  ctx.ParallelFor(rows, 1, [&](int64_t first, int64_t last) {
    std::vector<int64_t> idx;
    std::vector<uint64_t> keys;
    std::vector<uint32_t> counts;
    for (int64_t r = first; r < last; ++r) {
      int32_t* row_idx = out_idx.data() + r * k;
      DispatchElementType(et, [&]<typename T>() {
        const T* v = x.span<T>().data() + r * len;
        if constexpr (kIsHalfLike<T> || std::is_same_v<T, float>) {
          if (by_keys) {
            TopKFloatRow(v, len, k, keys, counts, row_idx);
            return;
          }
        }
        // Only the first k are needed: a partial sort (O(len log k)) instead of sorting the
        // row. The total order plus the index tie-break is a strict order, as partial_sort
        // requires, and gives the stable sort's first k.
        idx.resize(len);
        for (int64_t i = 0; i < len; ++i) idx[i] = i;
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) {
          if (ApplyCompare<T>(gt, v[a], v[b])) return true;
          return !ApplyCompare<T>(gt, v[b], v[a]) && a < b;
        });
        for (int64_t i = 0; i < k; ++i) row_idx[i] = static_cast<int32_t>(idx[i]);
      });
      for (int64_t i = 0; i < k; ++i) CopyElement(x, r * len + row_idx[i], results[0], r * k + i);
    }
  });
  return OkStatus();
}

// "chlo.top_k(%0, k = 5) : tensor<..> -> (tensor<..>, tensor<..xi32>)"
void PrintTopK(const Operation& op, OpPrinter& p) {
  p.Print("(");
  p.PrintOperand(op.operand(0));
  p.Print(", k = " + std::to_string(GetIntAttr(op.attrs(), "k", 0)) + ")");
  p.PrintOptionalAttrDict(op.attrs(), {"k"});
  p.Print(" : ");
  p.PrintType(op.operand(0).type());
  p.Print(" -> (");
  p.PrintType(op.result(0).type());
  p.Print(", ");
  p.PrintType(op.result(1).type());
  p.Print(")");
}

Status ParseTopK(OpParser& p, ParsedOp& op) {
  TL_RETURN_IF_ERROR(p.ParsePunct("("));
  TL_ASSIGN_OR_RETURN(Value v, p.ParseOperand());
  op.operands = {v};
  TL_RETURN_IF_ERROR(p.ParsePunct(","));
  TL_RETURN_IF_ERROR(p.ParseKeyword("k"));
  TL_RETURN_IF_ERROR(p.ParsePunct("="));
  TL_ASSIGN_OR_RETURN(int64_t k, p.ParseInteger());
  op.attrs["k"] = Attribute::Int(k, ElementType::kS64);
  TL_RETURN_IF_ERROR(p.ParsePunct(")"));
  TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
  TL_RETURN_IF_ERROR(p.ParsePunct(":"));
  std::vector<Type> inputs;
  return p.ParseFunctionalType(inputs, op.result_types);
}

// Copies `op` (and its regions) to the end of `block`, reading operands through `map`.
void CloneInto(const Operation& op, Block& block, std::map<ValueImpl*, Value>& map) {
  std::vector<Value> operands;
  for (Value v : op.operands()) operands.push_back(map.count(v.impl()) ? map[v.impl()] : v);
  auto clone = Operation::Create(op.def(), std::move(operands), op.result_types(), op.attrs(),
                                 op.num_regions());
  for (int i = 0; i < op.num_regions(); ++i)
    for (const auto& blk : op.region(i).blocks()) {
      Block& nb = clone->region(i).AddBlock();
      for (Value a : blk->arguments()) map[a.impl()] = nb.AddArgument(a.type());
      for (const auto& inner : blk->operations()) CloneInto(*inner, nb, map);
    }
  Operation* appended = block.Append(std::move(clone));
  for (int i = 0; i < op.num_results(); ++i) map[op.result(i).impl()] = appended->result(i);
}

// Sort permutes along one dimension, so each operand's cotangent is the result's cotangent
// permuted back. The permutation comes from sorting an iota along with the operands (the
// comparator ignores it; the sort is stable), and applying its inverse is one more sort: of
// (permutation, cotangent) by permutation.
StatusOr<std::vector<Value>> SortVjp(OpBuilder& b, const Operation& op, const std::vector<Value>& x,
                                     const std::vector<Value>&, const std::vector<Value>& ct) {
  std::vector<Value> grads(x.size());
  bool any_float = false;
  for (Value v : x) any_float = any_float || IsFloat(v.tensor_type().element_type);
  if (!any_float) return grads;
  const TensorType& t0 = x[0].tensor_type();
  const int64_t dim = NormalizeDim(GetIntAttr(op.attrs(), "dimension", -1), t0.rank());
  const TensorType index_type(ElementType::kS32, t0.dims), scalar_index(ElementType::kS32, {});
  Value iota = hlo::Iota(b, index_type, dim);
  auto comparator = std::make_unique<Region>();
  Block& blk = comparator->AddBlock();
  std::map<ValueImpl*, Value> map;
  for (Value a : op.region(0).front().arguments()) map[a.impl()] = blk.AddArgument(a.type());
  blk.AddArgument(scalar_index);
  blk.AddArgument(scalar_index);
  for (const auto& inner : op.region(0).front().operations()) CloneInto(*inner, blk, map);
  std::vector<Value> operands = x;
  operands.push_back(iota);
  std::vector<Value> sorted =
      hlo::Sort(b, operands, dim, /*is_stable=*/true, std::move(comparator));
  TL_RETURN_IF_ERROR(b.status());
  const Value perm = sorted.back();
  for (size_t i = 0; i < x.size(); ++i) {
    if (!IsFloat(x[i].tensor_type().element_type) || !ct[i]) continue;
    auto by_index = std::make_unique<Region>();
    Block& ib = by_index->AddBlock();
    Value lhs = ib.AddArgument(scalar_index), rhs = ib.AddArgument(scalar_index);
    ib.AddArgument(TensorType(ct[i].tensor_type().element_type, {}));
    ib.AddArgument(TensorType(ct[i].tensor_type().element_type, {}));
    OpBuilder rb(&ib);
    hlo::Return(rb, {hlo::Compare(rb, lhs, rhs, hlo::CompareDirection::kLt)});
    TL_RETURN_IF_ERROR(rb.status());
    std::vector<Value> back =
        hlo::Sort(b, {perm, ct[i]}, dim, /*is_stable=*/true, std::move(by_index));
    TL_RETURN_IF_ERROR(b.status());
    grads[i] = back[1];
  }
  return grads;
}

}  // namespace

void RegisterSortOps(OpRegistry& r) {
  {
    OpDef d;
    d.name = "stablehlo.sort";
    d.num_regions = 1;
    d.infer = InferSort;
    d.eval = EvalSort;
    d.vjp = SortVjp;
    r.Register(std::move(d));
  }
  {
    OpDef d;
    d.name = "chlo.top_k";
    d.infer = InferTopK;
    d.eval = EvalTopK;
    d.print = PrintTopK;
    d.parse = ParseTopK;
    r.Register(std::move(d));
  }
}

}  // namespace tlaloc::ops
