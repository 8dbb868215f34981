// Gradients and AdamW training of a small Qwen3 against PyTorch (torch 2.x from the checkout's
// venv, third_party_py/, on the CPU), on the same weights and batch: tests/train/torch_reference.py
// writes the model in plain torch and runs autograd, clip_grad_norm_, torch.optim.AdamW and a
// LambdaLR schedule.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "testing/oracle.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/io/safetensors.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/qwen3.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {
namespace {

namespace fs = std::filesystem;

io::ModelConfig ParityConfig() {
  io::ModelConfig c = io::DefaultModelConfig(models::qwen3::kQwen3);
  c.vocab_size = 96;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 64;
  models::qwen3::MutableSlidingWindow(c).max_window_layers = 2;
  c.layer_types.assign(2, "full_attention");
  c.initializer_range = 0.15;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000;
  c.tie_word_embeddings = false;
  return c;
}

TEST(TorchParity, GradientsAndFiveAdamWSteps) {
  if (std::string why = testing::PythonMissing("torch numpy"); !why.empty()) TL_ORACLE_MISSING(why);
  const std::string python = testing::OraclePython();
  const io::ModelConfig c = ParityConfig();
  const int64_t bsz = 2, t = 7;
  const fs::path dir =
      fs::temp_directory_path() / ("tlaloc_torch_parity_" + std::to_string(getpid()));
  fs::create_directories(dir);

  // Weights with non-trivial norm scales, and a batch with ignored labels.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.7, 1.3);
  std::vector<io::NamedTensor> tensors = models::RandomWeights(c, 3, ElementType::kF32);
  std::vector<Literal> weights;
  for (auto& nt : tensors) {
    if (nt.name.find("norm") != std::string::npos)
      for (float& x : nt.value.span<float>()) x = static_cast<float>(u(rng));
    weights.push_back(nt.value);
  }
  std::vector<int32_t> ids(bsz * t), labels(bsz * t);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % c.vocab_size);
  for (int64_t i = 0; i < bsz * t; ++i)
    labels[i] = (i % t) < 2 || (i % t) == t - 1 ? kIgnoreLabel : ids[i + 1];
  Batch batch{Literal::FromVector<int32_t>({bsz, t}, ids),
              Literal::FromVector<int32_t>({bsz, t}, labels)};
  tensors.push_back({"input_ids", batch.input_ids});
  tensors.push_back({"labels", batch.labels});
  ASSERT_TRUE(io::WriteSafetensors(dir / "in.safetensors", tensors).ok());
  ASSERT_TRUE(io::WriteModelConfig(dir / "config.json", c).ok());

  TrainOptions o;
  o.adamw.lr = 3e-3;
  o.adamw.weight_decay = 0.05;
  o.adamw.grad_clip_norm = 1.0;
  o.adamw.warmup_steps = 2;
  o.adamw.total_steps = 5;
  o.adamw.min_lr_ratio = 0.1;
  {
    std::ofstream f(dir / "options.json");
    f << "{\"lr\": " << o.adamw.lr << ", \"beta1\": " << o.adamw.beta1
      << ", \"beta2\": " << o.adamw.beta2 << ", \"eps\": " << o.adamw.eps
      << ", \"weight_decay\": " << o.adamw.weight_decay
      << ", \"grad_clip_norm\": " << o.adamw.grad_clip_norm
      << ", \"warmup_steps\": " << o.adamw.warmup_steps
      << ", \"total_steps\": " << o.adamw.total_steps
      << ", \"min_lr_ratio\": " << o.adamw.min_lr_ratio << ", \"steps\": 5}";
  }
  const std::string script = std::string(TLALOC_SOURCE_DIR) + "/tests/train/torch_reference.py";
  const std::string cmd =
      python + " " + script + " " + (dir / "config.json").string() + " " +
      (dir / "in.safetensors").string() + " " + (dir / "out.safetensors").string() + " " +
      (dir / "options.json").string() + " > " + (dir / "log.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "torch_reference.py failed; see " << dir / "log.txt";
  auto ref = io::SafetensorsFile::Open(dir / "out.safetensors");
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();

  // Gradients of the mean loss.
  auto module = BuildLossAndGradProgram(c, o, bsz, t);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  std::vector<Literal> args = weights;
  args.push_back(batch.input_ids);
  args.push_back(batch.labels);
  auto out = Interpret(**module, "loss_and_grad", args);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto specs = models::WeightSpecs(c);
  ASSERT_EQ(out->size(), 2 + specs.size());
  auto losses = (*ref)->Get("losses");
  ASSERT_TRUE(losses.ok());
  EXPECT_NEAR((*out)[0].GetAsDouble(0), losses->GetAsDouble(0), 1e-5 * losses->GetAsDouble(0));
  double worst = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto g = (*ref)->Get("grad." + specs[i].name);
    ASSERT_TRUE(g.ok()) << specs[i].name;
    const Literal& ours = (*out)[2 + i];
    ASSERT_EQ(ours.num_elements(), g->num_elements());
    double scale = 0, diff = 0;
    for (int64_t k = 0; k < g->num_elements(); ++k) {
      scale = std::max(scale, std::fabs(g->GetAsDouble(k)));
      diff = std::max(diff, std::fabs(g->GetAsDouble(k) - ours.GetAsDouble(k)));
    }
    EXPECT_GT(scale, 0) << specs[i].name;
    EXPECT_LE(diff, 1e-4 * scale) << specs[i].name << ": max |diff| " << diff << " of " << scale;
    worst = std::max(worst, diff / scale);
  }
  std::printf("worst gradient difference vs torch, relative to the tensor's largest: %.2e\n",
              worst);

  // Five AdamW steps through the Trainer, then the loss on the updated weights.
  auto backend = MakeInterpreterBackend();
  auto trainer = Trainer::Create(c, weights, o, *backend, bsz, t);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  for (int s = 0; s < 5; ++s) {
    auto st = (*trainer)->Step(batch);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    const double want = losses->GetAsDouble(s);
    EXPECT_NEAR(st->loss, want, 1e-5 * want) << "step " << s + 1;
  }
  auto final_loss = (*trainer)->EvalLoss(batch);
  ASSERT_TRUE(final_loss.ok());
  const double want = losses->GetAsDouble(5);
  EXPECT_NEAR(*final_loss, want, 1e-5 * want);
  std::printf("loss after 5 AdamW steps: tlaloc %.8f, torch %.8f (start %.8f)\n", *final_loss, want,
              losses->GetAsDouble(0));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tlaloc::train
