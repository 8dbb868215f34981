// Gradients through the MoE block (router and experts) for every expert form, against PyTorch
// (tests/train/moe_torch_reference.py: transformers' loop over experts, autograd in float64),
// and the forms against each other; also the block inside a Qwen3-MoE training step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "testing/oracle.h"
#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/io/safetensors.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/qwen3.h"
#include "tlaloc/nn/moe.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {
namespace {

namespace fs = std::filesystem;

Literal Random(std::vector<int64_t> dims, uint32_t seed, float scale) {
  Literal l(TensorType(ElementType::kF32, std::move(dims)));
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  for (float& x : l.span<float>()) x = d(rng);
  return l;
}

constexpr const char* kNames[] = {"x", "router", "gate", "up", "down"};

// out and the gradients of sum(SparseMoe(x, w) * ct) for x, router, gate, up, down.
StatusOr<std::vector<Literal>> OursWithGrads(const std::vector<Literal>& in, int64_t top_k,
                                             bool norm, nn::MoeForm form) {
  Module m("moe");
  std::vector<Type> types;
  for (const Literal& l : in) types.push_back(Type(l.type()));
  FunctionBuilder fb(&m, "loss", types);
  Tensor out =
      nn::SparseMoe(fb.arg(0), {fb.arg(1), fb.arg(2), fb.arg(3), fb.arg(4)}, top_k, norm, form);
  Tensor loss = Sum(out * fb.arg(5), {0, 1});
  TL_RETURN_IF_ERROR(fb.Return({loss, out}));
  autodiff::GradOptions opts;
  opts.wrt = {0, 1, 2, 3, 4};
  TL_ASSIGN_OR_RETURN(Function * g,
                      autodiff::ValueAndGrad(m, *m.functions().front(), opts, "loss_and_grad"));
  (void)g;
  TL_ASSIGN_OR_RETURN(std::vector<Literal> r, Interpret(m, "loss_and_grad", in));
  r.erase(r.begin());  // the loss; then out and the five gradients
  return r;
}

// max |a - b| over max |b|; a zero reference (a test that checks nothing) fails.
double MaxRelative(const Literal& a, const Literal& b) {
  double scale = 0, diff = 0;
  for (int64_t i = 0; i < b.num_elements(); ++i) {
    scale = std::max(scale, std::fabs(b.GetAsDouble(i)));
    diff = std::max(diff, std::fabs(a.GetAsDouble(i) - b.GetAsDouble(i)));
  }
  EXPECT_GT(scale, 0.0) << "the reference is all zeros";
  return scale > 0 ? diff / scale : diff;
}

TEST(MoeGradients, EveryFormMatchesTorchLoopOverExperts) {
  if (std::string why = testing::PythonMissing("torch numpy"); !why.empty()) TL_ORACLE_MISSING(why);
  const std::string python = testing::OraclePython();
  const int64_t n = 12, h = 16, width = 8, experts = 6, k = 2;
  const std::vector<Literal> in{Random({n, h}, 1, 1.0f),
                                Random({experts, h}, 2, 0.7f),
                                Random({experts, width, h}, 3, 0.4f),
                                Random({experts, width, h}, 4, 0.4f),
                                Random({experts, h, width}, 5, 0.4f),
                                Random({n, h}, 6, 1.0f)};
  const fs::path dir = fs::temp_directory_path() / ("tlaloc_moe_grad_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<io::NamedTensor> tensors;
  for (int i = 0; i < 5; ++i) tensors.push_back({kNames[i], in[i]});
  tensors.push_back({"ct", in[5]});
  ASSERT_TRUE(io::WriteSafetensors(dir / "in.safetensors", tensors).ok());
  for (bool norm : {true, false}) {
    SCOPED_TRACE(norm ? "norm_topk_prob" : "no renormalisation");
    const std::string script =
        std::string(TLALOC_SOURCE_DIR) + "/tests/train/moe_torch_reference.py";
    const std::string cmd = python + " " + script + " " + (dir / "in.safetensors").string() + " " +
                            (dir / "out.safetensors").string() + " " + std::to_string(k) + " " +
                            (norm ? "1" : "0") + " > " + (dir / "log.txt").string() + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "moe_torch_reference.py failed; see " << dir;
    auto ref = io::SafetensorsFile::Open(dir / "out.safetensors");
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    for (nn::MoeForm form : {nn::MoeForm::kRaggedDot, nn::MoeForm::kOneHotPermute,
                             nn::MoeForm::kPairGather, nn::MoeForm::kDenseMasked}) {
      SCOPED_TRACE(std::string(nn::MoeFormName(form)));
      auto ours = OursWithGrads(in, k, norm, form);
      ASSERT_TRUE(ours.ok()) << ours.status().ToString();
      ASSERT_EQ(ours->size(), 6u);
      auto out = (*ref)->Get("out");
      ASSERT_TRUE(out.ok());
      EXPECT_LE(MaxRelative((*ours)[0], *out), 1e-5);
      double worst = 0;
      for (int i = 0; i < 5; ++i) {
        auto g = (*ref)->Get(std::string("grad.") + kNames[i]);
        ASSERT_TRUE(g.ok()) << kNames[i];
        ASSERT_EQ((*ours)[1 + i].dims(), g->dims()) << kNames[i];
        const double rel = MaxRelative((*ours)[1 + i], *g);
        // Relative to the tensor's largest gradient, as tests/train/torch_parity_test.cc does.
        EXPECT_LE(rel, 1e-4) << kNames[i] << " gradient";
        worst = std::max(worst, rel);
      }
      std::printf("[torch] %s, norm_topk_prob %d: worst gradient difference %.2e of the largest\n",
                  std::string(nn::MoeFormName(form)).c_str(), norm ? 1 : 0, worst);
    }
  }
  fs::remove_all(dir);
}

// A 2-layer Qwen3-MoE, both layers sparse: 4 experts of width 16, top 2.
io::ModelConfig TinyMoeConfig() {
  io::ModelConfig c = io::DefaultModelConfig(models::qwen3::kQwen3Moe);
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  models::qwen3::MoeConfig& moe_fields = models::qwen3::MutableMoe(c);
  moe_fields.moe_intermediate_size = 16;
  moe_fields.num_experts = 4;
  moe_fields.num_experts_per_tok = 2;
  moe_fields.norm_topk_prob = true;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 128;
  models::qwen3::MutableSlidingWindow(c).max_window_layers = 2;
  c.initializer_range = 0.1;
  c.tie_word_embeddings = false;
  c.rope_theta = 10000;
  c.layer_types.assign(2, "full_attention");
  return c;
}

// The Trainer on a Qwen3-MoE model (both layers sparse, ragged_dot experts): it learns a fixed
// batch, and the router and the stacked experts are trained (their gradients reach them).
TEST(MoeTraining, TrainerLearnsAFixedBatchThroughRouterAndExperts) {
  io::ModelConfig c = TinyMoeConfig();
  ASSERT_TRUE(io::ValidateModelConfig(c).ok());
  std::vector<Literal> initial;
  for (auto& t : models::RandomWeights(c, 1, ElementType::kF32)) initial.push_back(t.value);
  auto backend = MakeInterpreterBackend();
  TrainOptions o;
  o.adamw.lr = 1e-2;
  o.adamw.grad_clip_norm = 1.0;
  std::vector<Literal> start;
  for (const Literal& l : initial) start.push_back(l.Clone());
  auto trainer = Trainer::Create(c, std::move(start), o, *backend, 2, 8);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  std::mt19937 rng(2);
  std::vector<int32_t> ids(16), labels(16);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % c.vocab_size);
  for (int i = 0; i < 16; ++i) labels[i] = (i % 8) + 1 < 8 ? ids[i + 1] : kIgnoreLabel;
  Batch batch{Literal::FromVector<int32_t>({2, 8}, ids),
              Literal::FromVector<int32_t>({2, 8}, labels)};
  double first = 0, last = 0;
  for (int s = 0; s < 15; ++s) {
    auto st = (*trainer)->Step(batch);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    if (s == 0) first = st->loss;
    last = st->loss;
  }
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
  auto w = (*trainer)->Weights();
  ASSERT_TRUE(w.ok());
  const auto specs = models::WeightSpecs(c);
  int moved = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const bool moe =
        specs[i].name.find(".mlp.gate.weight") != std::string::npos || !specs[i].stacked.empty();
    if (!moe) continue;
    double change = 0;
    for (int64_t j = 0; j < initial[i].num_elements(); ++j)
      change = std::max(change, std::fabs((*w)[i].GetAsDouble(j) - initial[i].GetAsDouble(j)));
    EXPECT_GT(change, 1e-4) << specs[i].name << " did not train";
    ++moved;
  }
  EXPECT_EQ(moved, 2 * 4);  // per layer: the router and three stacked projections
}

// output_router_logits asks for transformers' load-balancing loss, which the training forward
// does not compute: the Trainer says so instead of training another objective.
TEST(MoeTraining, TrainerRefusesTheRouterAuxLossItDoesNotCompute) {
  io::ModelConfig c = TinyMoeConfig();
  models::qwen3::MutableMoe(c).output_router_logits = true;
  ASSERT_TRUE(io::ValidateModelConfig(c).ok());
  std::vector<Literal> weights;
  for (auto& t : models::RandomWeights(c, 1, ElementType::kF32)) weights.push_back(t.value);
  auto backend = MakeInterpreterBackend();
  auto trainer = Trainer::Create(c, std::move(weights), TrainOptions{}, *backend, 2, 8);
  ASSERT_FALSE(trainer.ok());
  EXPECT_NE(trainer.status().ToString().find("output_router_logits"), std::string::npos)
      << trainer.status().ToString();
}

}  // namespace
}  // namespace tlaloc::train
