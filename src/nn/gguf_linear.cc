// The program form of GGUF packed-weight products (gguf_linear.h): the dequantisation written as
// StableHLO, step for step the arithmetic of llama.cpp's dequantize_row_q4_0 / q4_K / q6_K
// (io/gguf_dequant.cc) and of the interpreter's kernel (cpu/matmul_gguf4.cc), so running the
// decomposition op by op gives the kernel's bits.
#include "tlaloc/nn/gguf_linear.h"

#include <string>

#include "tlaloc/builder/composite.h"

namespace tlaloc::nn {

namespace {

int64_t Product(const std::vector<int64_t>& dims, size_t count) {
  int64_t p = 1;
  for (size_t i = 0; i < count; ++i) p *= dims[i];
  return p;
}

// Nibbles of q [R, G, B] u8: [R, G, 2, B] (low nibbles, then high), as u8.
Tensor Nibbles(const Tensor& q) {
  OpBuilder& b = *q.builder();
  std::vector<int64_t> d = q.dims();
  const std::vector<int64_t> one = {d[0], d[1], 1, d[2]};
  Tensor lo = q & Scalar(b, 15, ElementType::kU8);
  Tensor hi = ShiftRightLogical(q, Scalar(b, 4, ElementType::kU8));
  return Concat({Reshape(lo, one), Reshape(hi, one)}, 2);
}

}  // namespace

std::optional<GgufFormat> ParseGgufFormat(std::string_view name) {
  const auto f = FindQuantFormat(name);
  if (!f || *f == QuantFormat::kQ8_0) return std::nullopt;
  return f;
}

std::pair<TensorType, TensorType> GgufPackedTypes(GgufFormat f, int64_t n, int64_t k) {
  auto types = QuantStorageTypes(f, {n, k});
  return types.ok() ? *types : std::pair<TensorType, TensorType>{};
}

std::optional<GgufPackedInfo> GgufFormatOf(const TensorType& q, const TensorType& s) {
  const auto info = QuantFormatOf(q, s);
  if (!info || info->format == QuantFormat::kQ8_0) return std::nullopt;
  return info;
}

Tensor GgufDequantize(const Tensor& q, const Tensor& scale) {
  OpBuilder* b = q.builder();
  if (!b || !q.valid() || !scale.valid()) return Tensor();
  const auto info = GgufFormatOf(q.type(), scale.type());
  if (!info) {
    b->Fail(InvalidArgument(
        "GgufDequantize: weight " + q.type().ToString() + " and scales " + scale.type().ToString() +
        " are no GGUF packed layout (" + QuantLayoutText(QuantFormat::kQ4_0) + "; " +
        QuantLayoutText(QuantFormat::kQ4_K) + "; " + QuantLayoutText(QuantFormat::kQ6_K) + ")"));
    return Tensor();
  }
  const int64_t k = info->k;
  const QuantFormatInfo& traits = QuantTraits(info->format);
  const size_t lead = scale.rank() - (traits.scale_pairs ? 2 : 1);
  const int64_t r = Product(scale.dims(), lead);
  std::vector<int64_t> out(scale.dims().begin(), scale.dims().begin() + lead);
  out.push_back(k);
  auto bcast = [&](const Tensor& s, int64_t group) {  // s f32 [R, K / group] -> [R, K/group, group]
    return BroadcastInDim(s, {r, k / group, group}, {0, 1});
  };
  const int64_t g = traits.scale_group;  // elements a scale covers
  Tensor w;
  switch (info->format) {
    case QuantFormat::kQ4_0: {  // a group's 16 bytes: its low nibbles, then its high ones
      Tensor nib = Reshape(Nibbles(Reshape(q, {r, k / g, g / 2})), {r, k / g, g});
      Tensor d = Convert(Reshape(scale, {r, k / g}), ElementType::kF32);
      w = (Convert(nib, ElementType::kF32) - 8.0) * bcast(d, g);
      break;
    }
    case QuantFormat::kQ4_K: {  // 32 bytes hold two groups: low nibbles the first, high the next
      Tensor nib = Reshape(Nibbles(Reshape(q, {r, k / (2 * g), g})), {r, k / g, g});
      Tensor s = Reshape(scale, {r, k / g, 2});
      Tensor d = Reshape(SliceAxis(s, 2, 0, 1), {r, k / g});
      Tensor m = Reshape(SliceAxis(s, 2, 1, 2), {r, k / g});
      w = Convert(nib, ElementType::kF32) * bcast(d, g) - bcast(m, g);
      break;
    }
    case QuantFormat::kQ6_K: {
      const int64_t nb = k / traits.block;
      Tensor blocks = Reshape(q, {r, nb, traits.quant_bytes});
      // ql [R, NB, half, j, 32]: byte l of the half's first or second 32; element 32 i + l of a
      // half takes ql[j = i % 2]'s low (i < 2) or high nibble and bits 2i, 2i+1 of qh[l].
      Tensor ql = Reshape(SliceAxis(blocks, 2, 0, 128), {r, nb, 2, 2, 32});
      Tensor qh = Reshape(SliceAxis(blocks, 2, 128, 192), {r, nb, 2, 32});
      const std::vector<int64_t> full = {r, nb, 2, 4, 32};
      Tensor lo = ql & Scalar(*b, 15, ElementType::kU8);
      Tensor hi = ShiftRightLogical(ql, Scalar(*b, 4, ElementType::kU8));
      Tensor nib = Concat({lo, hi}, 3);
      Tensor shift = Iota(*b, full, 3, ElementType::kU8) * Full(*b, full, 2, ElementType::kU8);
      Tensor high = ShiftLeft(ShiftRightLogical(BroadcastInDim(qh, full, {0, 1, 2, 4}), shift) &
                                  Scalar(*b, 3, ElementType::kU8),
                              Scalar(*b, 4, ElementType::kU8));
      Tensor q6 = Reshape(nib | high, {r, k / g, g});
      w = (Convert(q6, ElementType::kF32) - 32.0) * bcast(Reshape(scale, {r, k / g}), g);
      break;
    }
    case QuantFormat::kQ8_0:  // GgufFormatOf never names it
      return Tensor();
  }
  return Reshape(w, out);
}

Tensor GgufLinear(const Tensor& x, const Tensor& q, const Tensor& scale) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid() || !q.valid() || !scale.valid()) return Tensor();
  const auto info = GgufFormatOf(q.type(), scale.type());
  if (x.element_type() != ElementType::kF32 || !info || x.rank() < 1 || x.dim(-1) != info->k ||
      q.dims()[0] != scale.dims()[0] ||
      scale.rank() != (QuantTraits(info->format).scale_pairs ? 3 : 2)) {
    b->Fail(InvalidArgument("GgufLinear: x " + x.type().ToString() + ", weight " +
                            q.type().ToString() + ", scales " + scale.type().ToString() +
                            ": expected f32 [..., K] and one matrix [N, K] in a GGUF packed "
                            "layout (nn/gguf_linear.h)"));
    return Tensor();
  }
  const std::string fmt(GgufFormatName(info->format));
  // One decomposition per format and operand types, shared by every matrix of that shape.
  const std::string function = "tlaloc_gguf_linear_" + fmt + "_" + CompositeTypeName(x.type()) +
                               "_" + CompositeTypeName(q.type()) + "_" +
                               CompositeTypeName(scale.type());
  AttrDict attributes;
  attributes["format"] = Attribute::String(fmt);
  // Without a module EmitComposite emits the body in place.
  auto out = EmitComposite(kGgufLinearComposite, {x, q, scale}, std::move(attributes), function,
                           [](const std::vector<Tensor>& a) {
                             const int64_t last = a[0].rank() - 1;
                             return std::vector<Tensor>{
                                 DotGeneral(a[0], GgufDequantize(a[1], a[2]), {}, {}, {last}, {1})};
                           });
  return out.size() == 1 ? out[0] : Tensor();
}

}  // namespace tlaloc::nn
