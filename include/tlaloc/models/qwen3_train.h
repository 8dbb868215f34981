// Qwen3's full-sequence causal forward for training, in pieces so a trainer can mark each
// decoder layer as a remat region: embedding and rotary tables, one decoder layer, final norm.
// Same math as the prefill program (models/qwen3.h) without KV caches or sampling: every
// position of every row attends to the positions at or before it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/io/model_config.h"

namespace tlaloc::models {

// Weight tensors by checkpoint name (WeightSpecs names), all in the compute type.
using WeightTensors = std::map<std::string, Tensor>;

struct TrainInputs {
  Tensor hidden;    // [B, T, H] embeddings of input_ids
  Tensor cos, sin;  // rotary tables [B, T, head_dim], f32
  Tensor mask;      // pred [B, T, T]: causal
};

// Embeds input_ids (s32 [B, T]) and builds the rotary tables and causal mask.
StatusOr<TrainInputs> TrainEmbed(const io::ModelConfig& config, const WeightTensors& weights,
                                 const Tensor& input_ids);
// Decoder layer `layer` on x [B, T, H].
Tensor TrainDecoderLayer(const io::ModelConfig& config, const WeightTensors& weights, int64_t layer,
                         const Tensor& x, const TrainInputs& in);
// The final RMSNorm (model.norm) on x [..., H].
Tensor TrainFinalNorm(const io::ModelConfig& config, const WeightTensors& weights, const Tensor& x);
// The LM head matrix [V, H]: lm_head.weight, or the embedding when tied.
const Tensor& TrainHeadWeight(const io::ModelConfig& config, const WeightTensors& weights);

}  // namespace tlaloc::models
