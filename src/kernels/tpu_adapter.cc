// tpu_custom_call attributes, and the adapter that lets jax's paged attention kernel replace
// Tlaloc's PagedAttention layer (the composite tlaloc.paged_attention).
#include "kernels/tpu_adapter.h"

#include "tlaloc/builder/tensor.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc::kernels {
namespace {

constexpr std::string_view kJaxPagedAttention = "jax-paged-attention";

// Element type and dims of a type text from metadata.json (checked to parse at Create).
TensorType TypeOf(const std::string& text) {
  auto t = ParseTypeText(text);
  return t.ok() && t->is_tensor() ? t->tensor : TensorType(ElementType::kF32, {});
}

}  // namespace

// Without these XLA:TPU's layout assignment may pick another tiling for an operand than the
// Mosaic kernel was lowered for (jax's paged attention is refused so: "block shape (..., 1, 128)
// is not divisible by tiling"). Tlaloc has no `index` element type, so the attribute is text.
Attribute MajorToMinorLayouts(const std::vector<Type>& types) {
  std::string s = "[";
  for (size_t i = 0; i < types.size(); ++i) {
    const int64_t rank = types[i].is_tensor() ? types[i].tensor.rank() : 0;
    std::string dims;
    for (int64_t d = rank - 1; d >= 0; --d) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    if (rank > 1) dims = "[" + dims + "]";
    s += (i ? ", " : "") + std::string("dense<") + dims + "> : tensor<" + std::to_string(rank) +
         "xindex>";
  }
  return Attribute::Opaque(s + "]");
}

AttrDict TpuCustomCallAttrs(const std::string& payload, const std::string& kernel_layer,
                            const std::vector<Type>& operand_types,
                            const std::vector<Type>& result_types) {
  AttrDict a;
  a["call_target_name"] = Attribute::String("tpu_custom_call");
  a["backend_config"] = Attribute::String(payload);
  a["kernel_name"] = Attribute::String(kernel_layer);
  a["operand_layouts"] = MajorToMinorLayouts(operand_types);
  a["result_layouts"] = MajorToMinorLayouts(result_types);
  return a;
}

// jax-paged-attention: the layer's operands, in the order kernelize passes them (the operands of
// the composite tlaloc.paged_attention that nn::PagedAttention emits, which kernelize finds by
// name), are
//   k_pages f32[N, Hkv, P, D], block_table s32[B, M], v_pages f32[N, Hkv, P, D],
//   q f32[B, 1, Hq, D], kv_start s32[B], kv_lengths s32[B], q_positions s32[B, 1]
// and its results out f32[B, 1, Hq, D], lse f32[B, 1, Hq]. jax's kernel
// (jax.experimental.pallas.ops.tpu.paged_attention, as its pallas_call lowers) takes
//   lengths s32[B], page_indices s32[B*M], buffer_index s32[1], init_flag s32[1],
//   q f32[B, Hq, (1,) D] (unscaled scores: q enters pre-scaled), k_pages, v_pages f32[Hkv, N, P, D]
// and returns o (q's shape), m and l f32[B, Hq, 1(, 1)]: the softmax-weighted values, the
// scores' maximum and the sum of their exponentials over keys j < lengths[b]. With one query per
// row (decode) the keys the layer's query sees, j < kv_lengths and kv_start + j <= q_position,
// are exactly j < min(kv_lengths, q_position - kv_start + 1): a prefix, which is what the kernel
// attends to; lse = m + log(l) (-inf for a row that sees nothing: m -inf, l 0, o 0, as the layer).
Status CheckTpuAdapter(const LayerSpec& layer, const TpuPayload& p, const std::string& where) {
  const std::string what = where + ": payload " + p.file + " (adapter " + p.adapter + ")";
  if (p.adapter != kJaxPagedAttention)
    return InvalidArgument(what + ": unknown adapter (expected " + std::string(kJaxPagedAttention) +
                           ")");
  if (layer.operands.size() != 7 || layer.results.size() != 2 || p.operand_types.size() != 7 ||
      p.result_types.size() != 2 || p.kernel_operand_types.size() != 7 ||
      p.kernel_result_types.size() != 3)
    return InvalidArgument(what +
                           ": expected a PagedAttention layer (7 operands, out and lse) and a "
                           "kernel of 7 operands and 3 results");
  for (const auto* list :
       {&p.operand_types, &p.result_types, &p.kernel_operand_types, &p.kernel_result_types})
    for (const std::string& t : *list)
      if (auto parsed = ParseTypeText(t); !parsed.ok() || !parsed->is_tensor())
        return InvalidArgument(what + ": '" + t + "' is not a tensor type");
  const TensorType pages = TypeOf(p.operand_types[0]), table = TypeOf(p.operand_types[1]);
  const TensorType q = TypeOf(p.operand_types[3]);
  const TensorType kq = TypeOf(p.kernel_operand_types[4]), kk = TypeOf(p.kernel_operand_types[5]);
  auto s32 = [](const TensorType& t, std::vector<int64_t> dims) {
    return t.element_type == ElementType::kS32 && t.dims == dims;
  };
  const bool ok =
      pages.rank() == 4 && table.rank() == 2 && q.rank() == 4 && q.dims[1] == 1 &&
      TypeOf(p.operand_types[2]) == pages && q.dims[0] == table.dims[0] &&
      q.dims[3] == pages.dims[3] && pages.dims[1] > 0 && q.dims[2] % pages.dims[1] == 0 &&
      s32(table, table.dims) && s32(TypeOf(p.operand_types[4]), {q.dims[0]}) &&
      s32(TypeOf(p.operand_types[5]), {q.dims[0]}) &&
      s32(TypeOf(p.operand_types[6]), {q.dims[0], 1}) &&
      s32(TypeOf(p.kernel_operand_types[0]), {q.dims[0]}) &&
      s32(TypeOf(p.kernel_operand_types[1]), {table.num_elements()}) &&
      s32(TypeOf(p.kernel_operand_types[2]), {1}) && s32(TypeOf(p.kernel_operand_types[3]), {1}) &&
      kq.num_elements() == q.num_elements() &&
      kk.dims == std::vector<int64_t>{pages.dims[1], pages.dims[0], pages.dims[2], pages.dims[3]} &&
      kk.element_type == pages.element_type && TypeOf(p.kernel_operand_types[6]) == kk &&
      TypeOf(p.kernel_result_types[0]).num_elements() == q.num_elements() &&
      TypeOf(p.kernel_result_types[1]).num_elements() == q.dims[0] * q.dims[2] &&
      TypeOf(p.kernel_result_types[2]).num_elements() == q.dims[0] * q.dims[2] &&
      TypeOf(p.result_types[0]) == q &&
      TypeOf(p.result_types[1]).dims == std::vector<int64_t>{q.dims[0], 1, q.dims[2]};
  if (!ok)
    return InvalidArgument(
        what +
        ": expected call-site operands (k_pages [N, Hkv, P, D], block_table s32[B, M], "
        "v_pages, q [B, 1, Hq, D], kv_start s32[B], kv_lengths s32[B], q_positions s32[B, 1]) "
        "-> (out [B, 1, Hq, D], lse [B, 1, Hq]) and kernel operands (s32[B], s32[B*M], s32[1], "
        "s32[1], q's elements, pages [Hkv, N, P, D] twice) -> (q's elements, B*Hq, B*Hq)");
  return OkStatus();
}

Status AddTpuAdapterFunction(Module& module, const std::string& fn_name, const TpuPayload& p,
                             const std::string& payload_text, const std::string& kernel_layer,
                             const std::vector<Type>& site_in, const std::vector<Type>& site_out,
                             const std::map<std::string, double>& attrs) {
  if (p.adapter != kJaxPagedAttention) return InvalidArgument("unknown adapter " + p.adapter);
  auto scale = attrs.find("scale");
  if (scale == attrs.end())
    return InvalidArgument("adapter " + p.adapter + " needs the layer's scale attribute");
  FunctionBuilder fb(&module, fn_name);
  fb.function()->set_public(false);
  std::vector<Tensor> in;
  for (const Type& t : site_in) in.push_back(fb.AddArg(t.tensor));
  OpBuilder& b = fb.ops();
  const Tensor &k_pages = in[0], &table = in[1], &v_pages = in[2], &q = in[3];
  const Tensor &kv_start = in[4], &kv_lengths = in[5], &q_positions = in[6];
  const int64_t bsz = q.dim(0), keys = table.dim(1) * k_pages.dim(2);
  const TensorType kq = TypeOf(p.kernel_operand_types[4]);
  // The prefix of the row's keys the one query sees, within the table's keys.
  Tensor seen = Min(kv_lengths, Reshape(q_positions, {bsz}) - kv_start + FullLike(kv_start, 1));
  Tensor lengths =
      Clamp(Full(b, {bsz}, 0, ElementType::kS32), seen, Full(b, {bsz}, keys, ElementType::kS32));
  Tensor q_scaled = q * FullLike(q, scale->second);
  if (q_scaled.element_type() != kq.element_type) q_scaled = Convert(q_scaled, kq.element_type);
  std::vector<Value> operands = {lengths.value(),
                                 Reshape(table, {table.dim(0) * table.dim(1)}).value(),
                                 Full(b, {1}, 0, ElementType::kS32).value(),  // buffer index
                                 Full(b, {1}, 1, ElementType::kS32).value(),  // init flag
                                 Reshape(q_scaled, kq.dims).value(),
                                 Transpose(k_pages, {1, 0, 2, 3}).value(),
                                 Transpose(v_pages, {1, 0, 2, 3}).value()};
  std::vector<Type> operand_types, result_types;
  for (Value v : operands) operand_types.push_back(v.type());
  for (const std::string& t : p.kernel_result_types) result_types.push_back(Type(TypeOf(t)));
  std::vector<Value> r = b.Create(
      "stablehlo.custom_call", operands,
      TpuCustomCallAttrs(payload_text, kernel_layer, operand_types, result_types), result_types);
  if (r.size() != 3) return b.status().ok() ? Internal("tpu_custom_call not created") : b.status();
  Tensor o(r[0], &b), m(r[1], &b), l(r[2], &b);
  if (o.element_type() != site_out[0].tensor.element_type)
    o = Convert(o, site_out[0].tensor.element_type);
  std::vector<Tensor> results = {Reshape(o, site_out[0].tensor.dims)};
  if (site_out.size() > 1) results.push_back(Reshape(m + Log(l), site_out[1].tensor.dims));
  return fb.Return(results);
}

}  // namespace tlaloc::kernels
