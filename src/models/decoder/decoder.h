// The Llama-style decoder the families share (Qwen3, Qwen3-MoE, Llama): one decoder layer for
// prefill, decode and training, the generation step programs and the training forward, built
// for a DecoderKind that says what differs between them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tlaloc/models/family.h"

namespace tlaloc::models::decoder {

using io::ModelConfig;

// How a decoder layer is used: prefill writes a chunk's keys into cache slots and attends
// within the chunk; decode writes one key per slot and attends over the whole cache; train has
// no cache.
enum class Mode { kPrefill, kDecode, kTrain };

// What every layer of one forward shares.
struct LayerContext {
  Mode mode = Mode::kTrain;
  Tensor cos, sin;   // rotary tables [B, T, head_dim], f32
  Tensor mask;       // pred [B, T, keys]
  Tensor slots;      // prefill: s32 [B], the cache row of each batch row
  Tensor positions;  // decode: s32 [B], where each row's new key goes
  // Paged KV cache (page_size > 0): each row's chunk starts at starts[r] and holds lengths[r]
  // real tokens; block_table [B, M] names the row's blocks, write_blocks [B, W] those its chunk
  // touches (from the block holding starts[r]). The cache is a pool of blocks.
  int64_t page_size = 0;
  Tensor starts, lengths, block_table, write_blocks;
  // Tensor parallelism (shard/): the block reductions and annotations; unset on one device.
  ParallelHooks parallel;
  // Qwen3 RMS-normalises each head's queries and keys before the rotation; Llama does not.
  bool qk_norm = true;
};

// What differs between the decoders built here: Qwen3's (q/k norms; models/qwen3/) and Llama's
// (models/llama/, plain attention and its own rotary frequencies).
struct DecoderKind {
  const char* name = "Qwen3";  // starts messages; the program module's name in lower case
  const char* module = "qwen3";
  Status (*check)(const ModelConfig& c) = nullptr;
  std::vector<WeightSpec> (*weight_specs)(const ModelConfig& c) = nullptr;
  bool qk_norm = true;
  // cos/sin tables [..., head_dim] for s32 positions; null: nn::RotaryTables over rope_theta.
  std::pair<Tensor, Tensor> (*rotary)(const ModelConfig& c, const Tensor& positions) = nullptr;
};

// A family's ModelFamily::build_step and train_forward, for its kind (step_program.cc,
// train_forward.cc).
StatusOr<ModelProgram> BuildDecoderStep(const DecoderKind& kind, const ModelConfig& c,
                                        const StepShape& shape, nn::LayerTrace* trace,
                                        const ParallelHooks* parallel);
StatusOr<TrainForward> BuildDecoderTrainForward(const DecoderKind& kind, const ModelConfig& c,
                                                const WeightTensors& w, const Tensor& input_ids,
                                                const Tensor* positions, autodiff::Marks* remat,
                                                const ParallelHooks* parallel);

// One layer's KV cache, replaced by its updated value as layers write it.
struct LayerCache {
  Tensor k, v;
};

// Decoder layer `layer` on x [B, T, H] (`cache` unused, may be null, in training).
Tensor DecoderLayer(const ModelConfig& c, const WeightTensors& w, int64_t layer, const Tensor& x,
                    const LayerContext& ctx, LayerCache* cache, nn::LayerTrace* trace);
// The block scales of int8 matrix `name` in `w`, or an invalid Tensor when it is a float matrix.
inline Tensor Int8Scale(const WeightTensors& w, const std::string& name) {
  auto it = w.find(Int8ScaleName(name));
  return it == w.end() ? Tensor() : it->second;
}

// Final RMSNorm.
Tensor FinalNorm(const ModelConfig& c, const WeightTensors& w, const Tensor& x,
                 nn::LayerTrace* trace);
// The LM head matrix's checkpoint name: lm_head.weight, or the embedding when tied.
std::string HeadWeightName(const ModelConfig& c);

// The tensors of a quantized checkpoint of `c` (io::WeightQuantization) from its float tensors:
// "tlaloc_int8": each matrix whose rows are whole blocks as s8, followed by its f16 block scales
// (Int8ScaleName); a GGUF import's "tlaloc_gguf": each matrix its `formats` lists in that format's
// storage (Q8_0 as int8), the others float. The other tensors, and those `keep_float` (may be
// null) names (an MoE router), as they are. `float_tensors` as given when `c` is not quantized.
std::vector<ExpectedTensor> Int8CheckpointTensors(
    const ModelConfig& c, std::vector<ExpectedTensor> float_tensors,
    bool (*keep_float)(const ExpectedTensor& t) = nullptr);

// The tensor-parallel split dimension of weight `name` (WeightSpec::tensor_parallel_dim) by
// transformers' projection names, which these decoders share (tensor_parallel.cc).
int64_t TensorParallelDim(std::string name);

}  // namespace tlaloc::models::decoder
