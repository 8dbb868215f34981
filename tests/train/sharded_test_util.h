// What the sharded-training tests share: the tiny Qwen3 they train, its random weights, a batch
// whose rows count different numbers of labels (so a per-device mean would be wrong), and the
// AdamW settings.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "testing/tiny_qwen3.h"
#include "testing/tiny_qwen3_variants.h"
#include "tlaloc/models/init.h"
#include "tlaloc/runtime/backend.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train::testing_sharded {

constexpr int64_t kBatch = 4, kSeq = 8;

inline io::ModelConfig TinyConfig() { return testing::TinyQwen3Config({.initializer_range = 0.1}); }

// TinyConfig as a Qwen3-MoE (testing::AsTinyMoe: 8 experts of width 16, top 2); `dense_layers`
// keep the SwiGLU MLP.
inline io::ModelConfig TinyMoeConfig(std::vector<int64_t> dense_layers = {}) {
  return testing::AsTinyMoe(TinyConfig(), std::move(dense_layers));
}

inline std::vector<Literal> Weights(const io::ModelConfig& c, uint64_t seed = 7) {
  std::vector<Literal> out;
  for (auto& t : models::RandomWeights(c, seed, ElementType::kF32)) out.push_back(t.value);
  return out;
}

inline Batch MakeBatch(const io::ModelConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(kBatch * kSeq), labels(kBatch * kSeq);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % c.vocab_size);
  for (int64_t r = 0; r < kBatch; ++r)
    for (int64_t i = 0; i < kSeq; ++i)
      labels[r * kSeq + i] = i + 1 < kSeq && i >= r ? ids[r * kSeq + i + 1] : kIgnoreLabel;
  return {Literal::FromVector<int32_t>({kBatch, kSeq}, ids),
          Literal::FromVector<int32_t>({kBatch, kSeq}, labels)};
}

inline TrainOptions Options() {
  TrainOptions o;
  o.adamw.lr = 1e-2;
  o.adamw.grad_clip_norm = 1.0;
  o.adamw.weight_decay = 0.01;
  return o;
}

// The reference every sharded step is compared with: the unsharded loss-and-gradient program
// on one interpreter device (loss, token count, then one gradient per weight).
inline StatusOr<std::vector<Literal>> UnshardedLossAndGradients(
    const io::ModelConfig& c, const Batch& batch, const TrainOptions& options = Options()) {
  auto one = MakeInterpreterBackend({}, 1);
  TL_ASSIGN_OR_RETURN(std::shared_ptr<Module> module,
                      BuildLossAndGradProgram(c, options, kBatch, kSeq));
  TL_ASSIGN_OR_RETURN(auto program, one->Compile(module));
  std::vector<Literal> args = Weights(c);
  args.push_back(batch.input_ids);
  args.push_back(batch.labels);
  return one->Run(*program, args);
}

// max |a - b| / max |b| over a tensor (0 when both are zero).
inline double RelativeDiff(const Literal& a, const Literal& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.num_elements(); ++i) {
    diff = std::max(diff, std::fabs(a.GetAsDouble(i) - b.GetAsDouble(i)));
    scale = std::max(scale, std::fabs(b.GetAsDouble(i)));
  }
  return scale == 0 ? diff : diff / scale;
}

// Whether a weight is one of an MoE layer's stacked expert matrices.
inline bool IsExperts(const std::string& name) {
  return name.find(".mlp.experts.") != std::string::npos;
}

}  // namespace tlaloc::train::testing_sharded
