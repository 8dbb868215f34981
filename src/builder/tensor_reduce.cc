// Reductions and contractions: reduce, argmax, cumsum, dot_general, matmul, einsum.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "builder/internal.h"
#include "tlaloc/builder/composite.h"

namespace tlaloc {

using namespace builder_internal;

namespace builder_internal {

Tensor ReduceWith(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims,
                  hlo::BinaryFn body, double init) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  std::vector<int64_t> ax;
  for (int64_t a : axes) ax.push_back(NormalizeAxis(b, a, x.rank()));
  std::sort(ax.begin(), ax.end());
  ax.erase(std::unique(ax.begin(), ax.end()), ax.end());
  Tensor init_v = Scalar(*b, init, x.element_type());
  Tensor r = Wrap(b, hlo::Reduce(*b, x.value(), init_v.value(), ax, body));
  if (!keepdims) return r;
  std::vector<int64_t> d = x.dims();
  for (int64_t a : ax) d[a] = 1;
  return Reshape(r, d);
}

}  // namespace builder_internal

namespace {
double LowestOf(ElementType et) {
  if (IsFloat(et)) return -std::numeric_limits<double>::infinity();
  if (IsUnsignedInt(et) || et == ElementType::kPred) return 0;
  return -std::ldexp(1.0, BitWidth(et) - 1);
}
double HighestOf(ElementType et) {
  if (IsFloat(et)) return std::numeric_limits<double>::infinity();
  if (et == ElementType::kPred) return 1;
  if (IsUnsignedInt(et)) return std::ldexp(1.0, BitWidth(et)) - 1;
  return std::ldexp(1.0, BitWidth(et) - 1) - 1;
}
std::vector<int64_t> AllAxesIfEmpty(const Tensor& x, const std::vector<int64_t>& axes) {
  if (!axes.empty()) return axes;
  std::vector<int64_t> all;
  for (int64_t i = 0; i < x.rank(); ++i) all.push_back(i);
  return all;
}
}  // namespace

// An empty axes list reduces over every axis.
Tensor Sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return ReduceWith(x, AllAxesIfEmpty(x, axes), keepdims, hlo::Add, 0);
}
Tensor ReduceMax(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return ReduceWith(x, AllAxesIfEmpty(x, axes), keepdims, hlo::Max, LowestOf(x.element_type()));
}
Tensor ReduceMin(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return ReduceWith(x, AllAxesIfEmpty(x, axes), keepdims, hlo::Min, HighestOf(x.element_type()));
}
Tensor Mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  if (!x.valid()) return Tensor();
  int64_t count = 1;
  for (int64_t a : AllAxesIfEmpty(x, axes)) count *= x.dim(a);
  return Sum(x, axes, keepdims) / static_cast<double>(count);
}
Tensor Var(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  if (!x.valid()) return Tensor();
  Tensor centered = x - Mean(x, axes, true);
  return Mean(centered * centered, axes, keepdims);
}

Tensor LogSumExp(const Tensor& x, int64_t axis, bool keepdims) {
  if (!x.valid()) return Tensor();
  // Shift by the (finite) maximum for stability; an all -inf row gives -inf.
  Tensor m = ReduceMax(x, {axis}, true);
  Tensor finite_m = Where(Eq(Abs(m), FullLike(m, INFINITY)), FullLike(m, 0), m);
  Tensor r = Log(Sum(Exp(x - finite_m), {axis}, true)) + finite_m;
  return keepdims ? r : Squeeze(r, axis);
}

namespace {

// builder::Argmax's ops on x along axis `a`.
Tensor ArgmaxOps(const Tensor& x, int64_t a, ElementType index_type) {
  OpBuilder* b = x.builder();
  // The first position holding the maximum, NaN counting as the largest value (maximum
  // propagates NaN, and only NaN positions then match it). Two single-op reductions rather than
  // one variadic reduce with a compare-and-select body: every backend has fast paths for max
  // and min, while the variadic body is interpreted element by element (5.7 ms over a 151,936-id
  // vocabulary, a tenth of a decode step).
  Tensor m = ReduceMax(x, {a}, true);
  Tensor hit = Eq(x, m);
  if (IsFloat(x.element_type())) hit = hit | (Ne(x, x) & Ne(m, m));
  Tensor idx = Iota(*b, x.dims(), a, index_type);
  Tensor past_end = FullLike(idx, static_cast<double>(x.dim(a)));
  Tensor first = ReduceMin(Where(hit, idx, past_end), {a}, false);
  // An empty axis has no maximum; index 0, as a reduce from the initial (lowest, 0) pair gives.
  return x.dim(a) == 0 ? FullLike(first, 0) : first;
}

}  // namespace

Tensor Argmax(const Tensor& x, int64_t axis, ElementType index_type) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  int64_t a = NormalizeAxis(b, axis, x.rank());
  if (a < 0 || a >= x.rank() || x.dim(a) == 0) return ArgmaxOps(x, a, index_type);
  // The composite tlaloc.argmax (one pass per row in the interpreter: interp/fusion_argmax.cc),
  // one decomposition per types and axis.
  const std::string function = "tlaloc_argmax_" + CompositeTypeName(x.type()) + "_axis" +
                               std::to_string(a) + "_" + std::string(ShortName(index_type));
  AttrDict attributes;
  attributes["axis"] = Attribute::Int(a, ElementType::kS64);
  auto out = EmitComposite(kArgmaxComposite, {x}, std::move(attributes), function,
                           [a, index_type](const std::vector<Tensor>& args) {
                             return std::vector<Tensor>{ArgmaxOps(args[0], a, index_type)};
                           });
  return out.size() == 1 ? out[0] : Tensor();
}

Tensor Cumsum(const Tensor& x, int64_t axis) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  int64_t a = NormalizeAxis(b, axis, x.rank());
  int64_t n = x.dims()[a];
  std::vector<int64_t> window(x.rank(), 1), strides(x.rank(), 1);
  window[a] = n;
  std::vector<int64_t> pad(static_cast<size_t>(x.rank()) * 2, 0);
  pad[2 * a] = n - 1;
  Literal padding = Literal::FromVector<int64_t>({x.rank(), 2}, pad);
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(hlo::ScalarBinaryRegion(x.element_type(), hlo::Add));
  Tensor init_v = Scalar(*b, 0, x.element_type());
  return Wrap(b, b->CreateOne("stablehlo.reduce_window", {x.value(), init_v.value()},
                              {{"window_dimensions", I64Array(window)},
                               {"window_strides", I64Array(strides)},
                               {"padding", Attribute::Elements(padding)}},
                              std::nullopt, std::move(regions)));
}

Tensor DotGeneral(const Tensor& lhs, const Tensor& rhs, const std::vector<int64_t>& lhs_batch,
                  const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                  const std::vector<int64_t>& rhs_contract, ElementType result_type,
                  bool same_as_lhs) {
  OpBuilder* b = BuilderOf({&lhs, &rhs});
  if (!b || !lhs.valid() || !rhs.valid()) return Tensor();
  std::vector<int64_t> out;
  for (int64_t d : lhs_batch) out.push_back(lhs.dims()[d]);
  for (int64_t i = 0; i < lhs.rank(); ++i)
    if (std::find(lhs_batch.begin(), lhs_batch.end(), i) == lhs_batch.end() &&
        std::find(lhs_contract.begin(), lhs_contract.end(), i) == lhs_contract.end())
      out.push_back(lhs.dims()[i]);
  for (int64_t i = 0; i < rhs.rank(); ++i)
    if (std::find(rhs_batch.begin(), rhs_batch.end(), i) == rhs_batch.end() &&
        std::find(rhs_contract.begin(), rhs_contract.end(), i) == rhs_contract.end())
      out.push_back(rhs.dims()[i]);
  ElementType et = same_as_lhs ? lhs.element_type() : result_type;
  return Wrap(
      b, hlo::DotGeneral(*b, lhs.value(), rhs.value(),
                         {lhs_batch, rhs_batch, lhs_contract, rhs_contract}, TensorType(et, out)));
}

Tensor RaggedDot(const Tensor& x, const Tensor& w, const Tensor& group_sizes, int64_t w_contract,
                 ElementType result_type) {
  OpBuilder* b = BuilderOf({&x, &w, &group_sizes});
  if (!b || !x.valid() || !w.valid() || !group_sizes.valid()) return Tensor();
  if (x.rank() != 2 || w.rank() != 3 || (w_contract != 1 && w_contract != 2)) {
    b->Fail(InvalidArgument("RaggedDot: expected x [M, K] and w [G, K, N] or [G, N, K], got " +
                            x.type().ToString() + " and " + w.type().ToString()));
    return Tensor();
  }
  hlo::RaggedDotDimensionNumbers d;
  d.lhs_contracting = {1};
  d.rhs_contracting = {w_contract};
  d.lhs_ragged = {0};
  d.rhs_group = {0};
  const int64_t n = w.dims()[w_contract == 1 ? 2 : 1];
  return Wrap(b, hlo::RaggedDot(*b, x.value(), w.value(), group_sizes.value(), d,
                                TensorType(result_type, {x.dim(0), n})));
}

Tensor Matmul(const Tensor& a_in, const Tensor& b_in) {
  OpBuilder* b = BuilderOf({&a_in, &b_in});
  if (!b || !a_in.valid() || !b_in.valid()) return Tensor();
  Tensor a = a_in.rank() == 1 ? ExpandDims(a_in, 0) : a_in;
  Tensor c = b_in.rank() == 1 ? ExpandDims(b_in, 1) : b_in;
  std::vector<int64_t> ab(a.dims().begin(), a.dims().end() - 2);
  std::vector<int64_t> cb(c.dims().begin(), c.dims().end() - 2);
  std::vector<int64_t> batch = BroadcastShapes(b, ab, cb);
  auto with_batch = [&](const Tensor& t) {
    std::vector<int64_t> d = batch;
    d.push_back(t.dim(-2));
    d.push_back(t.dim(-1));
    return BroadcastTo(t, d);
  };
  a = with_batch(a);
  c = with_batch(c);
  int64_t nb = static_cast<int64_t>(batch.size());
  std::vector<int64_t> bd;
  for (int64_t i = 0; i < nb; ++i) bd.push_back(i);
  Tensor r = DotGeneral(a, c, bd, bd, {nb + 1}, {nb});
  if (a_in.rank() == 1) r = Squeeze(r, -2);
  if (b_in.rank() == 1) r = Squeeze(r, -1);
  return r;
}

Tensor Einsum(const std::string& spec, const Tensor& a_in, const Tensor& b_in) {
  OpBuilder* b = BuilderOf({&a_in, &b_in});
  if (!b || !a_in.valid() || !b_in.valid()) return Tensor();
  auto arrow = spec.find("->");
  auto comma = spec.find(',');
  if (arrow == std::string::npos || comma == std::string::npos || comma > arrow) {
    b->Fail(InvalidArgument("Einsum: expected \"ab,bc->ac\", got \"" + spec + "\""));
    return Tensor();
  }
  std::string la = spec.substr(0, comma), lb = spec.substr(comma + 1, arrow - comma - 1),
              lo = spec.substr(arrow + 2);
  if (static_cast<int64_t>(la.size()) != a_in.rank() ||
      static_cast<int64_t>(lb.size()) != b_in.rank()) {
    b->Fail(InvalidArgument("Einsum: \"" + spec + "\" does not match the operand ranks"));
    return Tensor();
  }
  // Sum out letters that appear in one operand only and not in the output.
  auto presum = [&](Tensor t, std::string& labels, const std::string& other) {
    std::vector<int64_t> axes;
    std::string kept;
    for (size_t i = 0; i < labels.size(); ++i) {
      char c = labels[i];
      if (other.find(c) == std::string::npos && lo.find(c) == std::string::npos)
        axes.push_back(static_cast<int64_t>(i));
      else
        kept += c;
    }
    labels = kept;
    return axes.empty() ? t : Sum(t, axes);
  };
  Tensor a = presum(a_in, la, lb), c = presum(b_in, lb, la);
  std::vector<int64_t> ab, cbt, ac, cc;
  std::string batch, afree, cfree;
  for (size_t i = 0; i < la.size(); ++i) {
    char ch = la[i];
    size_t j = lb.find(ch);
    if (j == std::string::npos) {
      afree += ch;
    } else if (lo.find(ch) != std::string::npos) {
      batch += ch;
      ab.push_back(static_cast<int64_t>(i));
      cbt.push_back(static_cast<int64_t>(j));
    } else {
      ac.push_back(static_cast<int64_t>(i));
      cc.push_back(static_cast<int64_t>(j));
    }
  }
  for (char ch : lb)
    if (la.find(ch) == std::string::npos) cfree += ch;
  Tensor r = DotGeneral(a, c, ab, cbt, ac, cc);
  std::string got = batch + afree + cfree;
  if (got.size() != lo.size()) {
    b->Fail(InvalidArgument("Einsum: output \"" + lo + "\" does not match the inputs"));
    return Tensor();
  }
  std::vector<int64_t> perm;
  for (char ch : lo) {
    size_t p = got.find(ch);
    if (p == std::string::npos) {
      b->Fail(
          InvalidArgument(std::string("Einsum: output letter '") + ch + "' is not in the inputs"));
      return Tensor();
    }
    perm.push_back(static_cast<int64_t>(p));
  }
  return Transpose(r, perm);
}

}  // namespace tlaloc
