// Transformer layers from builder ops. Numerics follow Hugging Face transformers' Qwen3 code:
// norms, rotary angles, attention scores and softmax in f32; everything else in the model type
// (the attention probabilities too, before they meet V).
#include "tlaloc/nn/layers.h"

#include <cmath>

#include "tlaloc/builder/composite.h"
#include "tlaloc/nn/gguf_linear.h"
#include "tlaloc/nn/int8_linear.h"
#include "tlaloc/nn/paged_attention.h"

namespace tlaloc::nn {

std::vector<LayerRecord> LayerTrace::Find(std::string_view kernel) const {
  std::vector<LayerRecord> out;
  for (const auto& r : records_)
    if (r.kernel == kernel) out.push_back(r);
  return out;
}

LayerScope::LayerScope(LayerTrace* trace, OpBuilder* b, std::string_view kernel, std::string path,
                       std::map<std::string, double> attributes)
    : trace_(trace), b_(b) {
  if (!trace_ || !b_) return;
  index_ = trace_->records_.size();
  LayerRecord r;
  r.kernel = std::string(kernel);
  r.path = std::move(path);
  r.attributes = std::move(attributes);
  r.block = b_->block();
  r.begin_op = b_->block()->operations().size();
  trace_->records_.push_back(std::move(r));
}

LayerScope::~LayerScope() {
  if (!trace_ || !b_) return;
  trace_->records_[index_].end_op = b_->block()->operations().size();
}

namespace {
bool IsLowPrecision(ElementType et) { return et == ElementType::kBF16 || et == ElementType::kF16; }

Tensor ToF32(const Tensor& x) {
  return x.element_type() == ElementType::kF32 ? x : Convert(x, ElementType::kF32);
}
}  // namespace

Tensor DequantizeInt8(const Tensor& q, const Tensor& scale) {
  OpBuilder* b = q.builder();
  if (!b || !q.valid() || !scale.valid()) return Tensor();
  const int64_t rank = q.rank(), k = rank > 0 ? q.dim(-1) : 0;
  const int64_t blocks = rank > 0 ? scale.dim(-1) : 0;
  std::vector<int64_t> lead(q.dims().begin(), q.dims().end() - (rank > 0 ? 1 : 0));
  std::vector<int64_t> scale_lead(scale.dims().begin(), scale.dims().end() - (rank > 0 ? 1 : 0));
  if (rank < 1 || scale.rank() != rank || lead != scale_lead || blocks <= 0 || k % blocks != 0 ||
      q.element_type() != ElementType::kS8) {
    b->Fail(InvalidArgument("DequantizeInt8: weight " + q.type().ToString() + " and scales " +
                            scale.type().ToString() +
                            ": expected s8 [..., K] and scales [..., K / block]"));
    return Tensor();
  }
  std::vector<int64_t> blocked = lead;
  blocked.push_back(blocks);
  blocked.push_back(k / blocks);
  std::vector<int64_t> keep(rank);
  for (int64_t d = 0; d < rank; ++d) keep[d] = d;
  Tensor values = Convert(Reshape(q, blocked), ElementType::kF32);
  Tensor scales = BroadcastInDim(ToF32(scale), blocked, keep);
  return Reshape(values * scales, q.dims());
}

Tensor Embedding(const Tensor& table, const Tensor& ids, LayerTrace* trace, const std::string& path,
                 const Tensor& int8_scale) {
  LayerScope scope(trace, table.builder(), kEmbeddingLayer, path);
  // GGUF packed rows (u8) are unpacked after the gather, like int8 rows.
  if (int8_scale.valid() && table.element_type() == ElementType::kU8)
    return GgufDequantize(Take(table, ids), Take(int8_scale, ids));
  if (int8_scale.valid()) return DequantizeInt8(Take(table, ids), Take(int8_scale, ids));
  return Take(table, ids);
}

Tensor Linear(const Tensor& x, const Tensor& weight, LayerTrace* trace, const std::string& path,
              const Tensor& int8_scale) {
  LayerScope scope(trace, x.builder(), kLinearLayer, path);
  if (!x.valid() || !weight.valid()) return Tensor();
  const int64_t last = x.rank() - 1;
  if (int8_scale.valid() && weight.element_type() == ElementType::kU8) {
    // A GGUF 4/6-bit matrix kept packed: the tlaloc.gguf_linear composite.
    Tensor y = GgufLinear(ToF32(x), weight, int8_scale);
    return y.element_type() == x.element_type() ? y : Convert(y, x.element_type());
  }
  if (int8_scale.valid()) {
    auto form = CurrentInt8Form();
    if (!form.ok()) {
      x.builder()->Fail(form.status());
      return Tensor();
    }
    // The q8_0 composite takes 32-blocks of f16 scales on a module's builder; other int8 weights
    // keep the exact form.
    const int64_t k = x.dim(-1);
    if (*form == Int8Form::kQ8_0 && x.builder()->module() != nullptr && weight.rank() == 2 &&
        int8_scale.rank() == 2 && int8_scale.element_type() == ElementType::kF16 &&
        k % kQ8_0BlockElements == 0 && int8_scale.dim(1) * kQ8_0BlockElements == k) {
      Tensor y = Int8LinearQ8_0(ToF32(x), weight, int8_scale);
      return y.element_type() == x.element_type() ? y : Convert(y, x.element_type());
    }
    // The exact form: f32 activations times the dequantised matrix, as a composite.
    Tensor y = Int8LinearExact(ToF32(x), weight, int8_scale);
    return y.element_type() == x.element_type() ? y : Convert(y, x.element_type());
  }
  // x [..., in] . weight [out, in] over `in` is [..., out] directly: the interpreter reads the
  // weight in its stored layout (no copy, no transpose of either operand).
  if (IsLowPrecision(x.element_type())) {
    // Products of two bf16/f16 values are exact in f32, so an f32-result contraction is the
    // f32-accumulated product; it is rounded to the model type once.
    return Convert(DotGeneral(x, weight, {}, {}, {last}, {1}, ElementType::kF32,
                              /*same_as_lhs=*/false),
                   x.element_type());
  }
  return DotGeneral(x, weight, {}, {}, {last}, {1});
}

Tensor RmsNormLayer(const Tensor& x, const Tensor& weight, double eps, LayerTrace* trace,
                    const std::string& path) {
  LayerScope scope(trace, x.builder(), kRmsNormLayer, path, {{"eps", eps}});
  return RmsNorm(x, weight, eps);
}

std::pair<Tensor, Tensor> RotaryTables(const Tensor& positions, int64_t head_dim, double theta) {
  OpBuilder* b = positions.builder();
  if (!b || !positions.valid()) return {};
  int64_t half = head_dim / 2;
  std::vector<float> inv(half);
  for (int64_t i = 0; i < half; ++i) {
    // transformers: 1 / theta ** (arange(0, d, 2).float() / d), in f32.
    float expo = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv[i] = 1.0f / static_cast<float>(std::pow(theta, static_cast<double>(expo)));
  }
  Tensor inv_freq = Constant(*b, Literal::FromVector<float>({half}, inv));
  Tensor pos = ExpandDims(Convert(positions, ElementType::kF32), -1);
  Tensor angles = pos * inv_freq;  // [P..., half]
  Tensor emb = Concat({angles, angles}, -1);
  return {Cos(emb), Sin(emb)};
}

Tensor ApplyRotary(const Tensor& x, const Tensor& cos, const Tensor& sin, LayerTrace* trace,
                   const std::string& path) {
  LayerScope scope(trace, x.builder(), kRotaryEmbeddingLayer, path);
  if (!x.valid() || !cos.valid() || !sin.valid()) return Tensor();
  // One decomposition per types (q and k of a model: two, shared by every layer).
  const std::string function = "tlaloc_rotary_" + CompositeTypeName(x.type()) + "_" +
                               CompositeTypeName(cos.type()) + "_" + CompositeTypeName(sin.type());
  auto out = EmitComposite(
      kRotaryComposite, {x, cos, sin}, {}, function, [](const std::vector<Tensor>& a) {
        const Tensor& x = a[0];
        int64_t d = x.dim(-1);
        Tensor xf = ToF32(x);
        Tensor x1 = SliceAxis(xf, -1, 0, d / 2);
        Tensor x2 = SliceAxis(xf, -1, d / 2, d);
        Tensor rotated = Concat({-x2, x1}, -1);
        // cos/sin [B, T, D] broadcast over the heads axis of x [B, T, H, D].
        Tensor c = ExpandDims(a[1], 2), s = ExpandDims(a[2], 2);
        Tensor y = xf * c + rotated * s;
        return std::vector<Tensor>{
            y.element_type() == x.element_type() ? y : Convert(y, x.element_type())};
      });
  return out.size() == 1 ? out[0] : Tensor();
}

Tensor SiluAndMul(const Tensor& gate, const Tensor& up, LayerTrace* trace,
                  const std::string& path) {
  LayerScope scope(trace, gate.builder(), kSiluAndMulLayer, path);
  if (!gate.valid() || !up.valid()) return Tensor();
  // The gate only, not the whole MLP: its products are Linear's (int8 composites or dots the
  // interpreter already runs as kernels), MoE experts use it without an MLP around it, and
  // kernel repositories name this layer (kSiluAndMulLayer).
  const std::string function =
      "tlaloc_silu_and_mul_" + CompositeTypeName(gate.type()) + "_" + CompositeTypeName(up.type());
  auto out = EmitComposite(
      kSiluAndMulComposite, {gate, up}, {}, function,
      [](const std::vector<Tensor>& a) { return std::vector<Tensor>{Silu(a[0]) * a[1]}; });
  return out.size() == 1 ? out[0] : Tensor();
}

Tensor SwiGluMlp(const Tensor& x, const Tensor& gate_w, const Tensor& up_w, const Tensor& down_w,
                 LayerTrace* trace, const std::string& path, const MlpInt8Scales& int8_scales) {
  LayerScope scope(trace, x.builder(), kMlpLayer, path);
  Tensor g = Linear(x, gate_w, trace, path + ".gate_proj", int8_scales.gate);
  Tensor u = Linear(x, up_w, trace, path + ".up_proj", int8_scales.up);
  return Linear(SiluAndMul(g, u, trace, path), down_w, trace, path + ".down_proj",
                int8_scales.down);
}

namespace {

// GroupedAttention's ops after its trace scope. Dense: k, v [B, Hkv, S, D]. Paged (`table`
// valid): k, v are pools [N, Hkv, P, D] of q's type (f32, bf16 or f16) read through the block
// table [B, M], and each product is the composite tlaloc.paged_dot whose decomposition is the
// dense product on GatherPages(pool, table): the ops, and so the bits, of the dense form on the
// gathered keys and values.
Tensor AttentionOps(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& table,
                    const Tensor& mask, double scale) {
  OpBuilder* b = q.builder();
  const bool paged = table.valid();
  int64_t bsz = q.dim(0), t = q.dim(1), hq = q.dim(2), d = q.dim(3);
  int64_t hkv = k.dim(1);
  if (hkv <= 0 || hq % hkv != 0) {
    b->Fail(InvalidArgument("GroupedAttention: " + std::to_string(hq) +
                            " query heads are not a multiple of " + std::to_string(hkv) +
                            " KV heads"));
    return Tensor();
  }
  int64_t groups = hq / hkv;
  // q as [B, Hkv, G, T, D] against k [B, Hkv, S, D]: batch dimensions lead in both, so the
  // contraction reads the cache in place. Same-typed operands with an f32 result: bf16
  // products are exact in f32, so this equals widening both first, without converting the
  // whole cache every step.
  Tensor qg = Transpose(Reshape(q, {bsz, t, hkv, groups, d}), {0, 2, 3, 1, 4});
  // An f32 query against a bf16 or f16 cache (an f32 model keeping a low-precision cache) is
  // rounded to the cache's type, as llama.cpp rounds its query to an f16 cache's: the product is
  // then the exact low-precision one the cache's own type runs, reading the cache in place.
  if (qg.element_type() == ElementType::kF32 && IsLowPrecision(k.element_type()))
    qg = Convert(qg, k.element_type());
  Tensor scores;
  if (paged) {
    scores = PagedDot(qg, k, table, PagedProduct::kKeys) * scale;
  } else {
    Tensor kk = k.element_type() == qg.element_type() ? k : ToF32(k);
    if (kk.element_type() != qg.element_type()) qg = ToF32(qg);
    scores = DotGeneral(qg, kk, {0, 1}, {0, 1}, {4}, {3}, ElementType::kF32,
                        /*same_as_lhs=*/false) *
             scale;
  }
  // mask [B, T, S] over scores [B, Hkv, G, T, S]; a large finite negative fill rather than
  // -inf: a fully masked (padding) row stays finite.
  Tensor probs = MaskedSoftmax(scores, mask, {0, 3, 4}, -1e30);
  Tensor out;
  if (IsLowPrecision(v.element_type())) {
    // As transformers and llama.cpp do: the probabilities are rounded to the cache's type and
    // multiplied with it in place (exact products, f32 sums), rather than widening the whole V
    // cache to f32 at every step.
    Tensor p = Convert(probs, v.element_type());
    out = paged ? PagedDot(p, v, table, PagedProduct::kValues)
                : DotGeneral(p, v, {0, 1}, {0, 1}, {4}, {2}, ElementType::kF32,
                             /*same_as_lhs=*/false);  // [B, Hkv, G, T, D]
    out = Transpose(out, {0, 3, 1, 2, 4});
  } else if (paged) {
    // Einsum's ops below on the gathered f32 values: the product, then the transpose.
    out = Transpose(PagedDot(probs, v, table, PagedProduct::kValues), {0, 3, 1, 2, 4});
  } else {
    out = Einsum("bkgts,bksd->btkgd", probs, ToF32(v));
  }
  out = Reshape(out, {bsz, t, hq, d});
  return q.element_type() == ElementType::kF32 ? out : Convert(out, q.element_type());
}

}  // namespace

Tensor GroupedAttention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                        double scale, LayerTrace* trace, const std::string& path) {
  LayerScope scope(trace, q.builder(), kAttentionLayer, path, {{"scale", scale}});
  if (!q.builder() || !q.valid() || !k.valid() || !v.valid() || !mask.valid()) return Tensor();
  return AttentionOps(q, k, v, Tensor(), mask, scale);
}

Tensor PagedGroupedAttention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                             const Tensor& block_table, const Tensor& mask, double scale,
                             LayerTrace* trace, const std::string& path) {
  if (!q.builder() || !q.valid() || !k_pool.valid() || !v_pool.valid() || !block_table.valid() ||
      !mask.valid())
    return Tensor();
  // The paged products take pools of q's type (or low-precision pools under an f32 query, which
  // AttentionOps rounds to them); f32 values are Einsum's f32 operand as they are.
  const ElementType et = q.element_type(), pool_type = k_pool.element_type();
  const bool low_pools_under_f32 = et == ElementType::kF32 && IsLowPrecision(pool_type);
  if (v_pool.element_type() != pool_type || (pool_type != et && !low_pools_under_f32) ||
      !(IsLowPrecision(et) || et == ElementType::kF32))
    return GroupedAttention(q, GatherPages(k_pool, block_table), GatherPages(v_pool, block_table),
                            mask, scale, trace, path);
  LayerScope scope(trace, q.builder(), kAttentionLayer, path, {{"scale", scale}});
  return AttentionOps(q, k_pool, v_pool, block_table, mask, scale);
}

}  // namespace tlaloc::nn
