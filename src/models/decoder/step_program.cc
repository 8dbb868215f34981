// The shared decoder's generation step programs (BuildDecoderStep, for a family's DecoderKind):
//
//   prefill(weights..., tokens s32[B,T], positions s32[B,T], lengths s32[B], slots s32[B],
//           temperature f32[B], top_k s32[B], top_p f32[B], keys u32[B,2], steps u32[B],
//           min_p f32[B], [logit_bias, penalty_scale, penalty_offset f32[B,V] (penalised)]
//           k_cache.0, v_cache.0, ...) -> (next_tokens s32[B], logits f32[B,V], caches'...)
//   decode(weights..., tokens s32[S], positions s32[S], <sampling as above>, caches...)
//           -> (next_tokens, logits, caches'...)
//
// Caches are [slots, kv_heads, max_len, head_dim]; cache position p holds sequence position p.
//
// Paged (StepShape::page_size > 0): caches are pools [blocks, kv_heads, page_size, head_dim];
// prefill and decode both take lengths s32[B] (decode: 1, or 0 for a padding row),
// block_table s32[B,M] and write_blocks s32[B,W] in place of slots, and a row continues its
// sequence from its first position (a prefill chunk anywhere in a prompt, or a decode token).
// Prefill rows are left-aligned prompts padded on the right, starting at position 0, and write
// the slots `slots` names; logits are those of each row's last real token. Decode runs one row
// per slot (row r is slot r); rows of idle slots run too and their results are ignored. Each
// cache argument aliases its updated result (donated, updated in place).
#include <limits>

#include "models/decoder/decoder.h"

namespace tlaloc::models::decoder {

namespace {

// Adds function arguments and records them in the signature.
class Inputs {
 public:
  Inputs(FunctionBuilder& fb, ProgramSignature& sig) : fb_(fb), sig_(sig) {}
  Tensor Add(Port port, const TensorType& type, std::string name = {}, int64_t layer = -1) {
    if (name.empty()) name = std::string(PortName(port));
    sig_.inputs.push_back({port, std::move(name), type, layer});
    return fb_.AddArg(type);
  }

 private:
  FunctionBuilder& fb_;
  ProgramSignature& sig_;
};

Status CheckShape(const std::string& name, const StepShape& shape) {
  const bool prefill = shape.kind == StepKind::kPrefill;
  const int64_t t = prefill ? shape.prompt_len : 1;
  if (shape.paged()) {
    if (shape.batch <= 0 || t <= 0 || shape.num_blocks <= 0 || shape.table_blocks <= 0)
      return InvalidArgument(name + " paged step shape: batch " + std::to_string(shape.batch) +
                             ", prompt " + std::to_string(t) + ", " +
                             std::to_string(shape.num_blocks) + " blocks of " +
                             std::to_string(shape.page_size) + ", table of " +
                             std::to_string(shape.table_blocks) + " (expected positive sizes)");
  } else if (shape.batch <= 0 || t <= 0 || shape.max_len <= 0 || t > shape.max_len ||
             shape.slots() < shape.batch || (!prefill && shape.slots() != shape.batch)) {
    return InvalidArgument(name + " step shape: batch " + std::to_string(shape.batch) +
                           ", prompt " + std::to_string(t) + ", slots " +
                           std::to_string(shape.slots()) + ", max_len " +
                           std::to_string(shape.max_len) +
                           " (expected positive sizes, prompt <= max_len, a decode batch of one "
                           "row per slot and a prefill batch of at most the slots)");
  }
  if (shape.dtype != ElementType::kF32 && shape.dtype != ElementType::kBF16 &&
      shape.dtype != ElementType::kF16)
    return InvalidArgument(name + " program dtype " + std::string(MlirName(shape.dtype)) +
                           ": expected f32, bf16 or f16");
  if (Status kv = CheckKvCacheType(shape.dtype, shape.cache_dtype()); !kv.ok())
    return kv.WithContext(name);
  // No bound at max_position_embeddings: the rotary tables are computed from the positions, so a
  // context past the trained length runs (generate -c warns that quality may drop there).
  return OkStatus();
}

}  // namespace

StatusOr<ModelProgram> BuildDecoderStep(const DecoderKind& kind, const ModelConfig& c,
                                        const StepShape& shape, nn::LayerTrace* trace,
                                        const ParallelHooks* parallel) {
  const std::string name = kind.name;
  TL_RETURN_IF_ERROR(kind.check(c));
  TL_RETURN_IF_ERROR(CheckShape(name, shape));
  const bool prefill = shape.kind == StepKind::kPrefill;
  const int64_t bsz = shape.batch, s = shape.max_len;
  const int64_t t = prefill ? shape.prompt_len : 1;
  ModelProgram program;
  program.entry = prefill ? "prefill" : "decode_step";
  program.module = std::make_shared<Module>(kind.module);
  FunctionBuilder fb(program.module.get(), program.entry);
  OpBuilder& b = fb.ops();
  ProgramSignature& sig = program.signature;
  Inputs in(fb, sig);

  WeightTensors w;
  const auto specs = kind.weight_specs(c);
  const bool part_shapes = parallel && !parallel->weight_shapes.empty();
  if (part_shapes && parallel->weight_shapes.size() != specs.size())
    return InvalidArgument(name + " step program: " + std::to_string(specs.size()) +
                           " weights and " + std::to_string(parallel->weight_shapes.size()) +
                           " weight shapes");
  for (size_t i = 0; i < specs.size(); ++i)
    w[specs[i].name] = in.Add(Port::kWeight,
                              TensorType(specs[i].TypeFor(shape.dtype),
                                         part_shapes ? parallel->weight_shapes[i] : specs[i].shape),
                              specs[i].name);
  const std::vector<int64_t> tok_dims =
      prefill ? std::vector<int64_t>{bsz, t} : std::vector<int64_t>{bsz};
  Tensor tokens = in.Add(Port::kTokens, TensorType(ElementType::kS32, tok_dims));
  Tensor positions = in.Add(Port::kPositions, TensorType(ElementType::kS32, tok_dims));
  LayerContext ctx;
  ctx.mode = prefill ? Mode::kPrefill : Mode::kDecode;
  ctx.qk_norm = kind.qk_norm;
  // Tensor parallel: `c` holds this device's heads, so the weights and caches above and below
  // are its parts; the blocks all-reduce their row-parallel products.
  if (parallel) ctx.parallel = *parallel;
  Tensor lengths;
  if (prefill || shape.paged())
    lengths = in.Add(Port::kLengths, TensorType(ElementType::kS32, {bsz}));
  if (shape.paged()) {
    ctx.page_size = shape.page_size;
    ctx.lengths = lengths;
    ctx.starts = prefill ? Reshape(SliceAxis(positions, 1, 0, 1), {bsz}) : positions;
    ctx.block_table =
        in.Add(Port::kBlockTable, TensorType(ElementType::kS32, {bsz, shape.table_blocks}));
    ctx.write_blocks =
        in.Add(Port::kWriteBlocks, TensorType(ElementType::kS32, {bsz, shape.write_blocks()}));
  } else if (prefill) {
    ctx.slots = in.Add(Port::kSlots, TensorType(ElementType::kS32, {bsz}));
  }
  nn::RowSamplingInputs sampling;
  sampling.temperature = in.Add(Port::kTemperature, TensorType(ElementType::kF32, {bsz}));
  sampling.top_k = in.Add(Port::kTopK, TensorType(ElementType::kS32, {bsz}));
  sampling.top_p = in.Add(Port::kTopP, TensorType(ElementType::kF32, {bsz}));
  sampling.keys = in.Add(Port::kKeys, TensorType(ElementType::kU32, {bsz, 2}));
  sampling.steps = in.Add(Port::kSteps, TensorType(ElementType::kU32, {bsz}));
  sampling.min_p = in.Add(Port::kMinP, TensorType(ElementType::kF32, {bsz}));
  nn::RowPenaltyInputs penalties;
  if (shape.penalties) {
    const TensorType dense(ElementType::kF32, {bsz, c.vocab_size});
    penalties.bias = in.Add(Port::kLogitBias, dense);
    penalties.scale = in.Add(Port::kPenaltyScale, dense);
    penalties.offset = in.Add(Port::kPenaltyOffset, dense);
  }
  std::vector<LayerCache> caches(c.num_hidden_layers);
  const TensorType cache_type = KvCacheType(c, shape);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    caches[l].k = in.Add(Port::kKCache, cache_type, "k_cache." + std::to_string(l), l);
    caches[l].v = in.Add(Port::kVCache, cache_type, "v_cache." + std::to_string(l), l);
  }

  Tensor pos2 = prefill ? positions : Reshape(positions, {bsz, 1});
  ctx.positions = positions;
  Tensor x =
      nn::Embedding(w.at("model.embed_tokens.weight"), prefill ? tokens : Reshape(tokens, {bsz, 1}),
                    trace, "model.embed_tokens", Int8Scale(w, "model.embed_tokens.weight"));
  // An int8 table dequantises to f32; the hidden states are in the program's type.
  if (x.element_type() != shape.dtype) x = Convert(x, shape.dtype);
  std::tie(ctx.cos, ctx.sin) =
      kind.rotary ? kind.rotary(c, pos2) : nn::RotaryTables(pos2, c.head_dim, c.rope_theta);
  if (shape.paged()) {
    // Key j of a row's gathered blocks holds sequence position j: the query at position p sees
    // it when j <= p (causal) and j < start + length (written).
    const int64_t keys = shape.table_blocks * shape.page_size;
    Tensor kj = Iota(b, {bsz, t, keys}, 2);
    Tensor qp = BroadcastInDim(pos2, {bsz, t, keys}, {0, 1});
    Tensor end = BroadcastInDim(ctx.starts + lengths, {bsz, t, keys}, {0});
    ctx.mask = Le(kj, qp) & Lt(kj, end);
  } else if (prefill) {
    // Query i may see key j when j <= i (causal) and j < length (not padding).
    Tensor qi = Iota(b, {bsz, t, t}, 1), kj = Iota(b, {bsz, t, t}, 2);
    Tensor len = BroadcastInDim(lengths, {bsz, t, t}, {0});
    ctx.mask = Le(kj, qi) & Lt(kj, len);
  } else {
    // The query at position p sees cache positions 0..p (its own key was just written at p).
    Tensor kj = Iota(b, {bsz, 1, s}, 2);
    ctx.mask = Le(kj, BroadcastInDim(positions, {bsz, 1, s}, {0}));
  }
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    x = DecoderLayer(c, w, l, x, ctx, &caches[l], trace);

  // Hidden state of each row's last real token: a one-hot contraction over T (exact: one 1).
  Tensor last =
      prefill ? Einsum("bt,bth->bh", OneHot(lengths - FullLike(lengths, 1), t, x.element_type()), x)
              : Reshape(x, {bsz, c.hidden_size});
  Tensor n = FinalNorm(c, w, last, trace);
  Tensor logits;
  {
    nn::LayerScope scope(trace, &b, nn::kLmHeadLayer, "lm_head");
    logits =
        nn::Linear(n, w.at(HeadWeightName(c)), trace, "lm_head", Int8Scale(w, HeadWeightName(c)));
    if (logits.element_type() != ElementType::kF32) logits = Convert(logits, ElementType::kF32);
  }
  Tensor next;
  {
    nn::LayerScope scope(trace, &b, nn::kSamplerLayer, "sampler");
    // The logits output stays the model's own; the penalties shape only the draw.
    Tensor candidates = shape.penalties ? nn::PenalizeLogits(logits, penalties) : logits;
    if (shape.sample_vocab > 0 && shape.sample_vocab < c.vocab_size) {
      Tensor ids = Iota(b, {bsz, c.vocab_size}, 1);
      candidates =
          Where(Lt(ids, FullLike(ids, static_cast<double>(shape.sample_vocab))), candidates,
                FullLike(candidates, -std::numeric_limits<double>::infinity()));
    }
    next = nn::SampleRows(candidates, sampling, shape.max_candidates);
  }

  std::vector<Tensor> results{next, logits};
  sig.outputs.push_back({Port::kNextTokens, "next_tokens", next.type()});
  sig.outputs.push_back({Port::kLogits, "logits", logits.type()});
  Function* fn = fb.function();
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    for (const Tensor* cache : {&caches[l].k, &caches[l].v}) {
      const bool is_k = cache == &caches[l].k;
      const int arg = sig.Input(is_k ? Port::kKCache : Port::kVCache, static_cast<int>(l));
      const int result = static_cast<int>(results.size());
      results.push_back(*cache);
      sig.outputs.push_back(
          {is_k ? Port::kKCache : Port::kVCache, sig.inputs[arg].name, cache_type, l, arg});
      // The argument aliases its updated result (tf.aliasing_output), so PJRT backends can
      // donate the buffer the way the interpreter does.
      fn->arg_attrs(arg)["tf.aliasing_output"] = Attribute::Int(result, ElementType::kS32);
    }
  }
  TL_RETURN_IF_ERROR(fb.Return(results));
  return program;
}

}  // namespace tlaloc::models::decoder
