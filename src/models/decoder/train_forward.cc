// The shared decoder's causal forward for training: the same decoder layer as the step programs in
// training mode (no cache, no sampling); every position attends to the positions at or before it in
// its own document (the whole row unless packed positions say where documents start).
#include "models/decoder/decoder.h"

namespace tlaloc::models::decoder {

StatusOr<TrainForward> BuildDecoderTrainForward(const DecoderKind& kind, const ModelConfig& c,
                                                const WeightTensors& w, const Tensor& input_ids,
                                                const Tensor* positions, autodiff::Marks* remat,
                                                const ParallelHooks* parallel) {
  const std::string name = kind.name;
  TL_RETURN_IF_ERROR(kind.check(c));
  if (c.quantization)
    return Unimplemented(
        name + " training forward: the checkpoint is int8-quantized (quantization_config " +
        c.quantization->quant_method + "); train the float checkpoint it was made from");
  if (input_ids.rank() != 2 || input_ids.element_type() != ElementType::kS32)
    return InvalidArgument(name + " training forward: input_ids " + input_ids.type().ToString() +
                           ": expected s32 [batch, seq_len]");
  OpBuilder& b = *input_ids.builder();
  const int64_t bsz = input_ids.dim(0), t = input_ids.dim(1);
  LayerContext ctx;
  ctx.mode = Mode::kTrain;
  ctx.qk_norm = kind.qk_norm;
  if (parallel) ctx.parallel = *parallel;
  Tensor x = nn::Embedding(w.at("model.embed_tokens.weight"), input_ids);
  if (positions &&
      (positions->element_type() != ElementType::kS32 || positions->dims() != input_ids.dims()))
    return InvalidArgument(name + " training forward: positions " + positions->type().ToString() +
                           ": expected s32 like input_ids " + input_ids.type().ToString());
  const Tensor pos = positions ? *positions : Iota(b, {bsz, t}, 1);
  std::tie(ctx.cos, ctx.sin) =
      kind.rotary ? kind.rotary(c, pos) : nn::RotaryTables(pos, c.head_dim, c.rope_theta);
  const Tensor query = Iota(b, {bsz, t, t}, 1), key = Iota(b, {bsz, t, t}, 2);
  ctx.mask = Le(key, query);
  // A query at position p of its document sees the p keys before it and itself, no further back.
  if (positions) ctx.mask = ctx.mask & Ge(key, query - BroadcastInDim(pos, {bsz, t, t}, {0, 1}));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    // Only the layer's input stays alive for the backward pass when remat is on.
    autodiff::RematScope scope(remat, b);
    const WeightTensors* layer_weights = &w;
    WeightTensors used;
    if (ctx.parallel.use_layer_weight) {
      used = w;
      const std::string prefix = "model.layers." + std::to_string(l) + ".";
      for (auto& [name, tensor] : used)
        if (name.rfind(prefix, 0) == 0) tensor = ctx.parallel.use_layer_weight(name, tensor);
      layer_weights = &used;
    }
    x = ctx.parallel.Annotate("hidden",
                              DecoderLayer(c, *layer_weights, l, x, ctx, nullptr, nullptr));
  }
  return TrainForward{FinalNorm(c, w, x, nullptr), HeadWeightName(c)};
}

}  // namespace tlaloc::models::decoder
