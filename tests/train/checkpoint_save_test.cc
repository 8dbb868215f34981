// The save layout of a fine-tuning run (issue 22): each save is a complete checkpoint-N folder
// published into OUT with trainer_state.json last, pruning keeps the newest, a failed save leaves
// the previous one, FindNewestSave ignores what a crash leaves, and a requested stop saves the
// last finished step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/runtime/backend.h"
#include "tlaloc/support/atomic_file.h"
#include "tlaloc/train/checkpoint.h"
#include "tlaloc/train/finetune.h"
#include "train/small_config.h"

namespace tlaloc::train {
namespace {

namespace fs = std::filesystem;

using testing::SmallConfig;

class CheckpointSaveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tlaloc_checkpoint_save_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_TRUE(WriteStringAtomic(dir_ / "tokenizer.json", ByteTokenizerJson()).ok());
    models::InitOptions init;
    init.seed = 3;
    init.tokenizer_json = dir_ / "tokenizer.json";
    ASSERT_TRUE(models::WriteRandomCheckpoint(SmallConfig(), dir_ / "base", init).ok());
    for (auto& t : models::RandomWeights(SmallConfig(), 5, ElementType::kF32))
      weights_.push_back(std::move(t.value));
    optimizer_.emplace_back("step", Literal::Scalar<int64_t>(1));
  }
  void TearDown() override { fs::remove_all(dir_); }

  StatusOr<fs::path> Save(int64_t step, int64_t keep_last) {
    TrainerState state;
    state.step = step;
    state.batch = 2;
    state.seq_len = 16;
    return SaveCheckpoint(dir_ / "out", dir_ / "base", SmallConfig(), weights_, ElementType::kF32,
                          optimizer_, state, keep_last);
  }

  bool HasTemporaries(const fs::path& d) const {
    for (const auto& e : fs::directory_iterator(d))
      if (IsTemporaryName(e.path().filename().string())) return true;
    return false;
  }

  fs::path dir_;
  std::vector<Literal> weights_;
  NamedLiterals optimizer_;
};

TEST_F(CheckpointSaveTest, SavesPublishAndPrune) {
  fs::create_directories(dir_ / "out");
  for (int64_t step : {1, 2, 3}) {
    auto saved = Save(step, 2);
    ASSERT_TRUE(saved.ok()) << saved.status().ToString();
    EXPECT_EQ(*saved, dir_ / "out" / ("checkpoint-" + std::to_string(step)));
  }
  EXPECT_FALSE(fs::exists(dir_ / "out" / "checkpoint-1")) << "--keep-last 2";
  for (const char* f : {"config.json", "model.safetensors", "generation_config.json",
                        "tokenizer.json", "optimizer.safetensors", "trainer_state.json"}) {
    EXPECT_TRUE(fs::exists(dir_ / "out" / "checkpoint-3" / f)) << f;
    EXPECT_TRUE(fs::exists(dir_ / "out" / f)) << f;
  }
  EXPECT_FALSE(HasTemporaries(dir_ / "out"));
  auto newest = FindNewestSave(dir_ / "out");
  ASSERT_TRUE(newest.ok()) << newest.status().ToString();
  EXPECT_EQ(newest->step, 3);
  EXPECT_EQ(newest->dir, dir_ / "out" / "checkpoint-3");
  EXPECT_TRUE(LoadTrainingState(newest->dir, SmallConfig()).ok());
}

TEST_F(CheckpointSaveTest, AFailedSaveLeavesThePreviousOne) {
  fs::create_directories(dir_ / "out");
  ASSERT_TRUE(Save(4, 2).ok());
  weights_.pop_back();  // the save now fails (wrong weight count) after nothing was renamed
  auto failed = Save(5, 2);
  ASSERT_FALSE(failed.ok());
  EXPECT_FALSE(fs::exists(dir_ / "out" / "checkpoint-5"));
  EXPECT_FALSE(HasTemporaries(dir_ / "out"));
  auto newest = FindNewestSave(dir_ / "out");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->step, 4);
}

TEST_F(CheckpointSaveTest, FindNewestSaveIgnoresCrashLeftovers) {
  fs::create_directories(dir_ / "out");
  ASSERT_TRUE(Save(6, 0).ok());
  // A crash mid-publish: OUT has no trainer_state.json; a staging folder of step 7 remains.
  fs::remove(dir_ / "out" / kTrainerStateFile);
  const fs::path staging = TemporarySibling(dir_ / "out" / "checkpoint-7");
  fs::create_directories(staging);
  ASSERT_TRUE(WriteStringAtomic(staging / kTrainerStateFile, "{\"step\": 7}").ok());
  auto newest = FindNewestSave(dir_ / "out");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->step, 6);
  // A resumed run clears the leftovers and keeps the saves; a fresh one drops those too.
  ASSERT_TRUE(ClearStaleSaves(dir_ / "out", dir_ / "base", /*fresh_run=*/false).ok());
  EXPECT_FALSE(fs::exists(staging));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "checkpoint-6"));
  ASSERT_TRUE(ClearStaleSaves(dir_ / "out", dir_ / "base", /*fresh_run=*/true).ok());
  EXPECT_FALSE(fs::exists(dir_ / "out" / "checkpoint-6"));
  auto none = FindNewestSave(dir_ / "out");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("trainer_state.json"), std::string::npos);
}

TEST_F(CheckpointSaveTest, AStopRequestSavesTheLastFinishedStep) {
  {
    std::ofstream f(dir_ / "train.jsonl");
    f << ChatJsonl(MakeDemoTask("reverse", 32, 2, 1)->train);
  }
  FinetuneOptions o;
  o.model_dir = dir_ / "base";
  o.data_path = dir_ / "train.jsonl";
  o.out_dir = dir_ / "run";
  o.steps = 50;
  o.batch = 2;
  o.seq_len = 16;
  int steps_seen = 0;
  o.stop_requested = [&] { return steps_seen >= 3; };
  auto backend = MakeInterpreterBackend();
  auto result = RunFinetune(o, *backend, [&](const StepRecord&, int64_t) { ++steps_seen; });
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(result->stopped);
  EXPECT_EQ(result->saved_step, 3);
  EXPECT_EQ(result->saved_dir, dir_ / "run" / "checkpoint-3");
  auto newest = FindNewestSave(dir_ / "run");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->step, 3);
  // Fine-tuning into the model's own folder is refused before anything is written.
  o.out_dir = dir_ / "base" / ".";
  auto refused = RunFinetune(o, *backend);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("base weights"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc::train
