// The program form of GGUF packed-weight products (gguf_linear.h): the dequantisation written as
// StableHLO, step for step the arithmetic of llama.cpp's dequantize_row_q4_0 / q4_K / q6_K
// (io/gguf_dequant.cc) and of the interpreter's kernel (cpu/matmul_gguf4.cc), so running the
// decomposition op by op gives the kernel's bits.
#include "tlaloc/nn/gguf_linear.h"

#include <string>

namespace tlaloc::nn {

namespace {

std::string DimsName(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s.empty() ? "scalar" : s;
}

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

// The decomposition on x [M..., K], q, scale -> [M..., N].
Status BuildDecomposition(Module* module, const std::string& name, const TensorType& xt,
                          const TensorType& qt, const TensorType& st) {
  FunctionBuilder fb(module, name, {Type(xt), Type(qt), Type(st)});
  fb.function()->set_public(false);
  Tensor w = GgufDequantize(fb.arg(1), fb.arg(2));
  const int64_t last = static_cast<int64_t>(xt.dims.size()) - 1;
  return fb.Return({DotGeneral(fb.arg(0), w, {}, {}, {last}, {1})});
}

}  // namespace

std::string_view GgufFormatName(GgufFormat f) {
  switch (f) {
    case GgufFormat::kQ4_0:
      return "q4_0";
    case GgufFormat::kQ4_K:
      return "q4_k";
    case GgufFormat::kQ6_K:
      return "q6_k";
  }
  return "?";
}

std::optional<GgufFormat> ParseGgufFormat(std::string_view name) {
  for (GgufFormat f : {GgufFormat::kQ4_0, GgufFormat::kQ4_K, GgufFormat::kQ6_K})
    if (GgufFormatName(f) == name) return f;
  return std::nullopt;
}

std::pair<TensorType, TensorType> GgufPackedTypes(GgufFormat f, int64_t n, int64_t k) {
  switch (f) {
    case GgufFormat::kQ4_0:
      return {TensorType(ElementType::kU8, {n, k / 2}), TensorType(ElementType::kF16, {n, k / 32})};
    case GgufFormat::kQ4_K:
      return {TensorType(ElementType::kU8, {n, k / 2}),
              TensorType(ElementType::kF32, {n, k / 32, 2})};
    case GgufFormat::kQ6_K:
      return {TensorType(ElementType::kU8, {n, k / 256, 192}),
              TensorType(ElementType::kF32, {n, k / 16})};
  }
  return {};
}

std::optional<GgufPackedInfo> GgufFormatOf(const TensorType& q, const TensorType& s) {
  if (q.element_type != ElementType::kU8 || q.dims.empty() || s.dims.empty()) return std::nullopt;
  // Leading dimensions: all of q's but the packed ones, equal to the scale's.
  auto lead_equal = [&](size_t q_tail, size_t s_tail) {
    if (q.dims.size() < q_tail || s.dims.size() < s_tail) return false;
    const size_t lead = q.dims.size() - q_tail;
    if (s.dims.size() - s_tail != lead) return false;
    for (size_t i = 0; i < lead; ++i)
      if (q.dims[i] != s.dims[i]) return false;
    return true;
  };
  const int64_t qlast = q.dims.back(), slast = s.dims.back();
  if (s.element_type == ElementType::kF16 && lead_equal(1, 1) && slast > 0 && qlast == slast * 16)
    return GgufPackedInfo{GgufFormat::kQ4_0, slast * 32};
  if (s.element_type == ElementType::kF32 && s.dims.size() >= 2 && slast == 2 && lead_equal(1, 2)) {
    const int64_t groups = s.dims[s.dims.size() - 2];
    if (groups > 0 && groups % 8 == 0 && qlast == groups * 16)
      return GgufPackedInfo{GgufFormat::kQ4_K, groups * 32};
  }
  if (s.element_type == ElementType::kF32 && q.dims.size() >= 2 && qlast == 192 &&
      lead_equal(2, 1)) {
    const int64_t blocks = q.dims[q.dims.size() - 2];
    if (blocks > 0 && slast == blocks * 16) return GgufPackedInfo{GgufFormat::kQ6_K, blocks * 256};
  }
  return std::nullopt;
}

Tensor GgufDequantize(const Tensor& q, const Tensor& scale) {
  OpBuilder* b = q.builder();
  if (!b || !q.valid() || !scale.valid()) return Tensor();
  const auto info = GgufFormatOf(q.type(), scale.type());
  if (!info) {
    b->Fail(InvalidArgument("GgufDequantize: weight " + q.type().ToString() + " and scales " +
                            scale.type().ToString() +
                            " are no GGUF packed layout (q4_0: u8 [..., K/2] with f16 [..., K/32]; "
                            "q4_k: u8 [..., K/2] with f32 [..., K/32, 2]; q6_k: u8 [..., K/256, "
                            "192] with f32 [..., K/16])"));
    return Tensor();
  }
  const int64_t k = info->k;
  const size_t lead = scale.rank() - (info->format == GgufFormat::kQ4_K ? 2 : 1);
  const int64_t r = Product(scale.dims(), lead);
  std::vector<int64_t> out(scale.dims().begin(), scale.dims().begin() + lead);
  out.push_back(k);
  auto bcast = [&](const Tensor& s, int64_t group) {  // s f32 [R, K / group] -> [R, K/group, group]
    return BroadcastInDim(s, {r, k / group, group}, {0, 1});
  };
  Tensor w;
  switch (info->format) {
    case GgufFormat::kQ4_0: {
      Tensor nib = Reshape(Nibbles(Reshape(q, {r, k / 32, 16})), {r, k / 32, 32});
      Tensor d = Convert(Reshape(scale, {r, k / 32}), ElementType::kF32);
      w = (Convert(nib, ElementType::kF32) - 8.0) * bcast(d, 32);
      break;
    }
    case GgufFormat::kQ4_K: {
      Tensor nib = Reshape(Nibbles(Reshape(q, {r, k / 64, 32})), {r, k / 32, 32});
      Tensor s = Reshape(scale, {r, k / 32, 2});
      Tensor d = Reshape(SliceAxis(s, 2, 0, 1), {r, k / 32});
      Tensor m = Reshape(SliceAxis(s, 2, 1, 2), {r, k / 32});
      w = Convert(nib, ElementType::kF32) * bcast(d, 32) - bcast(m, 32);
      break;
    }
    case GgufFormat::kQ6_K: {
      const int64_t nb = k / 256;
      Tensor blocks = Reshape(q, {r, nb, 192});
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
      Tensor q6 = Reshape(nib | high, {r, k / 16, 16});
      w = (Convert(q6, ElementType::kF32) - 32.0) * bcast(Reshape(scale, {r, k / 16}), 16);
      break;
    }
  }
  return Reshape(w, out);
}

Tensor GgufLinear(const Tensor& x, const Tensor& q, const Tensor& scale) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid() || !q.valid() || !scale.valid()) return Tensor();
  const auto info = GgufFormatOf(q.type(), scale.type());
  if (x.element_type() != ElementType::kF32 || !info || x.rank() < 1 || x.dim(-1) != info->k ||
      q.dims()[0] != scale.dims()[0] ||
      scale.rank() != (info->format == GgufFormat::kQ4_K ? 3 : 2)) {
    b->Fail(InvalidArgument("GgufLinear: x " + x.type().ToString() + ", weight " +
                            q.type().ToString() + ", scales " + scale.type().ToString() +
                            ": expected f32 [..., K] and one matrix [N, K] in a GGUF packed "
                            "layout (nn/gguf_linear.h)"));
    return Tensor();
  }
  if (b->module() == nullptr) {
    const int64_t last = x.rank() - 1;
    return DotGeneral(x, GgufDequantize(q, scale), {}, {}, {last}, {1});
  }
  const std::string fmt(GgufFormatName(info->format));
  const std::string name =
      "tlaloc_gguf_linear_" + fmt + "_" + DimsName(x.dims()) + "_" + DimsName(q.dims());
  if (b->module()->Find(name) == nullptr) {
    Status s = BuildDecomposition(b->module(), name, x.type(), q.type(), scale.type());
    if (!s.ok()) {
      b->Fail(s.WithContext("the decomposition of " + std::string(kGgufLinearComposite)));
      return Tensor();
    }
  }
  std::vector<int64_t> out = x.dims();
  out.back() = q.dim(0);
  AttrDict attributes;
  attributes["format"] = Attribute::String(fmt);
  AttrDict attrs;
  attrs["name"] = Attribute::String(kGgufLinearComposite);
  attrs["composite_attributes"] = Attribute::Dict(std::move(attributes));
  attrs["decomposition"] = Attribute::Symbol(name);
  attrs["version"] = Attribute::Int(1, ElementType::kS32);
  return Tensor(
      b->CreateOne("stablehlo.composite", {x.value(), q.value(), scale.value()}, std::move(attrs),
                   std::vector<Type>{Type(TensorType(ElementType::kF32, out))}),
      b);
}

}  // namespace tlaloc::nn
