// The Qwen3 programs against a plain double-precision forward written in the test, on tiny
// random models: prefill logits, KV-cached decode steps against full recomputation, padding
// and batching, in-place cache updates, and the layer trace.
#include "tlaloc/models/qwen3.h"

#include <gtest/gtest.h>

#include <set>

#include "models/qwen3_reference.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/models/family.h"

namespace tlaloc {
namespace {

using testing::RandomModel;
using testing::RefForward;
using testing::RefModel;
using testing::TinyConfig;

constexpr double kTol = 1e-4;

double MaxAbsDiff(const Literal& logits, int64_t row, const std::vector<double>& ref) {
  const int64_t v = logits.dims()[1];
  auto s = logits.span<float>();
  double m = 0;
  for (int64_t i = 0; i < v; ++i) m = std::max(m, std::abs(s[row * v + i] - ref[i]));
  return m;
}

int32_t ArgmaxOf(const std::vector<double>& x) {
  return static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
}

// Runs prefill then decode steps on the interpreter, holding the caches like a caller would.
class Runner {
 public:
  Runner(const RefModel& m, int64_t batch, int64_t prompt_len, int64_t max_len,
         nn::SamplingParams sampling = {})
      : m_(m), sampling_(sampling) {
    shape_.batch = batch;
    shape_.prompt_len = prompt_len;
    shape_.max_len = max_len;
    shape_.kind = models::StepKind::kPrefill;
    auto pre = models::BuildStep(m.config, shape_);
    EXPECT_TRUE(pre.ok()) << pre.status().ToString();
    shape_.kind = models::StepKind::kDecode;
    auto dec = models::BuildStep(m.config, shape_);
    EXPECT_TRUE(dec.ok()) << dec.status().ToString();
    if (!pre.ok() || !dec.ok()) return;
    prefill_program_ = *pre;
    decode_program_ = *dec;
    auto pe = Executable::Prepare(pre->module, pre->entry);
    EXPECT_TRUE(pe.ok()) << pe.status().ToString();
    auto de = Executable::Prepare(dec->module, dec->entry);
    EXPECT_TRUE(de.ok()) << de.status().ToString();
    if (pe.ok()) prefill_ = std::move(*pe);
    if (de.ok()) decode_ = std::move(*de);
  }
  bool ok() const { return prefill_ && decode_; }

  // Returns (next tokens, logits).
  std::pair<std::vector<int32_t>, Literal> Prefill(const std::vector<std::vector<int32_t>>& p,
                                                   uint64_t seed = 0) {
    const int64_t b = shape_.batch, t = shape_.prompt_len;
    std::vector<int32_t> tok(b * t, 0), pos(b * t), len(b), slots(b);
    for (int64_t r = 0; r < b; ++r) {
      std::copy(p[r].begin(), p[r].end(), tok.begin() + r * t);
      for (int64_t i = 0; i < t; ++i) pos[r * t + i] = static_cast<int32_t>(i);
      len[r] = static_cast<int32_t>(p[r].size());
      slots[r] = static_cast<int32_t>(r);
    }
    std::map<models::Port, Literal> in;
    in[models::Port::kTokens] = Literal::FromVector<int32_t>({b, t}, tok);
    in[models::Port::kPositions] = Literal::FromVector<int32_t>({b, t}, pos);
    in[models::Port::kLengths] = Literal::FromVector<int32_t>({b}, len);
    in[models::Port::kSlots] = Literal::FromVector<int32_t>({b}, slots);
    return Unpack(prefill_->Execute(
        testing::StepArgs(prefill_program_, m_.literals, std::move(in), sampling_, seed, 0)));
  }

  std::pair<std::vector<int32_t>, Literal> Decode(const std::vector<int32_t>& tok,
                                                  const std::vector<int32_t>& pos,
                                                  uint32_t step = 1, uint64_t seed = 0) {
    const int64_t b = shape_.batch;
    std::map<models::Port, Literal> in;
    in[models::Port::kTokens] = Literal::FromVector<int32_t>({b}, tok);
    in[models::Port::kPositions] = Literal::FromVector<int32_t>({b}, pos);
    cache_ptrs_.clear();
    for (auto& c : caches_) cache_ptrs_.push_back(c.data());
    auto args = testing::StepArgs(decode_program_, m_.literals, std::move(in), sampling_, seed,
                                  step, std::move(caches_));
    caches_.clear();
    return Unpack(decode_->Execute(std::move(args)));
  }

  const std::vector<Literal>& caches() const { return caches_; }
  const std::vector<const std::byte*>& cache_ptrs() const { return cache_ptrs_; }

 private:
  std::pair<std::vector<int32_t>, Literal> Unpack(StatusOr<std::vector<Literal>> out) {
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok()) return {};
    const models::ProgramSignature& sig = decode_program_.signature;
    auto t = (*out)[sig.Output(models::Port::kNextTokens)].span<int32_t>();
    std::vector<int32_t> tokens(t.begin(), t.end());
    Literal logits = std::move((*out)[sig.Output(models::Port::kLogits)]);
    caches_.clear();
    for (size_t i = 0; i < sig.outputs.size(); ++i)
      if (sig.outputs[i].aliased_input >= 0) caches_.push_back(std::move((*out)[i]));
    return {std::move(tokens), std::move(logits)};
  }

  const RefModel& m_;
  nn::SamplingParams sampling_;
  models::StepShape shape_;
  models::ModelProgram prefill_program_, decode_program_;
  std::unique_ptr<Executable> prefill_, decode_;
  std::vector<Literal> caches_;
  std::vector<const std::byte*> cache_ptrs_;
};

struct Variant {
  bool tied;
  int64_t heads, kv_heads, head_dim;
};

class Qwen3ProgramTest : public ::testing::TestWithParam<Variant> {};

TEST_P(Qwen3ProgramTest, PrefillMatchesReferenceForPaddedBatch) {
  Variant v = GetParam();
  RefModel m = RandomModel(TinyConfig(v.tied, v.heads, v.kv_heads, v.head_dim), 7);
  Runner run(m, 2, 8, 16);
  ASSERT_TRUE(run.ok());
  std::vector<std::vector<int32_t>> prompts{{5, 17, 3, 90, 44, 2, 61}, {12, 8, 33}};
  auto [next, logits] = run.Prefill(prompts);
  ASSERT_EQ(logits.dims(), (std::vector<int64_t>{2, m.config.vocab_size}));
  for (int r = 0; r < 2; ++r) {
    auto ref = RefForward(m, prompts[r]);
    EXPECT_LT(MaxAbsDiff(logits, r, ref.back()), kTol) << "row " << r;
    EXPECT_EQ(next[r], ArgmaxOf(ref.back())) << "greedy token of row " << r;
  }
}

TEST_P(Qwen3ProgramTest, KvCachedDecodeEqualsFullRecomputation) {
  Variant v = GetParam();
  RefModel m = RandomModel(TinyConfig(v.tied, v.heads, v.kv_heads, v.head_dim), 11);
  // Two rows of different lengths decode together, each at its own position.
  std::vector<std::vector<int32_t>> seqs{{4, 9, 71, 30, 6}, {50, 2}};
  Runner run(m, 2, 8, 32);
  ASSERT_TRUE(run.ok());
  auto [next, logits] = run.Prefill(seqs);
  for (int step = 1; step <= 6; ++step) {
    std::vector<int32_t> pos(2);
    for (int r = 0; r < 2; ++r) {
      seqs[r].push_back(next[r]);
      pos[r] = static_cast<int32_t>(seqs[r].size() - 1);
    }
    std::tie(next, logits) = run.Decode({seqs[0].back(), seqs[1].back()}, pos, step);
    for (int r = 0; r < 2; ++r) {
      auto ref = RefForward(m, seqs[r]);
      EXPECT_LT(MaxAbsDiff(logits, r, ref.back()), kTol) << "step " << step << " row " << r;
      EXPECT_EQ(next[r], ArgmaxOf(ref.back())) << "step " << step << " row " << r;
    }
  }
  // The same logits from the program itself: a fresh prefill over the whole sequence.
  Runner full(m, 1, 16, 32);
  ASSERT_TRUE(full.ok());
  auto [n2, l2] = full.Prefill({seqs[0]});
  auto s1 = logits.span<float>(), s2 = l2.span<float>();
  double diff = 0;
  for (int64_t i = 0; i < m.config.vocab_size; ++i)
    diff = std::max(diff, double(std::abs(s1[i] - s2[i])));
  EXPECT_LT(diff, kTol);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Qwen3ProgramTest,
                         ::testing::Values(Variant{false, 4, 2, 8}, Variant{true, 4, 4, 8},
                                           Variant{false, 6, 2, 16}, Variant{true, 2, 1, 4}));

TEST(Qwen3Program, DecodeUpdatesDonatedCacheInPlace) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 3);
  Runner run(m, 1, 4, 16);
  ASSERT_TRUE(run.ok());
  auto [next, logits] = run.Prefill({{1, 2, 3}});
  run.Decode({next[0]}, {3});
  ASSERT_EQ(run.caches().size(), run.cache_ptrs().size());
  int in_place = 0;
  for (size_t i = 0; i < run.caches().size(); ++i)
    in_place += run.caches()[i].data() == run.cache_ptrs()[i];
  EXPECT_EQ(in_place, static_cast<int>(run.caches().size()))
      << "every donated cache buffer should come back updated in place";
}

TEST(Qwen3Program, MoeMatchesReference) {
  io::ModelConfig c = TinyConfig(false, 4, 2, 8);
  c.architecture = models::qwen3::kQwen3Moe;
  models::qwen3::MoeConfig& moe_fields = models::qwen3::MutableMoe(c);
  moe_fields.num_experts = 4;
  moe_fields.num_experts_per_tok = 2;
  moe_fields.moe_intermediate_size = 16;
  // The forms llama.cpp cannot express, against the double-precision reference: no
  // renormalisation, a dense layer from mlp_only_layers, and every other layer dense from
  // decoder_sparse_step 2 (three layers: dense, sparse, dense).
  struct Variant {
    bool norm;
    std::vector<int64_t> mlp_only;
    int64_t sparse_step, layers;
  };
  for (const Variant& v :
       {Variant{true, {1}, 1, 2}, Variant{false, {1}, 1, 2}, Variant{false, {}, 2, 3}}) {
    const bool norm = v.norm;
    moe_fields.norm_topk_prob = norm;
    moe_fields.mlp_only_layers = v.mlp_only;
    moe_fields.decoder_sparse_step = v.sparse_step;
    c.num_hidden_layers = v.layers;
    models::qwen3::MutableSlidingWindow(c).max_window_layers = v.layers;
    c.layer_types.assign(static_cast<size_t>(v.layers), "full_attention");
    RefModel m = RandomModel(c, 5);
    Runner run(m, 1, 8, 16);
    ASSERT_TRUE(run.ok());
    std::vector<int32_t> seq{7, 3, 88, 14, 9};
    auto [next, logits] = run.Prefill({seq});
    EXPECT_LT(MaxAbsDiff(logits, 0, RefForward(m, seq).back()), kTol)
        << "norm_topk " << norm << ", sparse step " << v.sparse_step;
    seq.push_back(next[0]);
    auto [n2, l2] = run.Decode({next[0]}, {5});
    EXPECT_LT(MaxAbsDiff(l2, 0, RefForward(m, seq).back()), kTol)
        << "norm_topk " << norm << ", sparse step " << v.sparse_step;
  }
}

TEST(Qwen3Program, SamplingIsSeededAndTopKOneIsGreedy) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 13);
  std::vector<std::vector<int32_t>> p{{3, 4, 5}};
  nn::SamplingParams hot{1.5, 0, 0.9};
  Runner a(m, 1, 4, 8, hot), b(m, 1, 4, 8, hot);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<int32_t> ta, tb;
  std::set<int32_t> distinct;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    ta.push_back(a.Prefill(p, seed).first[0]);
    tb.push_back(b.Prefill(p, seed).first[0]);
    distinct.insert(ta.back());
  }
  EXPECT_EQ(ta, tb) << "the same seed must give the same tokens";
  EXPECT_GT(distinct.size(), 1u) << "different seeds should draw different tokens at T=1.5";
  Runner k1(m, 1, 4, 8, nn::SamplingParams{0.7, 1, 1.0});
  ASSERT_TRUE(k1.ok());
  auto ref = RefForward(m, p[0]);
  for (uint64_t seed = 0; seed < 3; ++seed)
    EXPECT_EQ(k1.Prefill(p, seed).first[0], ArgmaxOf(ref.back()));
  // top_p tiny keeps only the most likely token.
  Runner p0(m, 1, 4, 8, nn::SamplingParams{1.0, 0, 1e-6});
  ASSERT_TRUE(p0.ok());
  for (uint64_t seed = 0; seed < 3; ++seed)
    EXPECT_EQ(p0.Prefill(p, seed).first[0], ArgmaxOf(ref.back()));
}

TEST(Qwen3Program, WeightsAreParametersAndLayersAreTraced) {
  io::ModelConfig c = TinyConfig(false, 4, 2, 8);
  models::StepShape shape;
  shape.batch = 1;
  shape.prompt_len = 4;
  shape.max_len = 8;
  nn::LayerTrace trace;
  auto program = models::BuildStep(c, shape, &trace);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const Function* fn = program->module->functions().front().get();
  const size_t nweights = models::WeightSpecs(c).size();
  // Weights, tokens, positions, the six sampling inputs (min_p included; no penalty inputs
  // unless shape.penalties), and a K and a V cache per layer.
  const auto& sig = program->signature;
  EXPECT_EQ(fn->entry().num_arguments(), static_cast<int>(sig.inputs.size()));
  EXPECT_EQ(sig.Inputs(models::Port::kWeight).size(), nweights);
  EXPECT_EQ(sig.inputs.size(), nweights + 8 + 2 * c.num_hidden_layers);
  EXPECT_EQ(sig.Input(models::Port::kLogitBias), -1);
  EXPECT_EQ(sig.Outputs(models::Port::kKCache).size(), static_cast<size_t>(c.num_hidden_layers));
  // No weight-sized constant: the weights enter only as parameters.
  for (const auto& op : fn->entry().operations()) {
    if (op->name() == "stablehlo.constant") {
      EXPECT_LT(op->result(0).tensor_type().num_elements(), c.hidden_size * c.hidden_size);
    }
  }
  EXPECT_EQ(trace.Find(nn::kAttentionLayer).size(), static_cast<size_t>(c.num_hidden_layers));
  EXPECT_EQ(trace.Find(nn::kRmsNormLayer).size(), static_cast<size_t>(4 * c.num_hidden_layers + 1));
  EXPECT_EQ(trace.Find(nn::kRotaryEmbeddingLayer).size(),
            static_cast<size_t>(2 * c.num_hidden_layers));
  EXPECT_EQ(trace.Find(nn::kSiluAndMulLayer).size(), static_cast<size_t>(c.num_hidden_layers));
  for (const auto& r : trace.records())
    EXPECT_LT(r.begin_op, r.end_op) << r.kernel << " " << r.path;
  EXPECT_EQ(trace.Find(nn::kAttentionLayer)[1].path, "model.layers.1.self_attn.attn");
}

TEST(Qwen3Program, RefusesUnsupportedConfigs) {
  io::ModelConfig c = TinyConfig(false, 4, 2, 8);
  c.hidden_act = "gelu";
  models::StepShape shape;
  shape.kind = models::StepKind::kPrefill;
  shape.prompt_len = 4;
  shape.max_len = 8;
  auto m = models::BuildStep(c, shape);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("hidden_act"), std::string::npos) << m.status().ToString();
  c = TinyConfig(false, 4, 2, 8);
  shape.prompt_len = 9;
  m = models::BuildStep(c, shape);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("max_len"), std::string::npos) << m.status().ToString();
}

}  // namespace
}  // namespace tlaloc
