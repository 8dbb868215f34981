// `tlaloc aot`'s path on real programs: a tiny Qwen3's prefill and decode steps and a train step,
// run through Tlaloc's PJRT plugin with TLALOC_PROGRAMS_DIR set, are recorded; compiled again for
// the compile-only cpu:1 topology (no client), each summary row's bytes are those the program's
// types give (arguments, outputs, donated caches / weights and moments counted once) and the
// temporaries of the interpreter's plan that a client compile reports.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "models/qwen3_reference.h"
#include "pjrt/pjrt_test_util.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/pjrt/aot.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/pjrt/program_recorder.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc {
namespace {

namespace fs = std::filesystem;

int64_t Bytes(const Type& t) { return t.is_tensor() ? t.tensor.byte_size() : 0; }

TEST(AotPrograms, RecordedGenerateAndTrainStepsCompileForCpuTopology) {
  const fs::path dir =
      fs::temp_directory_path() / ("tlaloc-aot-programs-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  setenv("TLALOC_PROGRAMS_DIR", dir.c_str(), 1);
  pjrt::SessionOptions so;
  so.target = PjrtTarget::Path(pjrt::testing::CpuPluginPath());
  auto backend = pjrt::MakePjrtBackend(so);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  std::shared_ptr<Backend> plugin = std::move(*backend);

  // A prefill and a decode step.
  io::ModelConfig gc = testing::TinyConfig(false, 4, 2, 8);
  testing::RefModel m = testing::RandomModel(gc, 17);
  auto gen = generate::Generator::Create(m.config, m.literals, ElementType::kF32, plugin);
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  generate::GenerateOptions opts;
  opts.max_new_tokens = 3;
  ASSERT_TRUE((*gen)->Generate({{3, 1, 4}}, opts).ok());

  // A train step.
  io::ModelConfig c = testing::TinyConfig(false, 2, 1, 8);
  std::vector<Literal> weights = testing::RandomModel(c, 5).literals;
  int64_t weight_bytes = 0;
  for (const Literal& w : weights) weight_bytes += w.byte_size();
  std::vector<int32_t> ids(2 * 6), labels(2 * 6);
  std::mt19937 rng(3);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % c.vocab_size);
  for (size_t i = 0; i < ids.size(); ++i) labels[i] = i % 6 == 5 ? train::kIgnoreLabel : ids[i + 1];
  train::TrainOptions o;
  o.loss_chunk = 4;
  auto trainer = train::Trainer::Create(c, weights, o, *plugin, 2, 6);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  ASSERT_TRUE((*trainer)
                  ->Step(train::Batch{Literal::FromVector<int32_t>({2, 6}, ids),
                                      Literal::FromVector<int32_t>({2, 6}, labels)})
                  .ok());
  unsetenv("TLALOC_PROGRAMS_DIR");

  auto api = pjrt::PjrtApi::Load(pjrt::testing::CpuPluginPath());
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  auto report = pjrt::RunAot(*api, "cpu:1", dir.string(), (dir / "aot").string());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_GE(report->rows.size(), 3u) << "prefill, decode and the train step";
  EXPECT_EQ(report->refused(), 0);

  // A client compile of the same text, for the interpreter plan's temporaries.
  auto session = pjrt::PjrtSession::Open(so);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  bool saw_train_step = false, saw_cache_step = false;
  for (const pjrt::AotRow& row : report->rows) {
    SCOPED_TRACE(row.program);
    ASSERT_TRUE(row.ok) << row.error;
    std::ifstream in(dir / row.program);
    std::stringstream text;
    text << in.rdbuf();
    auto module = ParseModule(text.str(), row.program);
    ASSERT_TRUE(module.ok()) << module.status().ToString();
    const Function* f = (*module)->Entry();
    ASSERT_NE(f, nullptr);
    int64_t args = 0, outs = 0, alias = 0;
    for (int i = 0; i < f->num_arguments(); ++i) {
      args += Bytes(f->argument_types()[i]);
      if (f->arg_attrs(i).count("tf.aliasing_output")) alias += Bytes(f->argument_types()[i]);
    }
    for (const Type& t : f->result_types()) outs += Bytes(t);
    EXPECT_EQ(row.stats.argument_bytes, args);
    EXPECT_EQ(row.stats.output_bytes, outs);
    EXPECT_EQ(row.stats.alias_bytes, alias);
    EXPECT_GT(row.stats.temp_bytes, 0);
    EXPECT_EQ(row.total_bytes(), args + outs + row.stats.temp_bytes - alias);
    auto exe = (*session)->Compile(text.str());
    ASSERT_TRUE(exe.ok()) << exe.status().ToString();
    auto stats = (*exe)->MemoryStats();
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(row.stats.temp_bytes, stats->temp_bytes);
    // The train step donates f32 masters and both AdamW moments; the decode step its caches.
    if (alias >= 3 * weight_bytes) saw_train_step = true;
    if (alias > 0 && alias < 3 * weight_bytes) saw_cache_step = true;
  }
  EXPECT_TRUE(saw_train_step) << "no row aliases the weights and two moments";
  EXPECT_TRUE(saw_cache_step) << "no row aliases KV caches";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tlaloc
