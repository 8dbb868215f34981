// The memory budget on real step programs: the interpreter backend's predicted peak (from its
// plan) bounds the peak live bytes measured while a train step, a prefill and decode steps run,
// and a target too small for a step refuses it before it runs, in the Trainer and the Engine.
#include "tlaloc/runtime/memory_budget.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "models/qwen3_reference.h"
#include "small_config.h"
#include "tlaloc/generate/engine.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/models/init.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc {
namespace {

// The interpreter backend, which also runs each execution a second time on copies of its
// arguments through an Executable that reports its peak live bytes (donated arguments passed
// as donated, kept ones kept), and can pretend its target has only `available` bytes.
class MeasuringBackend : public Backend {
 public:
  explicit MeasuringBackend(int64_t available = -1)
      : inner_(MakeInterpreterBackend()), available_(available) {}
  std::string name() const override { return "measuring"; }
  std::vector<DeviceInfo> devices() const override { return inner_->devices(); }
  StatusOr<std::unique_ptr<CompiledProgram>> Compile(std::shared_ptr<const Module> module,
                                                     const std::string& entry) override {
    TL_ASSIGN_OR_RETURN(auto program, inner_->Compile(module, entry));
    TL_ASSIGN_OR_RETURN(auto exe, Executable::Prepare(module, entry));
    programs_[program.get()] = {std::move(exe), 0, 0};
    return program;
  }
  StatusOr<std::unique_ptr<DeviceBuffer>> ToDevice(const Literal& l, int device) override {
    return inner_->ToDevice(l, device);
  }
  StatusOr<Literal> ToHost(const DeviceBuffer& b) override { return inner_->ToHost(b); }
  StatusOr<std::vector<std::unique_ptr<DeviceBuffer>>> Execute(
      CompiledProgram& p, const std::vector<ExecuteArg>& args) override {
    Measured& m = programs_.at(&p);
    std::vector<Literal> inputs, kept;
    for (const ExecuteArg& a : args) {
      TL_ASSIGN_OR_RETURN(Literal l, inner_->ToHost(*a.buffer));
      if (!a.donate) kept.push_back(l);  // shares the storage: the run must keep it
      inputs.push_back(std::move(l));
    }
    ExecutionStats stats;
    TL_RETURN_IF_ERROR(m.exe->Execute(std::move(inputs), &stats).status());
    m.peak = std::max(m.peak, stats.peak_live_bytes);
    TL_ASSIGN_OR_RETURN(ProgramMemoryStats predicted, inner_->MemoryStats(p));
    // The tensors alone: the host overhead (buffer cache, allocator) is no live tensor.
    m.predicted = PredictedPeakBytes(predicted) - predicted.overhead_bytes;
    return inner_->Execute(p, args);
  }
  StatusOr<ProgramMemoryStats> MemoryStats(CompiledProgram& p) override {
    return inner_->MemoryStats(p);
  }
  void set_available(int64_t bytes) { available_ = bytes; }
  StatusOr<int64_t> AvailableDeviceMemory(int device) override {
    if (available_ >= 0) return available_;
    return inner_->AvailableDeviceMemory(device);
  }

  struct Measured {
    std::unique_ptr<Executable> exe;
    int64_t peak = 0, predicted = 0;
  };
  const std::map<CompiledProgram*, Measured>& programs() const { return programs_; }

 private:
  std::unique_ptr<Backend> inner_;
  int64_t available_;
  std::map<CompiledProgram*, Measured> programs_;
};

train::Batch MakeBatch(int64_t b, int64_t t, int64_t vocab) {
  std::mt19937 rng(7);
  std::vector<int32_t> ids(b * t), labels(b * t);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % vocab);
  for (int64_t i = 0; i + 1 < b * t; ++i) labels[i] = ids[i + 1];
  labels.back() = train::kIgnoreLabel;
  return {Literal::FromVector<int32_t>({b, t}, ids), Literal::FromVector<int32_t>({b, t}, labels)};
}

std::vector<Literal> TrainWeights(const io::ModelConfig& c) {
  std::vector<Literal> out;
  for (auto& t : models::RandomWeights(c, 3, ElementType::kF32)) out.push_back(t.value);
  return out;
}

TEST(MemoryBudget, PredictedPeakBoundsAMeasuredTrainStep) {
  MeasuringBackend backend;
  const io::ModelConfig c = train::testing::SmallConfig();
  auto trainer = train::Trainer::Create(c, TrainWeights(c), {}, backend, 2, 16);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  auto step = (*trainer)->Step(MakeBatch(2, 16, c.vocab_size));
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  int measured = 0;
  for (const auto& [program, m] : backend.programs()) {
    if (m.peak == 0) continue;  // eval_loss: compiled, not run
    ++measured;
    EXPECT_GE(m.predicted, m.peak) << m.exe->function().name();
    // Tight enough to refuse only what cannot fit: within 3x of the measured peak.
    EXPECT_LE(m.predicted, 3 * m.peak) << m.exe->function().name();
    std::printf("%s: predicted %lld bytes, measured peak %lld bytes\n",
                m.exe->function().name().c_str(), static_cast<long long>(m.predicted),
                static_cast<long long>(m.peak));
  }
  EXPECT_EQ(measured, 1);
}

TEST(MemoryBudget, PredictedPeakBoundsMeasuredPrefillAndDecodeSteps) {
  auto backend = std::make_shared<MeasuringBackend>();
  const testing::RefModel m = testing::RandomModel(testing::TinyConfig(false, 4, 2, 8), 5);
  auto engine = generate::Engine::Create(m.config, m.literals, ElementType::kF32, backend);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  ASSERT_TRUE((*engine)->Reserve(2, 64).ok());
  std::vector<generate::PrefillRow> rows = {{0, {1, 2, 3, 4, 5}, {}}, {1, {6, 7, 8}, {}}};
  auto first = (*engine)->Prefill(rows);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::vector<generate::DecodeRow> decode = {{0, first->tokens[0], 5, {}, 1},
                                             {1, first->tokens[1], 3, {}, 1}};
  auto next = (*engine)->Decode(decode);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  int measured = 0;
  for (const auto& [program, p] : backend->programs()) {
    if (p.peak == 0) continue;
    ++measured;
    EXPECT_GE(p.predicted, p.peak) << p.exe->function().name();
    EXPECT_LE(p.predicted, 3 * p.peak) << p.exe->function().name();
    std::printf("%s: predicted %lld bytes, measured peak %lld bytes\n",
                p.exe->function().name().c_str(), static_cast<long long>(p.predicted),
                static_cast<long long>(p.peak));
  }
  EXPECT_EQ(measured, 2);
}

TEST(MemoryBudget, TrainerRefusesAStepTheTargetCannotHold) {
  MeasuringBackend backend(64 * 1024);  // 64 KiB free beyond the weights and moments
  const io::ModelConfig c = train::testing::SmallConfig();
  auto trainer = train::Trainer::Create(c, TrainWeights(c), {}, backend, 8, 64);
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.status().code(), StatusCode::kResourceExhausted);
  const std::string& msg = trainer.status().message();
  EXPECT_NE(msg.find("train_step (batch 8 x seq_len 64)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("only 64.0 KiB (65536 bytes) is available"), std::string::npos) << msg;
  EXPECT_NE(msg.find("remat"), std::string::npos) << msg;
  EXPECT_TRUE(backend.programs().begin()->second.peak == 0);  // nothing ran
}

TEST(MemoryBudget, EngineRefusesACacheOrAPrefillTheTargetCannotHold) {
  auto backend = std::make_shared<MeasuringBackend>(1024);
  const testing::RefModel m = testing::RandomModel(testing::TinyConfig(false, 4, 2, 8), 5);
  auto engine = generate::Engine::Create(m.config, m.literals, ElementType::kF32, backend);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  // The cache (2 layers x k, v pools of 4 blocks x 2 x 16 x 8 f32: 16 KiB) is refused before
  // allocating.
  Status reserve = (*engine)->Reserve(1, 64);
  EXPECT_EQ(reserve.code(), StatusCode::kResourceExhausted) << reserve.ToString();
  EXPECT_NE(reserve.message().find(
                "the KV cache (4 x tensor<4x2x16x8xf32>: 4 block(s) of 16 positions for 1 slot(s) "
                "x 64 positions)"),
            std::string::npos)
      << reserve.message();
  EXPECT_NE(reserve.message().find("16.0 KiB (16384 bytes)"), std::string::npos)
      << reserve.message();
  EXPECT_TRUE((*engine)->caches().empty());
  backend->set_available(-1);
  ASSERT_TRUE((*engine)->Reserve(1, 64).ok());
  backend->set_available(1024);  // the cache fits, the prefill's temporaries do not
  // A 3-token prompt runs in the 4-token bucket (Engine::PromptBucket).
  std::vector<generate::PrefillRow> rows = {{0, {1, 2, 3}, {}}};
  auto first = (*engine)->Prefill(rows);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(first.status().message().find(
                "prefill (1 row(s) x 4 tokens, attending over 1 block(s) of 16 positions)"),
            std::string::npos)
      << first.status().message();
  EXPECT_NE(first.status().message().find("--ctx-size"), std::string::npos);
  for (const auto& [program, p] : backend->programs()) EXPECT_EQ(p.peak, 0);  // nothing ran
}

}  // namespace
}  // namespace tlaloc
