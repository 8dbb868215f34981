// Checkpoints and the fine-tuning loop: the saved folder loads in the Generator with the same
// weights, optimizer state round-trips, a resumed run repeats an unbroken run's losses, and a
// few steps on a small model lower the loss.
#include "tlaloc/train/finetune.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tlaloc/generate/generator.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/train/checkpoint.h"
#include "train/small_config.h"

namespace tlaloc::train {
namespace {

namespace fs = std::filesystem;

using testing::SmallConfig;

class FinetuneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tlaloc_finetune_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    {
      std::ofstream f(dir_ / "tokenizer.json");
      f << ByteTokenizerJson();
    }
    models::InitOptions init;
    init.seed = 3;
    init.tokenizer_json = dir_ / "tokenizer.json";
    ASSERT_TRUE(models::WriteRandomCheckpoint(SmallConfig(), dir_ / "base", init).ok());
    auto task = MakeDemoTask("reverse", 64, 4, 1);
    ASSERT_TRUE(task.ok());
    std::ofstream f(dir_ / "train.jsonl");
    f << ChatJsonl(task->train);
  }
  void TearDown() override { fs::remove_all(dir_); }

  FinetuneOptions Options(const std::string& out, int64_t steps) const {
    FinetuneOptions o;
    o.model_dir = dir_ / "base";
    o.data_path = dir_ / "train.jsonl";
    o.out_dir = dir_ / out;
    o.steps = steps;
    o.batch = 2;
    o.seq_len = 64;
    o.lr = 1e-2;
    o.seed = 9;
    return o;
  }

  fs::path dir_;
};

TEST_F(FinetuneTest, SavedFolderLoadsInTheGeneratorWithTheSameWeights) {
  const io::ModelConfig config = SmallConfig();
  std::vector<Literal> weights;
  for (auto& t : models::RandomWeights(config, 11, ElementType::kF32))
    weights.push_back(std::move(t.value));
  const fs::path out = dir_ / "saved";
  ASSERT_TRUE(SaveModelFolder(out, dir_ / "base", config, weights, ElementType::kBF16).ok());
  for (const char* f :
       {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json"})
    EXPECT_TRUE(fs::exists(out / f)) << f;

  // Stored in the requested dtype, bit for bit the rounded weights.
  auto ckpt = io::Checkpoint::Open(out);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  const auto specs = models::WeightSpecs(config);
  for (size_t i = 0; i < specs.size(); ++i) {
    auto stored = ckpt->Get(specs[i].name);
    ASSERT_TRUE(stored.ok()) << specs[i].name;
    EXPECT_EQ(stored->element_type(), ElementType::kBF16);
    EXPECT_TRUE(stored->BitwiseEquals(ConvertElementType(weights[i], ElementType::kBF16)))
        << specs[i].name;
  }
  // The Generator reads the folder and computes what the same weights give it directly.
  auto loaded = generate::Generator::Load(out, ElementType::kF32);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  std::vector<Literal> rounded;
  for (const Literal& w : weights)
    rounded.push_back(
        ConvertElementType(ConvertElementType(w, ElementType::kBF16), ElementType::kF32));
  auto direct = generate::Generator::Create(config, std::move(rounded), ElementType::kF32);
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  const std::vector<std::vector<int32_t>> prompt = {{257, 97, 98, 99}};
  auto a = (*loaded)->Prefill(prompt, 64, {}, 0);
  auto b = (*direct)->Prefill(prompt, 64, {}, 0);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->logits.BitwiseEquals(b->logits));
}

TEST_F(FinetuneTest, TrainingStateRoundTripsInOrder) {
  const io::ModelConfig config = SmallConfig();
  std::vector<Literal> masters;
  for (auto& t : models::RandomWeights(config, 2, ElementType::kF32))
    masters.push_back(std::move(t.value));
  NamedLiterals optimizer;
  optimizer.emplace_back("step", Literal::Scalar<int64_t>(7));
  for (const char* prefix : {"v.", "m."})  // not the file's (sorted) order
    for (const auto& spec : models::WeightSpecs(config))
      optimizer.emplace_back(prefix + spec.name,
                             Literal::FromDoubles(ElementType::kF32, spec.shape,
                                                  std::vector<double>(NumElements(spec.shape),
                                                                      prefix[0] == 'm' ? 0.5 : 2)));
  TrainerState state;
  state.step = 7;
  state.seed = 123;
  state.batch = 2;
  state.seq_len = 64;
  state.lr = 0.01;
  ASSERT_TRUE(SaveTrainingState(dir_ / "state", config, optimizer, masters, state).ok());
  auto loaded = LoadTrainingState(dir_ / "state", config);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->state.step, 7);
  EXPECT_EQ(loaded->state.seed, 123u);
  ASSERT_EQ(loaded->optimizer_state.size(), optimizer.size());
  for (size_t i = 0; i < optimizer.size(); ++i) {
    EXPECT_EQ(loaded->optimizer_state[i].first, optimizer[i].first);
    EXPECT_TRUE(loaded->optimizer_state[i].second.BitwiseEquals(optimizer[i].second));
  }
  ASSERT_EQ(loaded->master_weights.size(), masters.size());
  for (size_t i = 0; i < masters.size(); ++i)
    EXPECT_TRUE(loaded->master_weights[i].BitwiseEquals(masters[i]));
  // Another model's config is refused by name.
  io::ModelConfig other = config;
  other.hidden_size = 64;
  auto wrong = LoadTrainingState(dir_ / "state", other);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("master."), std::string::npos);
  EXPECT_FALSE(LoadTrainingState(dir_ / "nowhere", config).ok());
}

TEST_F(FinetuneTest, LossDecreasesAndTheCheckpointGenerates) {
  auto backend = MakeInterpreterBackend();
  std::vector<double> losses;
  auto result = RunFinetune(Options("run", 12), *backend, [&](const StepRecord& r, int64_t total) {
    EXPECT_EQ(total, 12);
    losses.push_back(r.loss);
  });
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(losses.size(), 12u);
  EXPECT_GT(result->tokens_per_second, 0);
  const double first = (losses[0] + losses[1]) / 2, last = (losses[10] + losses[11]) / 2;
  EXPECT_LT(last, first * 0.8) << "loss " << first << " -> " << last;
  // One JSON line per step in the loss log.
  std::ifstream log(dir_ / "run" / kLossLogFile);
  std::string line;
  int lines = 0;
  while (std::getline(log, line)) ++lines;
  EXPECT_EQ(lines, 12);
  auto gen = generate::Generator::Load(dir_ / "run");
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  EXPECT_EQ((*gen)->dtype(), ElementType::kF32) << "saved in the input's dtype";
  generate::GenerateOptions g;
  g.max_new_tokens = 3;
  auto out = (*gen)->Generate({{257, 97, 98}}, g);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
}

TEST_F(FinetuneTest, ResumedRunRepeatsTheUnbrokenRunsLosses) {
  auto backend = MakeInterpreterBackend();
  auto unbroken = RunFinetune(Options("unbroken", 4), *backend);
  ASSERT_TRUE(unbroken.ok()) << unbroken.status().ToString();
  FinetuneOptions first = Options("first", 2);
  first.schedule_steps = 4;
  ASSERT_TRUE(RunFinetune(first, *backend).ok());
  // Resumed in place, with settings that the saved state overrides.
  FinetuneOptions rest = Options("first", 4);
  rest.model_dir.clear();
  rest.resume_dir = dir_ / "first";
  rest.lr = 123;
  rest.seed = 77;
  auto resumed = RunFinetune(rest, *backend);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  ASSERT_EQ(resumed->first_step, 3);
  ASSERT_EQ(resumed->steps.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(resumed->steps[i].step, unbroken->steps[2 + i].step);
    EXPECT_NEAR(resumed->steps[i].loss, unbroken->steps[2 + i].loss,
                1e-6 * std::abs(unbroken->steps[2 + i].loss))
        << "step " << resumed->steps[i].step;
    EXPECT_DOUBLE_EQ(resumed->steps[i].lr, unbroken->steps[2 + i].lr);
  }
  // The folder now holds the whole run: four log lines and a loadable checkpoint.
  std::ifstream log(dir_ / "first" / kLossLogFile);
  std::string line;
  int lines = 0;
  while (std::getline(log, line)) ++lines;
  EXPECT_EQ(lines, 4);
  EXPECT_TRUE(generate::Generator::Load(dir_ / "first").ok());
}

TEST_F(FinetuneTest, BadOptionsAreRefusedByName) {
  auto backend = MakeInterpreterBackend();
  FinetuneOptions o = Options("bad", 1);
  o.data_path = dir_ / "missing.jsonl";
  auto r = RunFinetune(o, *backend);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing.jsonl"), std::string::npos);
  o = Options("bad", 1);
  o.lr = 0;
  EXPECT_FALSE(RunFinetune(o, *backend).ok());
  o = Options("bad", 1);
  o.resume_dir = dir_ / "base";  // a model folder, not a finetune output
  r = RunFinetune(o, *backend);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("trainer_state.json"), std::string::npos);
  // An int8 checkpoint (dense or MoE): its s8 weights are not trained; the float one is.
  io::ModelConfig int8 = SmallConfig();
  int8.quantization = io::WeightQuantization{};
  const Status refused = CheckFinetuneOptions(Options("bad", 1), &int8);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("int8 checkpoint"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("fine-tune the float checkpoint"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc::train
