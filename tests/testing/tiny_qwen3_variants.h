// The tiny Qwen3 (tiny_qwen3.h) as a Qwen3-MoE, and random weights as a checkpoint of any of
// its forms stores them (int8 matrices quantized with their block scales): what the
// tensor-parallel generation, plugin and sharded-training tests share.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tlaloc/io/model_config.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/quantize.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::testing {

// `c` with sparse MLPs: 8 experts of width 16, top 2 renormalised, so 2 and 4 model devices
// hold 4 and 2 experts each; `dense_layers` keep the SwiGLU MLP (mlp_only_layers).
inline io::ModelConfig AsTinyMoe(io::ModelConfig c, std::vector<int64_t> dense_layers = {}) {
  c.architecture = models::qwen3::kQwen3Moe;
  models::qwen3::MoeConfig& moe_fields = models::qwen3::MutableMoe(c);
  moe_fields.num_experts = 8;
  moe_fields.num_experts_per_tok = 2;
  moe_fields.moe_intermediate_size = 16;
  moe_fields.norm_topk_prob = true;
  moe_fields.decoder_sparse_step = 1;
  moe_fields.mlp_only_layers = std::move(dense_layers);
  return c;
}

// Random f32 weights of `c` in WeightSpecs order; for an int8 config, the float model's weights
// quantized where the checkpoint stores s8 matrices, each followed by its f16 scales.
inline std::vector<Literal> RandomWeightsAsStored(const io::ModelConfig& c, uint64_t seed) {
  io::ModelConfig fc = c;
  fc.quantization.reset();
  std::map<std::string, Literal> floats;
  for (auto& t : models::RandomWeights(fc, seed, ElementType::kF32)) floats[t.name] = t.value;
  std::map<std::string, Literal> scales;
  std::vector<Literal> out;
  for (const auto& spec : models::WeightSpecs(c)) {
    if (spec.fixed_type == ElementType::kS8) {
      auto q = models::QuantizeInt8Matrix(floats.at(spec.name), spec.name);
      EXPECT_TRUE(q.ok()) << q.status().ToString();
      if (!q.ok()) return {};
      out.push_back(std::move(q->first));
      scales[models::Int8ScaleName(spec.name)] = std::move(q->second);
    } else if (spec.fixed_type == ElementType::kF16) {
      out.push_back(std::move(scales.at(spec.name)));
    } else {
      out.push_back(floats.at(spec.name));
    }
  }
  return out;
}

}  // namespace tlaloc::testing
