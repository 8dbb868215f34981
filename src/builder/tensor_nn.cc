// Neural-network conveniences built from the ops: softmax, norms, activations, lookups, top-k.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "builder/internal.h"
#include "tlaloc/builder/composite.h"

namespace tlaloc {

using namespace builder_internal;

Tensor Softmax(const Tensor& x, int64_t axis) {
  if (!x.valid()) return Tensor();
  Tensor e = Exp(x - ReduceMax(x, {axis}, true));
  return e / Sum(e, {axis}, true);
}

Tensor MaskedSoftmax(const Tensor& x, const Tensor& mask,
                     const std::vector<int64_t>& broadcast_dimensions, double fill) {
  if (!x.valid() || !mask.valid()) return Tensor();
  // One decomposition per types, broadcast and f32 fill (the fill enters as an f32 constant, so
  // its f32 bits name it): every attention layer of a model shares it.
  const float fill32 = static_cast<float>(fill);
  uint32_t fill_bits = 0;
  std::memcpy(&fill_bits, &fill32, sizeof fill_bits);
  char fill_hex[9];
  std::snprintf(fill_hex, sizeof fill_hex, "%08x", fill_bits);
  std::string function =
      "tlaloc_masked_softmax_" + CompositeTypeName(x.type()) + "_" + CompositeTypeName(mask.type());
  for (int64_t d : broadcast_dimensions) function += "_" + std::to_string(d);
  function += std::string("_fill") + fill_hex;
  AttrDict attributes;
  attributes["broadcast_dimensions"] = Attribute::IntArray(broadcast_dimensions);
  attributes["fill"] = Attribute::Float(fill, ElementType::kF64);
  auto out =
      EmitComposite(kMaskedSoftmaxComposite, {x, mask}, std::move(attributes), function,
                    [broadcast_dimensions, fill](const std::vector<Tensor>& a) {
                      Tensor m = BroadcastInDim(a[1], a[0].dims(), broadcast_dimensions);
                      return std::vector<Tensor>{Softmax(Where(m, a[0], FullLike(a[0], fill)), -1)};
                    });
  return out.size() == 1 ? out[0] : Tensor();
}

Tensor LogSoftmax(const Tensor& x, int64_t axis) {
  if (!x.valid()) return Tensor();
  Tensor shifted = x - ReduceMax(x, {axis}, true);
  return shifted - Log(Sum(Exp(shifted), {axis}, true));
}

Tensor RmsNorm(const Tensor& x, const Tensor& weight, double eps) {
  if (!x.valid() || !weight.valid()) return Tensor();
  // One decomposition per (x, weight) types and f32 eps: every norm of a model with those types
  // shares it. eps enters the chain as an f32 constant, so its f32 bits name it.
  const float eps32 = static_cast<float>(eps);
  uint32_t eps_bits = 0;
  std::memcpy(&eps_bits, &eps32, sizeof eps_bits);
  char eps_hex[9];
  std::snprintf(eps_hex, sizeof eps_hex, "%08x", eps_bits);
  const std::string function = "tlaloc_rms_norm_" + CompositeTypeName(x.type()) + "_" +
                               CompositeTypeName(weight.type()) + "_eps" + eps_hex;
  AttrDict attributes;
  attributes["eps"] = Attribute::Float(eps, ElementType::kF64);
  auto out =
      EmitComposite(kRmsNormComposite, {x, weight}, std::move(attributes), function,
                    [eps](const std::vector<Tensor>& a) {
                      Tensor xf = Convert(a[0], ElementType::kF32);
                      Tensor normed = xf * Rsqrt(Mean(xf * xf, {-1}, true) + eps);
                      return std::vector<Tensor>{Convert(normed, a[0].element_type()) * a[1]};
                    });
  return out.size() == 1 ? out[0] : Tensor();
}

Tensor Silu(const Tensor& x) { return x * Logistic(x); }

Tensor Gelu(const Tensor& x, bool tanh_approximation) {
  if (!x.valid()) return Tensor();
  if (tanh_approximation) {
    const double k = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + Tanh(k * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + Erf(x * (1.0 / std::sqrt(2.0))));
}

Tensor OneHot(const Tensor& indices, int64_t depth, ElementType et) {
  OpBuilder* b = indices.builder();
  if (!b || !indices.valid()) return Tensor();
  std::vector<int64_t> d = indices.dims();
  d.push_back(depth);
  Tensor ids = Iota(*b, d, static_cast<int64_t>(d.size()) - 1, indices.element_type());
  Tensor hit = Eq(ExpandDims(indices, -1), ids);
  return Convert(hit, et);
}

Tensor Take(const Tensor& table, const Tensor& indices) {
  if (!table.valid() || !indices.valid()) return Take(table, indices, {});
  std::vector<int64_t> row_dims;
  for (int64_t i = 1; i < table.rank(); ++i) row_dims.push_back(indices.rank() + i - 1);
  return Take(table, indices, row_dims);
}

Tensor Take(const Tensor& table, const Tensor& indices, const std::vector<int64_t>& row_dims) {
  OpBuilder* b = BuilderOf({&table, &indices});
  if (!b || !table.valid() || !indices.valid()) return Tensor();
  int64_t ir = indices.rank();
  const int64_t rank = ir + table.rank() - 1;
  bool ok = static_cast<int64_t>(row_dims.size()) == table.rank() - 1;
  for (size_t i = 0; ok && i < row_dims.size(); ++i)
    ok = row_dims[i] >= 0 && row_dims[i] < rank && (i == 0 || row_dims[i] > row_dims[i - 1]);
  if (!ok) {
    std::string dims_text;
    for (int64_t d : row_dims) dims_text += (dims_text.empty() ? "" : ", ") + std::to_string(d);
    b->Fail(InvalidArgument("Take: row_dims [" + dims_text + "] for table " +
                            table.type().ToString() + " and indices " + indices.type().ToString() +
                            " (expected " + std::to_string(table.rank() - 1) +
                            " ascending result dims below " + std::to_string(rank) + ")"));
    return Tensor();
  }
  std::vector<int64_t> offset_dims = row_dims, slice_sizes{1}, out;
  for (int64_t i = 1; i < table.rank(); ++i) slice_sizes.push_back(table.dims()[i]);
  for (int64_t r = 0, next_row = 1, next_index = 0; r < rank; ++r)
    out.push_back(std::find(row_dims.begin(), row_dims.end(), r) != row_dims.end()
                      ? table.dims()[next_row++]
                      : indices.dims()[next_index++]);
  AttrDict dn{
      {"offset_dims", I64Array(offset_dims)},  {"collapsed_slice_dims", I64Array({0})},
      {"operand_batching_dims", I64Array({})}, {"start_indices_batching_dims", I64Array({})},
      {"start_index_map", I64Array({0})},      {"index_vector_dim", I64(ir)}};
  return Wrap(b, b->CreateOne("stablehlo.gather", {table.value(), indices.value()},
                              {{"dimension_numbers", Attribute::Struct("stablehlo.gather", dn)},
                               {"slice_sizes", I64Array(slice_sizes)},
                               {"indices_are_sorted", Attribute::Bool(false)}},
                              std::vector<Type>{TensorType(table.element_type(), out)}));
}

std::pair<Tensor, Tensor> TopK(const Tensor& x, int64_t k) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return {};
  int64_t axis = x.rank() - 1;
  if (k < 0 || k > x.dim(-1)) {
    b->Fail(InvalidArgument("TopK: k=" + std::to_string(k) + " is out of range for size " +
                            std::to_string(x.dim(-1))));
    return {};
  }
  Tensor idx = Iota(*b, x.dims(), axis, ElementType::kS32);
  // Comparator: descending by value (NaN first, as the largest); the stable sort keeps the
  // lower index first among equal values.
  auto region = std::make_unique<Region>();
  Block& blk = region->AddBlock();
  TensorType sv(x.element_type(), {}), si(ElementType::kS32, {});
  Value a0 = blk.AddArgument(sv), a1 = blk.AddArgument(sv);
  blk.AddArgument(si);
  blk.AddArgument(si);
  OpBuilder rb(&blk);
  const char* type = IsFloat(x.element_type())       ? "TOTALORDER"
                     : IsSignedInt(x.element_type()) ? "SIGNED"
                                                     : "UNSIGNED";
  Value gt = rb.CreateOne("stablehlo.compare", {a0, a1},
                          {{"comparison_direction", Attribute::Enum("GT", "comparison_direction")},
                           {"compare_type", Attribute::Enum(type, "comparison_type")}});
  hlo::Return(rb, {gt});
  if (!rb.ok()) {
    b->Fail(rb.status());
    return {};
  }
  auto sorted =
      hlo::Sort(*b, {x.value(), idx.value()}, axis, /*is_stable=*/true, std::move(region));
  if (sorted.size() != 2) return {};
  return {SliceAxis(Wrap(b, sorted[0]), -1, 0, k), SliceAxis(Wrap(b, sorted[1]), -1, 0, k)};
}

}  // namespace tlaloc
