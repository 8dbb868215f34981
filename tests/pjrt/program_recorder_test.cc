// The programs recorder (TLALOC_PROGRAMS_DIR) and `tlaloc aot`'s compile path: recorded text is
// what the session sent, once per program; PJRT_Compile against Tlaloc's compile-only cpu:N
// topology gives the client compile's memory statistics, and refusals land in errors/.
#include "tlaloc/pjrt/program_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "pjrt/pjrt_test_util.h"
#include "tlaloc/pjrt/aot.h"
#include "tlaloc/pjrt/session.h"

namespace tlaloc::pjrt {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAdd = R"(module @adder {
func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
})";

// Sums over two replicas.
constexpr const char* kAllReduce = R"(module @summed {
func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.all_reduce"(%a) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
})";

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ProgramRecorder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tlaloc-programs-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override {
    unsetenv("TLALOC_PROGRAMS_DIR");
    unsetenv("TLALOC_TPU_PROGRAMS_DIR");
    fs::remove_all(dir_);
  }
  std::unique_ptr<PjrtSession> Open(int devices = 1) {
    SessionOptions o;
    o.target = PjrtTarget::Path(testing::CpuPluginPath());
    o.cpu_device_count = devices;
    auto s = PjrtSession::Open(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  fs::path dir_;
};

TEST_F(ProgramRecorder, EveryCompileIsRecordedOnceWithItsCounts) {
  setenv("TLALOC_TPU_PROGRAMS_DIR", dir_.c_str(), 1);  // the runbook's name works too
  auto session = Open(2);
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->Compile(kAdd).ok());
  ASSERT_TRUE(session->Compile(kAdd).ok());  // the same again: recorded once
  CompileOptions two;
  two.num_replicas = 2;
  ASSERT_TRUE(session->Compile(kAllReduce, two).ok());
  // A refused program is on record too: that is what aot is for.
  EXPECT_FALSE(session->Compile("module @broken { func.func public @main( }").ok());

  auto index = ReadProgramIndex(dir_.string());
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  ASSERT_EQ(index->size(), 3u);
  EXPECT_EQ((*index)[0].module, "adder");
  EXPECT_EQ((*index)[0].platform, "cpu");
  EXPECT_EQ((*index)[0].num_replicas, 1);
  EXPECT_EQ((*index)[1].module, "summed");
  EXPECT_EQ((*index)[1].num_replicas, 2);
  EXPECT_EQ((*index)[2].module, "broken");
  // The text on disk is exactly what was sent, and the options file reads back.
  EXPECT_EQ(Slurp(dir_ / (*index)[0].file), kAdd);
  ASSERT_FALSE((*index)[1].options_file.empty());
  auto options = CompileOptions::Parse(Slurp(dir_ / (*index)[1].options_file));
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->num_replicas, 2);
  // TLALOC_PROGRAMS_DIR wins over the runbook's name.
  const fs::path other = dir_ / "other";
  setenv("TLALOC_PROGRAMS_DIR", other.c_str(), 1);
  EXPECT_EQ(ProgramsDirFromEnvironment().value_or(""), other.string());
}

TEST_F(ProgramRecorder, AnUnwritableFolderFailsTheCompileNamingIt) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  setenv("TLALOC_PROGRAMS_DIR", (dir_ / "file" / "sub").c_str(), 1);
  auto session = Open();
  ASSERT_TRUE(session);
  auto exe = session->Compile(kAdd);
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.status().message().find("TLALOC_PROGRAMS_DIR"), std::string::npos)
      << exe.status().message();
}

TEST_F(ProgramRecorder, BadIndexLinesAreNamed) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / kProgramsIndexFile) << "# comment\na.mlir\tm\tcpu\t1\t1\t0\t10\nb.mlir\tm\n";
  auto index = ReadProgramIndex(dir_.string());
  ASSERT_FALSE(index.ok());
  EXPECT_NE(index.status().message().find("index.tsv:3"), std::string::npos)
      << index.status().message();
  std::ofstream(dir_ / kProgramsIndexFile) << "../x.mlir\tm\tcpu\t1\t1\t0\t10\n";
  EXPECT_FALSE(ReadProgramIndex(dir_.string()).ok());
  std::ofstream(dir_ / kProgramsIndexFile) << "a.mlir\tm\tcpu\tzero\t1\t0\t10\n";
  index = ReadProgramIndex(dir_.string());
  ASSERT_FALSE(index.ok());
  EXPECT_NE(index.status().message().find("num_replicas"), std::string::npos);
  EXPECT_EQ(ReadProgramIndex((dir_ / "none").string()).status().code(), StatusCode::kNotFound);
}

TEST(Aot, CountsCollectivesByOp) {
  EXPECT_EQ(CountCollectives(kAdd), "-");
  EXPECT_EQ(CountCollectives(kAllReduce), "all_reduce:1");
  EXPECT_EQ(CountCollectives("stablehlo.all_gather x stablehlo.all_gather stablehlo.all_to_all"),
            "all_gather:2,all_to_all:1");
}

// What libtpu needs to compile off a TPU VM (docs/BRINGUP.md): without the first it waits on the
// metadata server for minutes, without the second a second process is refused the lockfile.
TEST(Aot, CompileOnlyTpuEnvironmentNamesTheTopologysChips) {
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : CompileOnlyTpuEnvironment("v6e:2x2")) env[k] = v;
  EXPECT_EQ(env["TPU_SKIP_MDS_QUERY"], "1");
  EXPECT_EQ(env["ALLOW_MULTIPLE_LIBTPU_LOAD"], "1");
  EXPECT_EQ(env["TPU_ACCELERATOR_TYPE"], "v6e-4");
  env.clear();
  for (const auto& [k, v] : CompileOnlyTpuEnvironment("v5e:1x1")) env[k] = v;
  EXPECT_EQ(env["TPU_ACCELERATOR_TYPE"], "v5e-1");
  env.clear();
  for (const auto& [k, v] : CompileOnlyTpuEnvironment("cpu")) env[k] = v;
  EXPECT_EQ(env.count("TPU_ACCELERATOR_TYPE"), 0u) << "no chips named, none guessed";
}

TEST_F(ProgramRecorder, AotCompilesForTheTopologyLikeTheClient) {
  setenv("TLALOC_PROGRAMS_DIR", dir_.c_str(), 1);
  auto session = Open(2);
  ASSERT_TRUE(session);
  auto add = session->Compile(kAdd);
  ASSERT_TRUE(add.ok());
  auto client_stats = (*add)->MemoryStats();
  ASSERT_TRUE(client_stats.ok());
  CompileOptions two;
  two.num_replicas = 2;
  ASSERT_TRUE(session->Compile(kAllReduce, two).ok());
  unsetenv("TLALOC_PROGRAMS_DIR");

  auto api = PjrtApi::Load(testing::CpuPluginPath());
  ASSERT_TRUE(api.ok());
  // cpu:2 fits both; the summary's bytes are the client compile's (the interpreter's plan).
  auto report = RunAot(*api, "cpu:2", dir_.string(), (dir_ / "aot2").string());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->platform, "cpu");
  ASSERT_EQ(report->rows.size(), 2u);
  const AotRow& r = report->rows[0];
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.stats.argument_bytes, client_stats->argument_bytes);
  EXPECT_EQ(r.stats.argument_bytes, 32);
  EXPECT_EQ(r.stats.output_bytes, 16);
  EXPECT_EQ(r.stats.alias_bytes, 16);
  EXPECT_EQ(r.stats.temp_bytes, client_stats->temp_bytes);
  EXPECT_EQ(r.total_bytes(), 32 + 16 + r.stats.temp_bytes - 16);
  EXPECT_TRUE(report->rows[1].ok) << report->rows[1].error;
  EXPECT_EQ(report->rows[1].collectives, "all_reduce:1");
  EXPECT_EQ(report->refused(), 0);
  const std::string tsv = Slurp(dir_ / "aot2" / "summary.tsv");
  EXPECT_EQ(tsv.rfind("program\tmodule\treplicas", 0), 0u) << tsv;
  EXPECT_NE(tsv.find("\tadder\t1\t1\t-\t32\t16\t16\t"), std::string::npos) << tsv;
  EXPECT_NE(tsv.find("\tsummed\t2\t1\tall_reduce:1\t"), std::string::npos) << tsv;

  // cpu:1 cannot hold two replicas: refused, with the reason in errors/.
  auto one = RunAot(*api, "cpu:1", dir_.string(), (dir_ / "aot1").string());
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->refused(), 1);
  const std::string stem = one->rows[1].program.substr(0, one->rows[1].program.size() - 5);
  const std::string error = Slurp(dir_ / "aot1" / "errors" / (stem + ".txt"));
  EXPECT_NE(error.find("do not fit the topology's 1 device(s)"), std::string::npos) << error;
  EXPECT_NE(Slurp(dir_ / "aot1" / "summary.tsv").find("refused (errors/" + stem + ".txt)"),
            std::string::npos);

  // Topologies the plugin does not know are refused by name.
  auto bad = RunAot(*api, "v6e:2x2", dir_.string(), (dir_ / "bad").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected cpu:N"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace tlaloc::pjrt
