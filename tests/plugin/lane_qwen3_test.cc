// Qwen3 generation on the TLALOC_TEST_PJRT_TARGET lane's plugin (Tlaloc's own by default,
// XLA:CPU with xla-cpu) against the in-process interpreter, same weights and prompts: dense,
// MoE (chlo.ragged_dot experts, top-k routing) and int8 (the dequantising chain), each through
// prefill and paged-KV decode steps (block tables, in-place cache writes, stablehlo.if), greedy
// and seeded sampling; chlo.top_k of 4,096 over a 248,320-id vocabulary; and tensor-parallel
// generation over 2 and 4 of the plugin's devices (per-device programs with collectives).
// The ids must match; the largest logit difference is printed, exact on Tlaloc's plugin and
// bounded on another (XLA:CPU's figures: docs/PJRT.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "pjrt/pjrt_test_util.h"
#include "testing/tiny_qwen3.h"
#include "testing/tiny_qwen3_variants.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/models/qwen3.h"
#include "tlaloc/pjrt/pjrt_backend.h"

namespace tlaloc {
namespace {

class LaneQwen3 : public ::testing::Test {
 protected:
  void SetUp() override {
    lane_ = pjrt::testing::TestLane();
    ASSERT_TRUE(lane_.error.empty()) << lane_.error;
    if (!lane_.skip.empty()) GTEST_SKIP() << lane_.skip;
  }
  // The lane's plugin with `devices` devices (cpu_device_count; CPU-family plugins only).
  std::shared_ptr<Backend> Plugin(int devices) {
    pjrt::SessionOptions o;
    o.target = lane_.target;
    if (devices > 1) o.cpu_device_count = devices;
    auto b = pjrt::MakePjrtBackend(o);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (b.ok() && static_cast<int>((*b)->devices().size()) < devices) {
      ADD_FAILURE() << (*b)->name() << " has " << (*b)->devices().size() << " devices, asked "
                    << devices;
      return nullptr;
    }
    return b.ok() ? std::shared_ptr<Backend>(std::move(*b)) : nullptr;
  }

  // Largest |a - b| over two f32 logit literals, printed with the largest |logit|; bounded by
  // 1e-4 of that on another plugin, zero on Tlaloc's.
  void ExpectLogitsClose(const std::string& what, const Literal& got, const Literal& want) {
    ASSERT_EQ(got.type(), want.type()) << what;
    auto x = got.span<float>(), y = want.span<float>();
    double worst = 0, scale = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::fabs(double{x[i]} - y[i]));
      scale = std::max(scale, std::fabs(double{y[i]}));
    }
    RecordProperty(what + "_largest_logit_difference", std::to_string(worst));
    std::printf("  %s: largest logit difference %.3g (largest |logit| %.3g)\n", what.c_str(), worst,
                scale);
    if (lane_.is_tlaloc_plugin()) {
      EXPECT_EQ(worst, 0) << what;
    } else {
      EXPECT_LE(worst, 1e-4 * std::max(1.0, scale)) << what;
    }
  }

  // Generates from the same weights on the interpreter and on the plugin, `devices` of each
  // (a model mesh when more than one), and compares ids, prefill and decode logits.
  void Compare(const std::string& what, const io::ModelConfig& c, int devices,
               const nn::SamplingParams& sampled = {1.3, 0, 1.0}) {
    std::optional<Mesh> mesh;
    if (devices > 1) {
      auto m = Mesh::Parse("model=" + std::to_string(devices));
      ASSERT_TRUE(m.ok());
      mesh = *m;
    }
    std::shared_ptr<Backend> plugin = Plugin(devices);
    ASSERT_NE(plugin, nullptr);
    auto weights = testing::RandomWeightsAsStored(c, 11);
    auto a = generate::Generator::Create(c, weights, ElementType::kF32,
                                         MakeInterpreterBackend({}, devices), mesh);
    auto b = generate::Generator::Create(c, weights, ElementType::kF32, plugin, mesh);
    ASSERT_TRUE(a.ok()) << what << ": " << a.status().ToString();
    ASSERT_TRUE(b.ok()) << what << ": " << b.status().ToString();
    const std::vector<std::vector<int32_t>> prompts = {
        {5, 17, 42, 8, 63}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}};
    generate::GenerateOptions o;
    o.max_new_tokens = 8;
    o.row_sampling = {nn::SamplingParams{}, sampled};  // row 0 greedy, row 1 sampled
    o.row_seeds = {0, 99};
    auto want = (*a)->Generate(prompts, o);
    auto got = (*b)->Generate(prompts, o);
    ASSERT_TRUE(want.ok()) << what << ": " << want.status().ToString();
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    for (size_t r = 0; r < prompts.size(); ++r) {
      EXPECT_EQ((*got)[r].generated_ids, (*want)[r].generated_ids)
          << what << ", row " << r << (r ? " (sampled)" : " (greedy)");
      EXPECT_EQ((*want)[r].generated_ids.size(), 8u);
    }
    auto pa = (*a)->Prefill({prompts[1]}, 64, {}, 0);
    auto pb = (*b)->Prefill({prompts[1]}, 64, {}, 0);
    ASSERT_TRUE(pa.ok()) << pa.status().ToString();
    ASSERT_TRUE(pb.ok()) << what << ": " << pb.status().ToString();
    EXPECT_EQ(pb->tokens, pa->tokens) << what;
    ExpectLogitsClose(what + "_prefill", pb->logits, pa->logits);
    auto da = (*a)->DecodeStep(pa->tokens, {19}, {}, 0, 1);
    auto db = (*b)->DecodeStep(pa->tokens, {19}, {}, 0, 1);
    ASSERT_TRUE(da.ok()) << da.status().ToString();
    ASSERT_TRUE(db.ok()) << what << ": " << db.status().ToString();
    EXPECT_EQ(db->tokens, da->tokens) << what;
    ExpectLogitsClose(what + "_decode", db->logits, da->logits);
  }

  pjrt::testing::Lane lane_;
};

io::ModelConfig Dense() {
  return testing::TinyQwen3Config({.vocab_size = 96, .initializer_range = 0.2});
}
io::ModelConfig Moe() { return testing::AsTinyMoe(Dense()); }
io::ModelConfig Int8() {
  io::ModelConfig c = Dense();
  c.quantization = io::WeightQuantization{};
  return c;
}

TEST_F(LaneQwen3, DenseMatchesTheInterpreter) { Compare("dense", Dense(), 1); }
TEST_F(LaneQwen3, MoeMatchesTheInterpreter) { Compare("moe", Moe(), 1); }
TEST_F(LaneQwen3, Int8MatchesTheInterpreter) { Compare("int8", Int8(), 1); }

// Sampling as the serving defaults do at Qwen3.5's vocabulary: chlo.top_k of 4,096 over
// 248,320 logits, then top-p, drawn from each row's key.
TEST_F(LaneQwen3, TopK4096AtAFullVocabularyDrawsTheSame) {
  io::ModelConfig c = testing::TinyQwen3Config({.vocab_size = 248320, .initializer_range = 0.2});
  c.num_hidden_layers = 1;
  c.layer_types.assign(1, "full_attention");
  models::qwen3::MutableSlidingWindow(c).max_window_layers = 1;
  Compare("top_k_4096_vocab_248320", c, 1, {1.0, 4096, 0.95});
}

// Tensor-parallel generation: per-device programs with explicit collectives, compiled for
// replicas x partitions with the plugin's devices assigned (what `generate --mesh model=N`
// runs).
TEST_F(LaneQwen3, TensorParallelOverTwoAndFourDevices) {
  Compare("dense_model2", Dense(), 2);
  Compare("moe_model2", Moe(), 2);
  Compare("moe_model4", Moe(), 4);
  Compare("int8_model2", Int8(), 2);
}

}  // namespace
}  // namespace tlaloc
